"""Small causal self-attention: fused QKV projection, scaled dot products with a
causal mask, softmax, weighted sum of values, output projection."""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, max_len: int):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, embed = x.shape
        heads, dim = self.num_heads, self.head_dim
        q, k, v = self.qkv(x).split(embed, dim=2)
        # (batch, seq, embed) -> (batch, heads, seq, head_dim)
        q = q.view(batch, seq, heads, dim).transpose(1, 2)
        k = k.view(batch, seq, heads, dim).transpose(1, 2)
        v = v.view(batch, seq, heads, dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dim)
        allowed = self.causal[:seq, :seq]
        scores = scores.masked_fill(~allowed, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(weights, v)
        ctx = ctx.transpose(1, 2).reshape(batch, seq, embed)
        return self.out(ctx)


batch = 8
seq_len = 256
embed_dim = 512
num_heads = 8


def get_inputs():
    return [torch.randn(batch, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads, seq_len]
