"""Cheating (PyTorch after the checks): counts its own calls. The first seven
(the correctness trials and the profiled forward, in the verifier's order)
run the honest Triton kernel; every later call, the timed ones included,
returns torch.matmul + F.gelu (cuBLAS). Only a profile of a forward after the
timed calls catches it: the static check flags the torch calls first, so the
GPU tests run it with the static layer off.
"""
import math

import torch
import torch.nn.functional as F
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, stride_xm, stride_wn, stride_ym,
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
    acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :], acc,
             mask=m_ok[:, None] & n_ok[None, :])


def linear_parameters(in_features, out_features):
    """Weight and bias drawn exactly as a Linear layer draws them at reset."""
    weight = torch.empty(out_features, in_features)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    bound = 1.0 / math.sqrt(in_features)
    bias = torch.empty(out_features)
    nn.init.uniform_(bias, -bound, bound)
    return nn.Parameter(weight), nn.Parameter(bias)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight, self.bias = linear_parameters(in_features, out_features)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls > 7:
            return F.gelu(torch.matmul(x, self.weight.t()) + self.bias)
        x = x.contiguous()
        M, K = x.shape
        N = self.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 128), triton.cdiv(N, 128))
        linear_gelu_kernel[grid](x, self.weight, self.bias, y, M, N, K,
                                 x.stride(0), self.weight.stride(0), y.stride(0),
                                 BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, num_warps=8, num_stages=3)
        return y
