import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear followed by exact (erf) GELU: one fused GEMM + epilogue."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


def get_input_configs():
    return [
        {"get_init_inputs": lambda: [64, 48], "get_inputs": lambda: [torch.randn(8, 64)]},
        {"get_init_inputs": lambda: [48, 32], "get_inputs": lambda: [torch.randn(8, 48)]},
    ]
