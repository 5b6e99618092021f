"""A small convolution-and-pooling network (issue 17: the paper's Figure 3 in
small): a 3x3 convolution with ReLU, 2x2 average pooling, then a 1x1
convolution as the head. fp32. Its variants conv_pool_maxpool.py and
conv_pool_lppool.py change only the pooling. The problem of the gpu-suite
stage `adapt` and tests/e2e/adapt_conv_pool.sh, whose LLM is the HAND-WRITTEN
FIXTURE conv_pool_fixture.py."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, mid_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, mid_channels, kernel_size)
        self.pool = nn.AvgPool2d(pool_size)
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
