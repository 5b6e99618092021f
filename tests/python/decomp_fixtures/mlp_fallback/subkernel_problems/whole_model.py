import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear -> GELU -> Linear -> GELU -> Linear."""

    def __init__(self, input_size, hidden1, hidden2, num_classes):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden1)
        self.fc2 = nn.Linear(hidden1, hidden2)
        self.fc3 = nn.Linear(hidden2, num_classes)

    def forward(self, x):
        x = torch.nn.functional.gelu(self.fc1(x))
        x = torch.nn.functional.gelu(self.fc2(x))
        return self.fc3(x)


batch_size = 8


def get_inputs():
    return [torch.randn(batch_size, 64)]


def get_init_inputs():
    return [64, 48, 32, 10]
