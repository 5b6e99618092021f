import torch
import torch.nn as nn

from .subkernel_implementations.gelu import ModelNew as Gelu


class ModelNew(nn.Module):
    """A composed package whose top level packs its subproblems' outputs: the
    decomposition verifier accepts torch.cat/stack there (toplevel.py), so the
    evaluator's static check must too."""

    def __init__(self):
        super().__init__()
        self.left = Gelu()
        self.right = Gelu()

    def forward(self, x):
        a, b = torch.chunk(x, 2, dim=1)
        joined = torch.cat([self.left(a), self.right(b)], dim=1)
        return torch.stack([joined, joined.transpose(0, 1).contiguous().transpose(0, 1)], dim=0)
