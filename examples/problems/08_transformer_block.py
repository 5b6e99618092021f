"""A small pre-LayerNorm transformer block (GPT style):

    x = x + attention(ln1(x))
    x = x + mlp(ln2(x))        with mlp = Linear(C, 4C), GELU, Linear(4C, C)

Parameters are created in this order: ln1, attention (qkv, out), ln2, mlp
(up, down). A ModelNew must draw its random weights in the same order.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalAttention(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, max_len: int):
        super().__init__()
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
        q = q.view(batch, seq, heads, dim).transpose(1, 2)
        k = k.view(batch, seq, heads, dim).transpose(1, 2)
        v = v.view(batch, seq, heads, dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dim)
        scores = scores.masked_fill(~self.causal[:seq, :seq], float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(ctx.transpose(1, 2).reshape(batch, seq, embed))


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, max_len: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(embed_dim)
        self.attn = CausalAttention(embed_dim, num_heads, max_len)
        self.ln2 = nn.LayerNorm(embed_dim)
        self.up = nn.Linear(embed_dim, 4 * embed_dim)
        self.down = nn.Linear(4 * embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


batch = 8
seq_len = 256
embed_dim = 512
num_heads = 8


def get_inputs():
    return [torch.randn(batch, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads, seq_len]
