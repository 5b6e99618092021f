import functools
import operator

import torch
import torch.nn as nn
import triton
import triton.language as tl


def _relu_py(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n), 0.0), mask=offs < n)


relu_kernel = triton.jit(_relu_py)


@triton.jit
def neg_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, -tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


KERNELS = {"relu": relu_kernel, "neg": neg_kernel}


class _Act(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, which: str):
        y = torch.empty_like(x)
        n = functools.reduce(operator.mul, x.shape, 1)
        KERNELS[which][(triton.cdiv(n, 512),)](x, y, n, BLOCK=512)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad, None


class ModelNew(nn.Module):
    def __init__(self, which="relu"):
        super().__init__()
        self.which = which

    @torch.no_grad()
    def forward(self, x):
        return _Act.apply(x.contiguous(), self.which)
