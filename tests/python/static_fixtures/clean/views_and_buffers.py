import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * scale + tl.load(y_ptr + offs, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale
        self.register_buffer("offset", torch.zeros(1))
        self._ws = None

    def _workspace(self, n, device):
        # a reusable scratch buffer (fresh allocation, never returned)
        if self._ws is None or self._ws.numel() < n:
            self._ws = torch.empty(n, device=device)
        return self._ws

    def forward(self, x, y):
        shape = x.shape
        xf = x.contiguous().view(-1)
        yf = y.expand_as(x).contiguous().view(-1)
        out = torch.empty_like(xf)
        n = xf.numel()
        ws = self._workspace(n, x.device)
        assert ws.numel() >= n
        BLOCK = 1024
        grid = (triton.cdiv(n, BLOCK),)
        scale_add_kernel[grid](xf, yf, out, n, float(self.scale), BLOCK=BLOCK)
        out = out.view(shape).permute(0, 1, 2).contiguous()
        out = out.unsqueeze(0).squeeze(0).transpose(0, 1).transpose(0, 1)
        return out.to(x.dtype)
