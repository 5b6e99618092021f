import torch


class ModelNew(torch.nn.Module):
    def forward(self, x)  # expect: syntax-error
        return x
