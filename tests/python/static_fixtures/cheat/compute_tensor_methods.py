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


class ModelNew(nn.Module):
    def forward(self, x, w):
        y = launch_copy(x)
        a = y.matmul(w)  # expect: torch-compute
        b = y.softmax(-1)  # expect: torch-compute
        c = y.sum(dim=0)  # expect: torch-compute
        d = y.exp_()  # expect: torch-compute
        e = y.masked_fill(y.isnan(), 0.0)  # expect: torch-compute
        return launch_copy(y.contiguous().view(-1).reshape(y.shape))
