"""bf16 causal self-attention (MinGPT's, KernelBench level3/43 in bf16): QKV
projection, scaled dot products with a causal mask, softmax, weighted sum of
values, output projection. Weights and inputs are bfloat16, so the evaluator
judges it at bf16's tolerance (atol = rtol = 1e-2) unless told otherwise.
Its three stages are the subproblems in attention_bf16_stages/ (the paper's
Appendix D; scripts/appendix_d.py)."""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, max_len: int):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim).to(torch.bfloat16)
        self.out = nn.Linear(embed_dim, embed_dim).to(torch.bfloat16)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, embed = x.shape
        heads, dim = self.num_heads, self.head_dim
        q, k, v = self.qkv(x).split(embed, dim=2)
        q = q.reshape(batch, seq, heads, dim).transpose(1, 2)
        k = k.reshape(batch, seq, heads, dim).transpose(1, 2)
        v = v.reshape(batch, seq, heads, dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dim)
        scores = scores.masked_fill(~self.causal[:seq, :seq], float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(ctx.transpose(1, 2).reshape(batch, seq, embed))


batch = 8
seq_len = 256
embed_dim = 768
num_heads = 12


def get_inputs():
    return [torch.randn(batch, seq_len, embed_dim).to(torch.bfloat16)]


def get_init_inputs():
    return [embed_dim, num_heads, seq_len]
