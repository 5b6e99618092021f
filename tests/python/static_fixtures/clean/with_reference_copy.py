"""LLM output that keeps a copy of the reference and a self-test.

Neither the reference Model nor the __main__ block is on ModelNew's data path.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return F.gelu(self.ln(x)) @ x.transpose(-1, -2) + x.sum()


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)), mask=offs < n)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        out = torch.empty_like(x)
        n = x.numel()
        BLOCK = 1024
        gelu_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
        return out


def get_inputs():
    return [torch.randn(8, 64) * 2 + 1]


def get_init_inputs():
    return [64]


if __name__ == "__main__":
    torch.manual_seed(0)
    ref, new = Model(64).cuda(), ModelNew(64).cuda()
    x = get_inputs()[0].cuda()
    print(torch.allclose(ref(x), new(x), atol=1e-4), (ref(x) - new(x)).abs().max())
