import torch
import torch.nn as nn


class Model(nn.Module):
    """Conv2d 3x3 -> ReLU -> MaxPool2d(2)."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(4, 3, 16, 16)]


def get_init_inputs():
    return [3, 8]
