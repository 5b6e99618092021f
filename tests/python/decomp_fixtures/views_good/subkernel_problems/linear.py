import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(4, 6, 16)]


def get_init_inputs():
    return [16]
