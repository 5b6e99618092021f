import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d -> ReLU -> MaxPool2d -> flatten -> Linear."""

    def __init__(self, in_channels, out_channels, image_size, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(out_channels * (image_size // 2) ** 2, num_classes)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv(x)))
        x = x.view(x.size(0), -1)
        return self.fc(x)


def get_inputs():
    return [torch.randn(4, 3, 16, 16)]


def get_init_inputs():
    return [3, 8, 16, 10]
