"""The worker's own trivial Triton kernel, launched once by a pre-started
candidate process (children.warm_candidate) so that Triton's driver, launcher
and compiler are loaded before the candidate's first compile. Never imported
by the server: importing it needs Triton and launching it a GPU."""

import torch
import triton
import triton.language as tl


@triton.jit
def _add_one(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)


def run() -> None:
    x = torch.zeros(16, device="cuda")
    _add_one[(1,)](x, 16, BLOCK=16)
    torch.cuda.synchronize()
    if float(x.sum()) != 16.0:
        raise RuntimeError("the warm-up kernel computed a wrong sum")
