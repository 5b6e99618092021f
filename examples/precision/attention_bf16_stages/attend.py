"""Stage 2 of attention_bf16.py: causal scaled dot-product attention of one
layer's heads (scores, causal mask, softmax, weighted sum of values)."""
import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, max_len: int):
        super().__init__()
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)), persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq, dim = q.shape[-2], q.shape[-1]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dim)
        scores = scores.masked_fill(~self.causal[:seq, :seq], float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


batch = 8
seq_len = 256
num_heads = 12
head_dim = 64


def get_inputs():
    shape = (batch, num_heads, seq_len, head_dim)
    return [torch.randn(shape).to(torch.bfloat16) for _ in range(3)]


def get_init_inputs():
    return [seq_len]
