"""A 3x3 convolution (stride 1, no padding), ReLU, then a learned per-channel bias."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(conv2d(x)) + extra_bias, with extra_bias shaped (C_out, 1, 1)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.extra_bias = nn.Parameter(0.1 * torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        return y + self.extra_bias


batch = 32
in_channels = 16
out_channels = 64
height = 64
width = 64
kernel_size = 3
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
