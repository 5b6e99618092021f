"""Broken (GPU hang): every program spins on a flag in device memory that
nothing ever sets, so the kernel never finishes and the first synchronize
blocks forever. Only a deadline that kills the process ends it.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, flag_ptr, n_elements, BLOCK: tl.constexpr):
    ready = tl.load(flag_ptr, volatile=True)
    while ready == 0:
        ready = tl.load(flag_ptr, volatile=True)
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
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, flag, n, BLOCK=1024)
        return y
