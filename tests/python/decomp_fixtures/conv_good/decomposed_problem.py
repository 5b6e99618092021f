import torch.nn as nn

from subkernel_problems.conv_relu_pool import Model as ConvReluPool
from subkernel_problems.linear import Model as Linear


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, image_size, num_classes):
        super().__init__()
        self.features = ConvReluPool(in_channels, out_channels)
        self.fc = Linear(out_channels * (image_size // 2) ** 2, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)  # a free view: allowed in the top level
        return self.fc(x)
