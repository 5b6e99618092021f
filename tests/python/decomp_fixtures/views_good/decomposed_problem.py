import torch.nn as nn

from subkernel_problems.tanh import Model as Tanh
from subkernel_problems.relu_scale import Model as ReluScale
from subkernel_problems.linear import Model as Linear


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.tanh = Tanh()
        self.relu_scale = ReluScale(2.0)
        self.proj = Linear(dim)

    def forward(self, x):
        # The views stay in the top level (free: no data moves); each
        # subproblem receives a non-contiguous tensor.
        a = self.tanh(x.transpose(0, 1))
        b = self.relu_scale(x.permute(2, 0, 1))
        c = self.proj(x[:, 2:, :])
        return a, b, c
