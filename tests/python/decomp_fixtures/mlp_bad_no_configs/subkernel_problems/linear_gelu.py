import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


# Wrong: ModelNew builds this Model twice with different sizes, so it needs
# get_input_configs().
def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 48]
