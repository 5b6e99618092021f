import torch
import torch.nn as nn
import subprocess  # expect: process


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        return torch.mm(x, self.w)  # expect: torch-compute
