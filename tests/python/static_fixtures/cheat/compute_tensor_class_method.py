import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch_copy(x):
    y = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


import operator


class ModelNew(nn.Module):
    def forward(self, x, w):
        y = launch_copy(x)
        a = torch.Tensor.matmul(y, w)  # expect: torch-compute
        b = type(y).mm(y, w)  # expect: torch-compute
        c = y.__matmul__(w)  # expect: torch-compute
        d = y.__class__.bmm  # expect: torch-compute
        e = operator.matmul(y, w)  # expect: torch-compute
        f = operator.mul(y, 2)  # expect: torch-compute
        return launch_copy(y)
