import torch.nn as nn

from subkernel_problems.linear import Model as Linear
from subkernel_problems.residual_linear_relu import Model as ResidualLinearRelu


class ModelNew(nn.Module):
    def __init__(self, dim, num_blocks, num_classes, p):
        super().__init__()
        # A plain list for iteration; each block is registered through setattr.
        self.blocks = []
        for i in range(num_blocks):
            block = ResidualLinearRelu(dim, p)
            setattr(self, f"block_{i}", block)
            self.blocks.append(block)
        self.head = Linear(dim, num_classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)
