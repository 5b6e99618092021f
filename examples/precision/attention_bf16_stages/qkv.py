"""Stage 1 of attention_bf16.py: the QKV projection, split into heads."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim).to(torch.bfloat16)

    def forward(self, x: torch.Tensor):
        batch, seq, embed = x.shape
        heads, dim = self.num_heads, embed // self.num_heads
        q, k, v = self.qkv(x).split(embed, dim=2)
        return tuple(t.reshape(batch, seq, heads, dim).transpose(1, 2).contiguous() for t in (q, k, v))


batch = 8
seq_len = 256
embed_dim = 768
num_heads = 12


def get_inputs():
    return [torch.randn(batch, seq_len, embed_dim).to(torch.bfloat16)]


def get_init_inputs():
    return [embed_dim, num_heads]
