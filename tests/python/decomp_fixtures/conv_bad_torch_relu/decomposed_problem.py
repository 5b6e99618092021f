import torch
import torch.nn as nn

from subkernel_problems.conv_pool import Model as ConvPool
from subkernel_problems.linear import Model as Linear


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, image_size, num_classes):
        super().__init__()
        self.features = ConvPool(in_channels, out_channels)
        self.fc = Linear(out_channels * (image_size // 2) ** 2, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = torch.relu(x)  # wrong: math in the top level
        x = x.view(x.size(0), -1)
        return self.fc(x)
