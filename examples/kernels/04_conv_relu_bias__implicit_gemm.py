"""Correct: the convolution as an implicit GEMM, with conv bias, ReLU and the
extra per-channel bias fused into the epilogue.

GEMM view: rows m = (image, out_y, out_x), columns = output channels,
reduction k = (in_channel, ky, kx), which is also the weight's memory order.
With stride 1 and no padding the input address splits into a part that depends
only on m and a part that depends only on k, so no bounds checks are needed
beyond m < M and k < K.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv_relu_bias_kernel(x_ptr, w_ptr, conv_b_ptr, extra_b_ptr, y_ptr,
                          M, C_out, K, C_in, H, W, OH, OW,
                          KH: tl.constexpr, KW: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < C_out
    image = offs_m // (OH * OW)
    pix = offs_m % (OH * OW)
    oy = pix // OW
    ox = pix % OW
    row_base = image * (C_in * H * W) + oy * W + ox
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        k_ok = k < K
        ci = k // (KH * KW)
        kk = k % (KH * KW)
        col_off = ci * (H * W) + (kk // KW) * W + (kk % KW)
        a = tl.load(x_ptr + row_base[:, None] + col_off[None, :],
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * K + k[:, None],
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    acc = acc + tl.load(conv_b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    acc = tl.maximum(acc, 0.0)
    acc = acc + tl.load(extra_b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    out_row = image * (C_out * OH * OW) + oy * OW + ox
    tl.store(y_ptr + out_row[:, None] + offs_n[None, :] * (OH * OW), acc,
             mask=m_ok[:, None] & n_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape):
        super().__init__()
        # Same draws, same order as a Conv2d layer (weight, then bias), then the extra bias.
        weight = torch.empty(out_channels, in_channels, kernel_size, kernel_size)
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        fan_in = in_channels * kernel_size * kernel_size
        bound = 1.0 / math.sqrt(fan_in)
        conv_bias = torch.empty(out_channels)
        nn.init.uniform_(conv_bias, -bound, bound)
        self.weight = nn.Parameter(weight)
        self.conv_bias = nn.Parameter(conv_bias)
        self.extra_bias = nn.Parameter(0.1 * torch.randn(bias_shape))
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c_in, h, w = x.shape
        c_out = self.weight.shape[0]
        ks = self.kernel_size
        oh, ow = h - ks + 1, w - ks + 1
        y = torch.empty((n, c_out, oh, ow), device=x.device, dtype=x.dtype)
        M = n * oh * ow
        K = c_in * ks * ks
        grid = (triton.cdiv(M, 128), triton.cdiv(c_out, 64))
        conv_relu_bias_kernel[grid](x, self.weight, self.conv_bias, self.extra_bias, y,
                                    M, c_out, K, c_in, h, w, oh, ow, KH=ks, KW=ks,
                                    BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, num_warps=4, num_stages=2)
        return y
