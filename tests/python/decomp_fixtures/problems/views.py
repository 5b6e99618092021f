"""Three steps, each on a different view of the input, as attention and
channel-mixing code has them: a transpose, a permute and a slice."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        a = torch.tanh(x.transpose(0, 1))
        b = torch.relu(x.permute(2, 0, 1)) * 2.0
        c = self.proj(x[:, 2:, :])
        return a, b, c


def get_inputs():
    return [torch.randn(4, 8, 16)]


def get_init_inputs():
    return [16]
