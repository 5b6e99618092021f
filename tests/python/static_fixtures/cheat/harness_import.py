import importlib

import torch
import torch.nn as nn
import triton
import triton.language as tl

# The harness's own modules read files and enter namespaces for it (issue #37).
import mkevolve_worker.tensorio  # expect: harness-import
from mkevolve_worker import isolation  # expect: harness-import
from mkevolve_worker.isolation import libc  # expect: harness-import


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
    def forward(self, x):
        io = importlib.import_module("mkevolve_worker.tensorio")  # expect: harness-import
        return launch_copy(x)
