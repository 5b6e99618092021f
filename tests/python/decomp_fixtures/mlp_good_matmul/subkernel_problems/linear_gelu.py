import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """GEMM + bias + exact GELU in one epilogue: x @ W^T + b, then 0.5 v (1 + erf(v / sqrt 2))."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        v = x @ self.linear.weight.t() + self.linear.bias
        return 0.5 * v * (1.0 + torch.erf(v / math.sqrt(2.0)))


def get_input_configs():
    return [
        {"get_init_inputs": lambda: [64, 48], "get_inputs": lambda: [torch.randn(8, 64)]},
        {"get_init_inputs": lambda: [48, 32], "get_inputs": lambda: [torch.randn(8, 48)]},
    ]
