"""Stage 3 of attention_bf16.py: heads merged, then the output projection."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim: int):
        super().__init__()
        self.out = nn.Linear(embed_dim, embed_dim).to(torch.bfloat16)

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        batch, heads, seq, dim = ctx.shape
        return self.out(ctx.transpose(1, 2).reshape(batch, seq, heads * dim))


batch = 8
seq_len = 256
num_heads = 12
head_dim = 64


def get_inputs():
    return [torch.randn(batch, num_heads, seq_len, head_dim).to(torch.bfloat16)]


def get_init_inputs():
    return [num_heads * head_dim]
