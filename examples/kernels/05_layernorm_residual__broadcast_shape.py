"""Broken (wrong shape): the values are right, but the output keeps a leading
axis of size 1, (1, tokens, hidden) instead of (tokens, hidden). The shapes
broadcast against each other, so an elementwise allclose would accept it.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_layernorm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, N, stride_row, eps,
                         BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(x_ptr + row * stride_row + cols, mask=mask, other=0.0) \
        + tl.load(r_ptr + row * stride_row + cols, mask=mask, other=0.0)
    mean = tl.sum(h, axis=0) / N
    centered = tl.where(mask, h - mean, 0.0)
    var = tl.sum(centered * centered, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_row + cols, centered * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        # A LayerNorm layer starts at ones/zeros (no random draws); the problem then
        # draws the scale and the shift, in that order.
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        with torch.no_grad():
            self.weight.uniform_(0.5, 1.5)
            self.bias.uniform_(-0.2, 0.2)
        self.eps = 1e-5

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        residual = residual.contiguous()
        rows, n = x.shape
        y = torch.empty_like(x)
        add_layernorm_kernel[(rows,)](x, residual, self.weight, self.bias, y, n, x.stride(0),
                                      self.eps, BLOCK=triton.next_power_of_2(n), num_warps=8)
        return y.view(1, rows, n)
