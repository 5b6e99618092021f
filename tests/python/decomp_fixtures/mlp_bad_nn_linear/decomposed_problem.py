import torch.nn as nn

from subkernel_problems.linear_gelu import Model as LinearGelu


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden1, hidden2, num_classes):
        super().__init__()
        self.fc1 = LinearGelu(input_size, hidden1)
        self.fc2 = LinearGelu(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, num_classes)  # wrong: a torch layer in the top level

    def forward(self, x):
        return self.fc3(self.fc2(self.fc1(x)))
