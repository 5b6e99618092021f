"""Softmax over very wide rows.

Each row has 65536 entries and the inputs come from torch.rand (as in
KernelBench's softmax problems), so every output lies between about 0.9e-5 and
2.4e-5: far below an absolute tolerance of 1e-4. A kernel that writes zeros
passes a plain allclose(atol=1e-4); a verifier must also compare the error with
the scale of the output.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Row-wise softmax of a (rows, width) matrix."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


rows = 128
width = 65536


def get_inputs():
    return [torch.rand(rows, width)]


def get_init_inputs():
    return []
