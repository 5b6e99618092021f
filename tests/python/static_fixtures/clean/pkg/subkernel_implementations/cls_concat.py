import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def concat_kernel(x_ptr, cls_ptr, out_ptr, D, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < total
    e = offs % D
    s = (offs // D) % 2
    b = offs // (2 * D)
    c = tl.load(cls_ptr + e, mask=m)
    v = tl.load(x_ptr + b * D + e, mask=m & (s == 1))
    tl.store(out_ptr + offs, tl.where(s == 0, c, v), mask=m)


class ModelNew(nn.Module):
    def __init__(self, embed_dim):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))

    def forward(self, x, batch_size):
        B = x.shape[0]
        D = x.shape[1]
        out = torch.empty((B, 2, D), device=x.device, dtype=x.dtype)
        total = B * 2 * D
        assert batch_size == B
        concat_kernel[(triton.cdiv(total, 256),)](x, self.cls_token.view(-1), out, D, total, BLOCK=256)
        return out
