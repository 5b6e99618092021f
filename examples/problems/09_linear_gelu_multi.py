"""A subproblem as the decomposer would write it for 06_mlp3: Linear + GELU,
instantiated twice with different shapes, hence get_input_configs().

get_inputs() / get_init_inputs() describe the first instance, so loaders that
know nothing of get_input_configs() still work.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x))


tokens = 1024


def get_inputs():
    return [torch.randn(tokens, 1024)]


def get_init_inputs():
    return [1024, 2048]


def get_input_configs():
    return [
        {"get_init_inputs": lambda: [1024, 2048], "get_inputs": lambda: [torch.randn(tokens, 1024)]},
        {"get_init_inputs": lambda: [2048, 2048], "get_inputs": lambda: [torch.randn(tokens, 2048)]},
    ]
