import torch
import torch.nn as nn


class Model(nn.Module):
    """x + dropout(relu(linear(x))): GEMM with a fused epilogue and residual add."""

    def __init__(self, dim, p):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return x + self.dropout(torch.relu(self.linear(x)))


# Built three times with identical arguments and inputs, so one pair suffices.
def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return [32, 0.25]
