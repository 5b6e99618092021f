"""The variant of conv_pool.py with LPPool2d (norm_type 2: the square root of
the sum of squares over each window) in place of AvgPool2d (issue 17: the
paper's Figure 3 in small). `mkevolve adapt` reuses the conv_pool run's
convolution subkernels for it and evolves only the pooling."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, mid_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, mid_channels, kernel_size)
        self.pool = nn.LPPool2d(2, pool_size)
        self.head = nn.Conv2d(mid_channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(torch.relu(self.conv(x))))


batch = 32
in_channels = 3
mid_channels = 64
out_channels = 128
height = 64
width = 64
kernel_size = 3
pool_size = 2


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, mid_channels, out_channels, kernel_size, pool_size]
