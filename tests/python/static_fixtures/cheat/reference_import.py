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

from reference import Model  # expect: reference-import
from __main__ import get_inputs  # expect: reference-import
import kernelbench  # expect: reference-import
from problem import get_init_inputs  # expect: reference-import
from my_utils import Model as Ref  # expect: reference-import
import mkevolve_worker.coverage  # expect: harness-import
from mkevolve_worker import coverage as collector  # expect: harness-import
import sys


class ModelNew(nn.Module):
    def forward(self, x):
        main = sys.modules["__main__"]  # expect: dynamic-code
        return launch_copy(x)
