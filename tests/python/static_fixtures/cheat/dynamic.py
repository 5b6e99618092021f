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

import importlib
import os
import sys
import pickle  # expect: dynamic-code
import marshal  # expect: dynamic-code

SRC = "torch.mm"


class ModelNew(nn.Module):
    def forward(self, x):
        exec("y = 1")  # expect: dynamic-code
        f = eval(SRC)  # expect: dynamic-code
        code = compile("1", "<s>", "eval")  # expect: dynamic-code
        t = __import__("torch")  # expect: dynamic-code
        m = importlib.import_module(SRC.split(".")[0])  # expect: dynamic-code
        fn = importlib.import_module("torch.nn.functional").relu  # expect: torch-compute
        g = globals()["launch_copy"]  # expect: dynamic-code
        v = vars(self)  # expect: dynamic-code
        finders = sys.meta_path  # expect: dynamic-code
        mods = os.sys.modules  # expect: dynamic-code
        return launch_copy(x)
