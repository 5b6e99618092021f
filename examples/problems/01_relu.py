"""One elementwise op: ReLU over a 2-D activation.

Inputs come from torch.rand, like many KernelBench level-1 problems, so they are
never negative. A kernel that returns its input unchanged matches on these
inputs; only a trial with signed inputs exposes it.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = max(x, 0), elementwise."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


rows = 4096
cols = 4096


def get_inputs():
    return [torch.rand(rows, cols)]


def get_init_inputs():
    return []
