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

import builtins
import gc
import os
import sys
import time
import unittest.mock  # expect: patching
import torch.nn.functional as F

torch.allclose = lambda *a, **k: True  # expect: patching
time.perf_counter = lambda: 0.0  # expect: patching
torch.cuda.Event = object  # expect: patching
setattr(torch, "allclose", None)  # expect: patching
torch.Tensor.__matmul__ = None  # expect: patching
builtins.print = None  # expect: patching
sys.modules["torch.testing"] = None  # expect: patching
F.__dict__["relu"] = None  # expect: patching
os.environ["TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"] = "1"  # expect: patching
sys.settrace(None)  # expect: patching
gc.disable()  # expect: patching
sys.monitoring.free_tool_id(1)  # expect: patching
_hook = sys.gettrace()  # expect: patching


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_forward_hook(lambda m, i, o: o)  # expect: patching

    def forward(self, x):
        return launch_copy(x)
