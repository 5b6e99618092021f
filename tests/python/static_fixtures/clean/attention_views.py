import math
from typing import Optional

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, T, D: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    bh = tl.program_id(1)
    start_m = tl.program_id(0) * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    base = bh * T * D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=offs_m[:, None] < T, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, D), tl.float32)
    for start_n in range(0, T, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < T, other=0.0)
        s = tl.dot(q, tl.trans(k)) * sm_scale
        if CAUSAL:
            s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        v = tl.load(v_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=offs_n[:, None] < T, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        l_i = l_i * alpha + tl.sum(p, 1)
        m_i = m_new
    tl.store(o_ptr + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None], mask=offs_m[:, None] < T)


class ModelNew(nn.Module):
    def __init__(self, n_embd: int, n_head: int, attn_pdrop: float = 0.0, causal: bool = True):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.n_embd = n_embd
        self.causal = causal
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # weight holder only
        self.register_buffer("bias", torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))

    def _launch(self, q, k, v, scale: float, out: Optional[torch.Tensor] = None):
        B, H, T, D = q.shape
        if out is None:
            out = torch.empty_like(q)
        grid = (triton.cdiv(T, 64), B * H)
        attn_fwd_kernel[grid](q, k, v, out, scale, T, D=D, BLOCK_M=64, BLOCK_N=64,
                              CAUSAL=self.causal)
        return out

    def forward(self, x, qkv):
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = qkv.split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2).contiguous()
        q = q.view(B, T, self.n_head, hs).transpose(1, 2).contiguous()
        v = v.view(B, T, self.n_head, hs).transpose(1, 2).contiguous()
        scale = 1.0 / math.sqrt(k.size(-1))
        y = self._launch(q, k, v, scale)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        if y.dtype != x.dtype or y.shape[-1] != self.c_attn.in_features:
            raise RuntimeError(f"bad output {tuple(y.shape)} for {self.c_attn.weight.shape}")
        return y
