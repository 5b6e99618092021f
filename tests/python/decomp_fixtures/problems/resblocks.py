import torch
import torch.nn as nn


class Model(nn.Module):
    """Three identical residual blocks x + dropout(relu(linear(x))), then a Linear head."""

    def __init__(self, dim, num_blocks, num_classes, p):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(num_blocks)])
        self.dropout = nn.Dropout(p)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        for linear in self.blocks:
            x = x + self.dropout(torch.relu(linear(x)))
        return self.head(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return [32, 3, 5, 0.25]
