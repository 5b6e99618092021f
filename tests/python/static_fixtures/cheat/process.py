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
import threading  # expect: threads
from concurrent.futures import ThreadPoolExecutor  # expect: threads
import multiprocessing as mp  # expect: process
import subprocess  # expect: process
import ctypes  # expect: native-code
from torch.utils.cpp_extension import load_inline  # expect: native-code
import socket  # expect: network


class ModelNew(nn.Module):
    def forward(self, x):
        os.system("nvidia-smi")  # expect: process
        pid = os.fork()  # expect: process
        os.kill(pid, 9)  # expect: process
        os.execv("/bin/true", ["true"])  # expect: process
        return launch_copy(x)
