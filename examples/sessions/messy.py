"""HAND-WRITTEN FIXTURE problem for tests/e2e/messy.sh: softmax(gelu(linear(x)), dim=1) * 2,
the problem a new user tried when an honest decomposition was rejected for differing by 1e-8."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(F.gelu(self.fc(x)), dim=1) * 2


batch = 32
in_features = 48
out_features = 40


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
