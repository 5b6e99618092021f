import torch
import torch.nn as nn


class Model(nn.Module):
    """Row softmax written out (max-subtracted exponentials over their sum), then a scale."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        m = x.max(dim=1, keepdim=True).values
        e = torch.exp(x - m)
        return e / e.sum(dim=1, keepdim=True) * self.scale


def get_inputs():
    return [torch.randn(32, 48)]


def get_init_inputs():
    return [2.0]
