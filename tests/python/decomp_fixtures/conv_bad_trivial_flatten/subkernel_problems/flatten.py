import torch
import torch.nn as nn


class Model(nn.Module):
    """Wrong: a subproblem that does no computation."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.flatten(1)


def get_inputs():
    return [torch.randn(4, 8, 8, 8)]


def get_init_inputs():
    return []
