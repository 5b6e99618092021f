"""Broken (segfault that no import gives away): after a correct launch, forward
builds a NumPy view whose second element lies a terabyte past a one-element
buffer (NumPy does not bounds-check such views) and sums it, so the process
dies with SIGSEGV. Nothing in it loads native code; only the crash tells.
"""
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        np.lib.stride_tricks.as_strided(np.zeros(1), shape=(2,), strides=(1 << 40,)).sum()
        return y
