"""Broken (tiny outputs): computes the row maximum and the normalizer, then
stores an accumulator that was never filled, so every output is 0.

Each true output is at most about 2.4e-5, under atol=1e-4, so a plain allclose accepts
the zeros (KernelBench issue 165). The error equals the whole output's norm.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, width, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    lanes = tl.arange(0, BLOCK)
    run_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    for start in range(0, width, BLOCK):
        mask = start + lanes < width
        x = tl.load(x_ptr + row * stride_row + start + lanes, mask=mask, other=float("-inf"))
        run_max = tl.maximum(run_max, x)
    row_max = tl.max(run_max, axis=0)
    out = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, width, BLOCK):
        mask = start + lanes < width
        tl.store(y_ptr + row * stride_row + start + lanes, out * row_max, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, width = x.shape
        y = torch.empty_like(x)
        softmax_row_kernel[(rows,)](x, y, width, x.stride(0), BLOCK=4096, num_warps=16)
        return y
