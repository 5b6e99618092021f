import torch.nn as nn

from subkernel_problems.linear import Model as Linear
from subkernel_problems.residual_linear_relu import Model as ResidualLinearRelu


class ModelNew(nn.Module):
    def __init__(self, dim, num_blocks, num_classes, p):
        super().__init__()
        # wrong: the prompt forbids nn.ModuleList in the top level
        self.blocks = nn.ModuleList([ResidualLinearRelu(dim, p) for _ in range(num_blocks)])
        self.head = Linear(dim, num_classes)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)
