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

_CACHE = {}


class ModelNew(nn.Module):
    _memo = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key in _CACHE:
            return _CACHE[key]  # expect: output-cache
        hit = self._memo.get(key)
        if hit is not None:
            return hit  # expect: output-cache
        y = torch.empty_like(x)
        copy_kernel[(1,)](x, y, x.numel(), BLOCK=1024)
        _CACHE[key] = y  # expect: output-cache
        self._memo.setdefault(key, y)  # expect: output-cache
        return y
