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
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(8))
        self.scale = 2.0

    def forward(self, x):
        y = launch_copy(x)
        n = y.shape[0] * 2 + x.numel() // 3
        z = y * self.scale  # expect: torch-compute
        z = z + self.bias  # expect: torch-compute
        z = -z  # expect: torch-compute
        mask = z > 0  # expect: torch-compute
        z += 1  # expect: torch-compute
        out = torch.where(mask, z, y)  # expect: torch-compute
        return launch_copy(out[:n])
