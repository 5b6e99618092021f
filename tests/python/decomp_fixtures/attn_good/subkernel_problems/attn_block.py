import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)
        self.norm = nn.LayerNorm(embed_dim)
        self.bn = nn.BatchNorm1d(embed_dim)
    def forward(self, x):
        a, _ = self.attn(x, x, x)
        x = self.norm(x + a)
        return self.bn(x.transpose(1, 2)).transpose(1, 2)
def get_inputs():
    return [torch.randn(2, 16, 32)]
def get_init_inputs():
    return [32, 4]
