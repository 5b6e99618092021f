"""Broken (NaN): the online-softmax rescale factor is inverted. On the first
chunk the old running max is -inf, so the factor is exp(+inf) = inf, and
0 * inf = NaN poisons every running sum: the whole output is NaN.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, width, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_row
    y_row = y_ptr + row * stride_row
    lanes = tl.arange(0, BLOCK)
    run_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, width, BLOCK):
        mask = start + lanes < width
        x = tl.load(x_row + start + lanes, mask=mask, other=float("-inf"))
        new_max = tl.maximum(run_max, x)
        empty = new_max == float("-inf")
        scale = tl.where(empty, 0.0, tl.exp(new_max - run_max))
        term = tl.where(empty, 0.0, tl.exp(x - new_max))
        run_sum = run_sum * scale + term
        run_max = new_max
    row_max = tl.max(run_max, axis=0)
    lane_scale = tl.where(run_max == float("-inf"), 0.0, tl.exp(run_max - row_max))
    row_sum = tl.sum(run_sum * lane_scale, axis=0)
    inv = 1.0 / row_sum
    for start in range(0, width, BLOCK):
        mask = start + lanes < width
        x = tl.load(x_row + start + lanes, mask=mask, other=float("-inf"))
        tl.store(y_row + start + lanes, tl.exp(x - row_max) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, width = x.shape
        y = torch.empty_like(x)
        softmax_row_kernel[(rows,)](x, y, width, x.stride(0), BLOCK=4096, num_warps=16)
        return y
