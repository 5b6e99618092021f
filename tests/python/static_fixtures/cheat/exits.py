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

import os
import sys


class ModelNew(nn.Module):
    def forward(self, x):
        y = launch_copy(x)
        if y.numel() == 0:
            sys.exit(0)  # expect: exit
        if y.numel() == 1:
            os._exit(0)  # expect: exit
        if y.numel() == 2:
            exit()  # expect: exit
        if y.numel() == 3:
            raise SystemExit(1)  # expect: exit
        return y
