import torch
import torch.nn as nn


class Model(nn.Module):
    """The final projection as a plain GEMM plus a bias row (what the Triton kernel does),
    the weights held by an nn.Linear so they are initialised as the original's."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.matmul(x, self.linear.weight.t()) + self.linear.bias


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [32, 10]
