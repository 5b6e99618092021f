"""Broken (wrong math): the causal mask is off by one and lets every query see
the next token too (key index <= query index + 1) wherever that key is in a
block the loop visits. Everything else matches the correct flash kernel.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_ok = k0 + offs_k < K
        a = tl.load(x_ptr + offs_m[:, None] * stride_xm + (k0 + offs_k)[None, :],
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * stride_wn + (k0 + offs_k)[:, None],
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :], acc,
             mask=m_ok[:, None] & n_ok[None, :])


@triton.jit
def causal_attention_kernel(qkv_ptr, ctx_ptr, T, H, C, stride_qkv, stride_ctx, scale,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    first_row = (bh // H) * T
    col = (bh % H) * HEAD_DIM
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    m_ok = offs_m < T
    q = tl.load(qkv_ptr + (first_row + offs_m)[:, None] * stride_qkv + col + offs_d[None, :],
                mask=m_ok[:, None], other=0.0)
    run_max = tl.full((BLOCK_M,), -1.0e30, tl.float32)
    run_sum = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    stop = tl.minimum((pid_m + 1) * BLOCK_M, T)
    for start_n in range(0, stop, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_ok = offs_n < T
        # k loaded already transposed: (HEAD_DIM, BLOCK_N)
        kt = tl.load(qkv_ptr + (first_row + offs_n)[None, :] * stride_qkv + C + col + offs_d[:, None],
                     mask=n_ok[None, :], other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        allowed = (offs_n[None, :] <= offs_m[:, None] + 1) & n_ok[None, :]
        s = tl.where(allowed, s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, axis=1))
        alpha = tl.exp(run_max - new_max)
        p = tl.exp(s - new_max[:, None])
        run_sum = run_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(qkv_ptr + (first_row + offs_n)[:, None] * stride_qkv + 2 * C + col + offs_d[None, :],
                    mask=n_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        run_max = new_max
    acc = acc / run_sum[:, None]
    tl.store(ctx_ptr + (first_row + offs_m)[:, None] * stride_ctx + col + offs_d[None, :], acc,
             mask=m_ok[:, None])


def linear_parameters(in_features, out_features):
    """Weight and bias drawn exactly as a Linear layer draws them at reset."""
    weight = torch.empty(out_features, in_features)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    bound = 1.0 / math.sqrt(in_features)
    bias = torch.empty(out_features)
    nn.init.uniform_(bias, -bound, bound)
    return nn.Parameter(weight), nn.Parameter(bias)


def linear(x, weight, bias):
    M, K = x.shape
    N = weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    linear_kernel[grid](x, weight, bias, y, M, N, K, x.stride(0), weight.stride(0), y.stride(0),
                        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=3)
    return y


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int, max_len: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv_weight, self.qkv_bias = linear_parameters(embed_dim, 3 * embed_dim)
        self.out_weight, self.out_bias = linear_parameters(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, embed = x.shape
        tokens = x.contiguous().view(batch * seq, embed)
        qkv = linear(tokens, self.qkv_weight, self.qkv_bias)
        ctx = torch.empty((batch * seq, embed), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(seq, 64), batch * self.num_heads)
        causal_attention_kernel[grid](qkv, ctx, seq, self.num_heads, embed, qkv.stride(0),
                                      ctx.stride(0), 1.0 / math.sqrt(self.head_dim),
                                      HEAD_DIM=self.head_dim, BLOCK_M=64, BLOCK_N=64, num_warps=4)
        return linear(ctx, self.out_weight, self.out_bias).view(batch, seq, embed)
