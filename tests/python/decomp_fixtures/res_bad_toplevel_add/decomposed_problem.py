import torch.nn as nn

from subkernel_problems.linear import Model as Linear
from subkernel_problems.residual_linear_relu import Model as LinearReluDropout


class ModelNew(nn.Module):
    def __init__(self, dim, num_blocks, num_classes, p):
        super().__init__()
        self.blocks = []
        for i in range(num_blocks):
            block = LinearReluDropout(dim, p)
            setattr(self, f"block_{i}", block)
            self.blocks.append(block)
        self.head = Linear(dim, num_classes)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)  # wrong: the residual add is math in the top level
        return self.head(x)
