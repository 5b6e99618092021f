"""Broken (Sakana-style): allocates the output with torch.empty_like and never
writes it; the launched kernel stores nothing (its mask is always false).

If the reference ran just before in the same process and its output block was
freed, the caching allocator may hand that block back, so the "result" is the
reference's own output. Separate processes (or both run orders) defeat it.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nothing_kernel(x_ptr, y_ptr, n_elements, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < 0
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask, other=0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        n = x.numel()
        nothing_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
