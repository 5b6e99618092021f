"""Linear -> GELU -> softmax over the features -> times 2 (a KernelBench level-2 shape)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = torch.nn.functional.gelu(x)
        x = torch.softmax(x, dim=1)
        return x * 2


batch_size = 32


def get_inputs():
    return [torch.randn(batch_size, 64)]


def get_init_inputs():
    return [64, 48]
