import os
import posix
import resource

import torch
import torch.nn as nn
import triton
import triton.language as tl
from os import setns, unshare
import prctl  # expect: privileges


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch_copy(x):
    y = torch.empty_like(x)
    n = x.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


def escape():
    fd = os.open("/proc/1/ns/net", os.O_RDONLY)  # expect: file-io
    setns(fd, 0)  # expect: privileges
    unshare(0)  # expect: privileges
    os.setuid(0)  # expect: privileges
    posix.setresuid(0, 0, 0)  # expect: privileges
    os.chroot("/")  # expect: privileges
    resource.setrlimit(resource.RLIMIT_NOFILE, (1 << 20, 1 << 20))  # expect: privileges


class ModelNew(nn.Module):
    def forward(self, x):
        escape()
        return launch_copy(x)
