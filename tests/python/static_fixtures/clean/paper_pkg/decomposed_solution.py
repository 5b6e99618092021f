import sys
sys.path.insert(0, "outputs/iteration_4")
import torch.nn as nn
from subkernel_implementations.relu import ModelNew as Relu


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.act = Relu()

    def forward(self, x):
        return self.act(x)
