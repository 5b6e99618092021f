# Conv2d as an implicit GEMM, with lots of host-side shape arithmetic.
import math
from typing import Tuple

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def conv_gemm_kernel(x_ptr, w_ptr, b_ptr, y_ptr,
                     N, C, H, W, OC, OH, OW, KH, KW, stride, pad, K,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     EVEN_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n = offs_m // (OH * OW)
    rem = offs_m % (OH * OW)
    oh = rem // OW
    ow = rem % OW
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        c = offs_k // (KH * KW)
        kr = offs_k % (KH * KW)
        kh = kr // KW
        kw = kr % KW
        ih = oh[:, None] * stride - pad + kh[None, :]
        iw = ow[:, None] * stride - pad + kw[None, :]
        ok = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (offs_k[None, :] < K)
        a = tl.load(x_ptr + ((n[:, None] * C + c[None, :]) * H + ih) * W + iw, mask=ok, other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * K + offs_k[:, None],
                    mask=(offs_n[None, :] < OC) & (offs_k[:, None] < K), other=0.0)
        acc += a @ b
    acc += tl.load(b_ptr + offs_n, mask=offs_n < OC, other=0.0)[None, :]
    m_ok = offs_m < N * OH * OW
    y_off = ((n[:, None] * OC + offs_n[None, :]) * OH + oh[:, None]) * OW + ow[:, None]
    tl.store(y_ptr + y_off, acc, mask=m_ok[:, None] & (offs_n[None, :] < OC))


def _out_size(size: int, k: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - k) // stride + 1


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):
        super().__init__()
        self.stride = stride
        self.padding = padding
        self.kernel_size = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        kh, kw = self.kernel_size
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels, kh, kw))
        self.bias = nn.Parameter(torch.empty(out_channels))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in = in_channels * kh * kw
        bound = 1.0 / math.sqrt(fan_in)
        nn.init.uniform_(self.bias, -bound, bound)
        # weight preparation at construction is allowed
        self.register_buffer("w_flat", self.weight.detach().reshape(out_channels, -1).clone())

    def _grid(self, M: int, OC: int):
        return lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(OC, meta["BLOCK_N"]))

    def forward(self, x):
        N, C, H, W = x.shape
        OC = self.weight.shape[0]
        KH, KW = self.kernel_size
        OH = _out_size(H, KH, self.stride, self.padding)
        OW = _out_size(W, KW, self.stride, self.padding)
        K = C * KH * KW
        M = N * OH * OW
        if M == 0 or OH <= 0:
            raise ValueError("empty output")
        y = torch.empty((N, OC, OH, OW), device=x.device, dtype=x.dtype)
        block_m = 64 if M >= 64 else max(16, triton.next_power_of_2(M))
        w2 = self.weight.view(OC, -1)
        conv_gemm_kernel[self._grid(M, OC)](
            x.contiguous(), w2, self.bias, y,
            N, C, H, W, OC, OH, OW, KH, KW, self.stride, self.padding, K,
            BLOCK_M=block_m, BLOCK_N=64, BLOCK_K=32,
        )
        total = N * OC * OH * OW
        assert y.numel() == total and -total < 0
        return y
