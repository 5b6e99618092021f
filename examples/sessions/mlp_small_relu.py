"""HAND-WRITTEN FIXTURE problem for the CPU end-to-end test of `mkevolve adapt`
(tests/e2e/adapt.sh): mlp_small.py with ReLU in place of GELU, the variant the
earlier run's subkernels are adapted to."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        return self.fc3(h)


tokens = 64
in_features = 32
hidden = 64
out_features = 16


def get_inputs():
    return [torch.randn(tokens, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
