import torch.nn as nn

from subkernel_problems.linear import Model as Linear
from subkernel_problems.linear_gelu import Model as LinearGelu


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden1, hidden2, num_classes):
        super().__init__()
        # Wrong: the output layer is created first, so it draws the RNG values
        # the original spends on fc1.
        self.fc3 = Linear(hidden2, num_classes)
        self.fc1 = LinearGelu(input_size, hidden1)
        self.fc2 = LinearGelu(hidden1, hidden2)

    def forward(self, x):
        return self.fc3(self.fc2(self.fc1(x)))
