import torch.nn as nn

from subkernel_problems.linear import Model as Linear
from subkernel_problems.linear_gelu import Model as LinearGelu


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden1, hidden2, num_classes):
        super().__init__()
        # Same creation order as the original: fc1, fc2, fc3.
        self.fc1 = LinearGelu(input_size, hidden1)
        self.fc2 = LinearGelu(hidden1, hidden2)
        self.fc3 = Linear(hidden2, num_classes)

    def forward(self, x):
        x = self.fc1(x)
        x = self.fc2(x)
        return self.fc3(x)
