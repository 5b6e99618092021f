"""Patch embedding, two attention blocks (MultiheadAttention, LayerNorm, BatchNorm1d in
train mode), and a mean-pool head; returns two outputs."""

import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, embed_dim, num_heads, num_layers, num_classes):
        super().__init__()
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=4, stride=4)
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(nn.ModuleDict({
                "attn": nn.MultiheadAttention(embed_dim, num_heads, batch_first=True),
                "norm": nn.LayerNorm(embed_dim),
                "bn": nn.BatchNorm1d(embed_dim),
            }))
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        for layer in self.layers:
            a, _ = layer["attn"](x, x, x)
            x = layer["norm"](x + a)
            x = layer["bn"](x.transpose(1, 2)).transpose(1, 2)
        return self.head(x.mean(dim=1)), x

def get_inputs():
    return [torch.randn(2, 3, 16, 16)]

def get_init_inputs():
    return [32, 4, 2, 7]
