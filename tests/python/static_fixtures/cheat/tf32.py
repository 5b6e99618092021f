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


torch.backends.cuda.matmul.allow_tf32 = True  # expect: tf32
torch.backends.cudnn.allow_tf32 = True  # expect: tf32
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
torch.set_float32_matmul_precision("high")  # expect: tf32
torch.set_float32_matmul_precision("highest")
setattr(torch.backends.cuda.matmul, "allow_tf32", True)  # expect: tf32
torch.backends.cuda.matmul.fp32_precision = "tf32"  # expect: tf32


class ModelNew(nn.Module):
    def forward(self, x):
        return launch_copy(x)
