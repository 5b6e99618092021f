import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, embed_dim):
        super().__init__()
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=4, stride=4)
    def forward(self, x):
        return self.proj(x)
def get_inputs():
    return [torch.randn(2, 3, 16, 16)]
def get_init_inputs():
    return [32]
