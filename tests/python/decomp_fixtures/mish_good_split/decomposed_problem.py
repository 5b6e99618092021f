import torch.nn as nn

from subkernel_problems.linear_mish import Model as LinearMish
from subkernel_problems.row_sum import Model as RowSum


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear_mish = LinearMish(in_features, out_features)
        self.row_sum = RowSum(4)

    def forward(self, x):
        return self.row_sum(self.linear_mish(x))
