import torch.nn as nn

from .subkernel_implementations.proj import ModelNew as Proj
from .subkernel_implementations.kernels import launch_copy


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = Proj()

    def forward(self, x):
        return self.proj(launch_copy(x)) * 2  # expect: torch-compute
