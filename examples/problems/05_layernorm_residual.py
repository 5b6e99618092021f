"""Residual add followed by LayerNorm ("add & norm").

The norm's scale and shift are drawn at random in __init__ (instead of the
default ones and zeros), so a kernel that ignores them does not match.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    """y = LayerNorm(x + residual) over the last dimension."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.2, 0.2)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


tokens = 4096
hidden = 2048


def get_inputs():
    return [torch.randn(tokens, hidden), torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden]
