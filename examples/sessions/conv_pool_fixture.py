"""A HAND-WRITTEN FIXTURE LLM for `mkevolve run` / `mkevolve adapt` on the
convolution-and-pooling network conv_pool.py and its two variants (issue 17,
the paper's Figure 3 in small). It is not a real LLM, and nothing it makes
happen says anything about what an LLM would write.

It speaks the `exec:` provider protocol (docs/LLM.md), as gpu_fixture.py does:
one process per request, the request on stdin, the agent and task in
$MKEVOLVE_AGENT / $MKEVOLVE_TASK, the reply on stdout.

  mkevolve run examples/sessions/conv_pool.py --out runs/cp \\
      --llm 'exec:python3 examples/sessions/conv_pool_fixture.py --state runs/fixture'
  mkevolve adapt runs/cp examples/sessions/conv_pool_maxpool.py --out runs/cp-max --budget 4 \\
      --llm 'exec:python3 examples/sessions/conv_pool_fixture.py --state runs/fixture'

What it answers, by agent and task:

- decompose, task conv_pool: a fixed decomposition into conv_relu (the 3x3
  convolution and its ReLU), avg_pool and pointwise_conv (the 1x1 head).
- decompose, task conv_pool_maxpool / conv_pool_lppool: the same top level with
  avg_pool replaced by max_pool / lp_pool; the files of conv_relu and
  pointwise_conv are the base decomposition's, byte for byte, so `adapt`
  reuses their subkernels.
- generate / debug / optimize for a subproblem: a kernel for it. The two
  convolutions share one implicit-GEMM Triton kernel (from
  examples/kernels/04_conv_relu_bias__implicit_gemm.py, with the ReLU a
  constexpr switch, no extra bias, and a name per file); the three poolings
  have one small Triton kernel each (window = stride = pool size, no padding).
  Replies cycle through tile shapes. None is broken on purpose.
- anything else (split, fuse, judge, postfuse, a whole problem): a reply with no
  files, which the agents treat as a failed attempt.

--cpu answers with torch-only stand-ins instead of Triton kernels, for the
worker's CPU test mode (no GPU, no Triton), as the CPU fixture sessions do: the
same flow can then be checked on any machine (tests/e2e/adapt_conv_pool.sh).
--small answers for copies of the three problems at batch 2 and 16x16 images
(the CPU is slow at the real sizes); --dump writes those copies.

--dump DIR writes every subproblem file (DIR/subkernel_problems/), the first
kernel reply for each (DIR/kernels/), DIR/batch.txt pairing them for
`mkevolve eval --batch`, so each kernel can be evaluated on its own first, and
the three problems at the fixture's sizes (DIR/problems/).

Every kernel reply starts with a comment naming the request's number, so no two
replies are the same file and every candidate is really evaluated (the
counters live in --state, as in gpu_fixture.py).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_fixture import next_number, run_pid  # noqa: E402  (the reply counters)
from mlp_fixture import block  # noqa: E402


def fill(template: str, **values) -> str:
    """template with each @NAME@ replaced; every placeholder must be given."""
    out = template
    for k, v in values.items():
        out = out.replace(f"@{k}@", str(v))
    left = re.findall(r"@[A-Z_]+@", out)
    if left:
        raise KeyError(f"unfilled placeholders {sorted(set(left))}")
    return out


# -- the decomposition -----------------------------------------------------------

# The problems' own sizes, and the small copies --small answers for.
SIZES = {"full": dict(batch=32, height=64, width=64), "small": dict(batch=2, height=16, width=16)}


def shapes(size: str) -> dict[str, str]:
    """Each subproblem's input shape at these sizes (3x3 convolution, no padding; 2x2 pooling)."""
    b, h, w = SIZES[size]["batch"], SIZES[size]["height"], SIZES[size]["width"]
    return {"CONV_IN": f"{b}, 3, {h}, {w}", "POOL_IN": f"{b}, 64, {h - 2}, {w - 2}",
            "HEAD_IN": f"{b}, 64, {(h - 2) // 2}, {(w - 2) // 2}"}


def problem_source(task: str, size: str) -> str:
    """The problem file for task (conv_pool, conv_pool_maxpool, conv_pool_lppool) at these sizes."""
    src = (HERE / f"{task}.py").read_text()
    for k, v in SIZES[size].items():
        line = re.search(rf"^{k} = \d+$", src, re.M)
        if line is None:
            raise ValueError(f"{task}.py has no line '{k} = N'")
        src = src[:line.start()] + f"{k} = {v}" + src[line.end():]
    if size != "full":
        src = (f"# A copy of examples/sessions/{task}.py at {SIZES[size]['batch']} images of "
               f"{SIZES[size]['height']}x{SIZES[size]['width']}, written by conv_pool_fixture.py --dump --{size}.\n" + src)
    return src


POOLS = {
    # subproblem name: (module class in the top level, the variant's problem name)
    "avg_pool": ("AvgPool", "conv_pool"),
    "max_pool": ("MaxPool", "conv_pool_maxpool"),
    "lp_pool": ("LpPool", "conv_pool_lppool"),
}
TASK_POOL = {task: name for name, (_, task) in POOLS.items()}

TOP = '''import torch.nn as nn

from subkernel_problems.conv_relu import Model as ConvRelu
from subkernel_problems.@POOL@ import Model as @CLS@
from subkernel_problems.pointwise_conv import Model as PointwiseConv


class ModelNew(nn.Module):
    def __init__(self, in_channels, mid_channels, out_channels, kernel_size, pool_size):
        super().__init__()
        # Same construction order as the original: conv, pool, head.
        self.conv_relu = ConvRelu(in_channels, mid_channels, kernel_size)
        self.pool = @CLS@(@POOL_ARGS@)
        self.head = PointwiseConv(mid_channels, out_channels)

    def forward(self, x):
        return self.head(self.pool(self.conv_relu(x)))
'''

CONV_RELU = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 convolution (stride 1, no padding) with bias, then ReLU."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(@CONV_IN@)]


def get_init_inputs():
    return [3, 64, 3]
'''

POINTWISE_CONV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The head: a 1x1 convolution with bias (a per-pixel linear map over channels)."""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(@HEAD_IN@)]


def get_init_inputs():
    return [64, 128]
'''

POOL_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """@DOC@"""

    def __init__(self, @INIT_ARGS@):
        super().__init__()
        self.pool = @MODULE@

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(@POOL_IN@)]


def get_init_inputs():
    return [@INIT_VALUES@]
'''

POOL_SPECS = {
    "avg_pool": dict(DOC="Average pooling over pool_size x pool_size windows (stride pool_size, no padding).",
                     INIT_ARGS="pool_size", MODULE="nn.AvgPool2d(pool_size)", INIT_VALUES="2",
                     POOL_ARGS="pool_size"),
    "max_pool": dict(DOC="Max pooling over pool_size x pool_size windows (stride pool_size, no padding).",
                     INIT_ARGS="pool_size", MODULE="nn.MaxPool2d(pool_size)", INIT_VALUES="2",
                     POOL_ARGS="pool_size"),
    "lp_pool": dict(DOC="LP pooling, norm_type 2: sqrt of the sum of squares over each pool_size x pool_size "
                        "window (stride pool_size).",
                    INIT_ARGS="norm_type, pool_size", MODULE="nn.LPPool2d(norm_type, pool_size)",
                    INIT_VALUES="2, 2", POOL_ARGS="2, pool_size"),
}


def subproblems(pool: str, size: str = "full") -> dict[str, str]:
    """The subproblem files of the decomposition with this pooling subproblem."""
    spec = POOL_SPECS[pool]
    sh = shapes(size)
    return {"conv_relu": fill(CONV_RELU, CONV_IN=sh["CONV_IN"]),
            pool: fill(POOL_PROBLEM, DOC=spec["DOC"], INIT_ARGS=spec["INIT_ARGS"], MODULE=spec["MODULE"],
                       INIT_VALUES=spec["INIT_VALUES"], POOL_IN=sh["POOL_IN"]),
            "pointwise_conv": fill(POINTWISE_CONV, HEAD_IN=sh["HEAD_IN"])}


def decomposition(task: str, size: str = "full") -> str | None:
    pool = TASK_POOL.get(task)
    if pool is None:
        return None
    top = fill(TOP, POOL=pool, CLS=POOLS[pool][0], POOL_ARGS=POOL_SPECS[pool]["POOL_ARGS"])
    why = ("The convolution needs whole input windows and the head a whole pixel's channels, so each is a cut; "
           "the ReLU fuses into the convolution's epilogue, and the pooling is a pass of its own.")
    if pool != "avg_pool":
        why = (f"Only the pooling differs from the earlier decomposition: conv_relu and pointwise_conv are "
               f"written again unchanged, and avg_pool becomes {pool}.")
    return (why + "\n\n" + block("decomposed_problem.py", top)
            + "".join(block(f"subkernel_problems/{name}.py", src) for name, src in subproblems(pool, size).items()))


# -- Triton kernels ----------------------------------------------------------------

# The convolution of both conv subproblems: examples/kernels/04_conv_relu_bias__implicit_gemm.py's
# implicit GEMM, with the ReLU a constexpr switch and no extra bias.
CONV_KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def @FN@(x_ptr, w_ptr, b_ptr, y_ptr, M, C_out, K, C_in, H, W, OH, OW,
        KH: tl.constexpr, KW: tl.constexpr, RELU: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # Implicit GEMM: rows m = (image, out_y, out_x), columns = output channels,
    # reduction k = (in_channel, ky, kx), which is also the weight's memory order.
    # Stride 1 and no padding: the input address is a part that depends only on
    # m plus a part that depends only on k.
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_ok = offs_m < M
    n_ok = offs_n < C_out
    image = offs_m // (OH * OW)
    pix = offs_m % (OH * OW)
    oy = pix // OW
    ox = pix % OW
    row_base = image * (C_in * H * W) + oy * W + ox
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        k_ok = k < K
        ci = k // (KH * KW)
        kk = k % (KH * KW)
        col_off = ci * (H * W) + (kk // KW) * W + (kk % KW)
        a = tl.load(x_ptr + row_base[:, None] + col_off[None, :],
                    mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(w_ptr + offs_n[None, :] * K + k[:, None],
                    mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + offs_n, mask=n_ok, other=0.0)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    out_row = image * (C_out * OH * OW) + oy * OW + ox
    tl.store(y_ptr + out_row[:, None] + offs_n[None, :] * (OH * OW), acc,
             mask=m_ok[:, None] & n_ok[None, :])


def conv_parameters(in_channels, out_channels, kernel_size):
    """Weight and bias drawn as nn.Conv2d draws them, in its order."""
    weight = torch.empty(out_channels, in_channels, kernel_size, kernel_size)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    bound = 1.0 / math.sqrt(in_channels * kernel_size * kernel_size)
    bias = torch.empty(out_channels)
    nn.init.uniform_(bias, -bound, bound)
    return nn.Parameter(weight), nn.Parameter(bias)


def conv2d_bias(x, weight, bias, relu):
    x = x.contiguous()
    n, c_in, h, w = x.shape
    c_out, _, kh, kw = weight.shape
    oh, ow = h - kh + 1, w - kw + 1
    y = torch.empty((n, c_out, oh, ow), device=x.device, dtype=x.dtype)
    m = n * oh * ow
    k = c_in * kh * kw
    grid = (triton.cdiv(m, @BM@), triton.cdiv(c_out, @BN@))
    @FN@[grid](x, weight, bias, y, m, c_out, k, c_in, h, w, oh, ow, KH=kh, KW=kw, RELU=relu,
        BLOCK_M=@BM@, BLOCK_N=@BN@, BLOCK_K=32, num_warps=@WARPS@, num_stages=2)
    return y

'''

CONV_MODELS = {
    "conv_relu": '''
class ModelNew(nn.Module):
    """@DOC@"""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.weight, self.bias = conv_parameters(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return conv2d_bias(x, self.weight, self.bias, relu=True)
''',
    "pointwise_conv": '''
class ModelNew(nn.Module):
    """@DOC@"""

    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.weight, self.bias = conv_parameters(in_channels, out_channels, 1)

    def forward(self, x):
        return conv2d_bias(x, self.weight, self.bias, relu=False)
''',
}

# One pooling kernel per variant: each lane computes one output element from
# its KS x KS window (stride KS, no padding: the window is always inside).
POOL_KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def @FN@(x_ptr, y_ptr, n_out, H, W, OH, OW, KS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    ox = offs % OW
    rest = offs // OW
    oy = rest % OH
    plane = rest // OH
    base = plane * (H * W) + (oy * KS) * W + ox * KS
    acc = @INIT@
    for ky in tl.static_range(KS):
        for kx in tl.static_range(KS):
            v = tl.load(x_ptr + base + ky * W + kx, mask=mask, other=0.0)
            @STEP@
@FINISH@    tl.store(y_ptr + offs, acc, mask=mask)


class ModelNew(nn.Module):
    """@DOC@"""

    def __init__(self, @INIT_ARGS@):
        super().__init__()
@CHECK@        self.pool_size = pool_size

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        ks = self.pool_size
        oh, ow = h // ks, w // ks
        y = torch.empty((n, c, oh, ow), device=x.device, dtype=x.dtype)
        n_out = y.numel()
        @FN@[(triton.cdiv(n_out, @BLOCK@),)](x, y, n_out, h, w, oh, ow, KS=ks, BLOCK=@BLOCK@, num_warps=@WARPS@)
        return y
'''

POOL_OPS = {
    "avg_pool": dict(FN="_avg_pool2d", INIT="tl.zeros((BLOCK,), dtype=tl.float32)", STEP="acc += v",
                     FINISH="    acc = acc / (KS * KS)\n", INIT_ARGS="pool_size", CHECK=""),
    "max_pool": dict(FN="_max_pool2d", INIT='tl.full((BLOCK,), float("-inf"), tl.float32)',
                     STEP="acc = tl.maximum(acc, v)", FINISH="", INIT_ARGS="pool_size", CHECK=""),
    "lp_pool": dict(FN="_lp2_pool2d", INIT="tl.zeros((BLOCK,), dtype=tl.float32)", STEP="acc += v * v",
                    FINISH="    acc = tl.sqrt(acc)\n", INIT_ARGS="norm_type, pool_size",
                    CHECK='        if norm_type != 2:\n'
                          '            raise ValueError(f"this kernel computes norm_type 2 only, not {norm_type}")\n'),
}

# Each file names its kernel after its subproblem, so a profile of the composed
# package can tell the two convolutions apart.
CONV_FN = {"conv_relu": "_conv3x3_bias_relu", "pointwise_conv": "_conv1x1_bias"}
CONV_TILES = [(128, 64, 4), (64, 64, 4), (256, 64, 8), (128, 32, 4)]
POOL_TILES = [(1024, 4), (512, 4), (2048, 8), (256, 2)]

# -- torch-only stand-ins (--cpu: the worker's CPU test mode) -------------------------

CPU_CONV = '''import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def conv_parameters(in_channels, out_channels, kernel_size):
    """Weight and bias drawn as nn.Conv2d draws them, in its order."""
    weight = torch.empty(out_channels, in_channels, kernel_size, kernel_size)
    nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    bound = 1.0 / math.sqrt(in_channels * kernel_size * kernel_size)
    bias = torch.empty(out_channels)
    nn.init.uniform_(bias, -bound, bound)
    return nn.Parameter(weight), nn.Parameter(bias)


def conv2d_bias(x, weight, bias, relu):
    y = F.conv2d(x, weight, bias)
    return torch.relu(y) if relu else y

'''

CPU_POOL = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """@DOC@"""

    def __init__(self, @INIT_ARGS@):
        super().__init__()
        self.pool_size = pool_size

    def forward(self, x):
        k = self.pool_size
        return @EXPR@
'''

CPU_POOL_EXPR = {
    "avg_pool": "F.avg_pool2d(x, k)",
    "max_pool": "F.max_pool2d(x, k)",
    "lp_pool": "torch.sqrt(F.avg_pool2d(x * x, k) * (k * k))",
}

SUBPROBLEMS = ("conv_relu", "pointwise_conv", *POOLS)


def kernel(task: str, n: int, cpu: bool) -> str | None:
    """The n-th kernel reply for subproblem `task` (n counts requests for it)."""
    if task not in SUBPROBLEMS:
        return None
    if task in CONV_MODELS:
        bm, bn, warps = CONV_TILES[n % len(CONV_TILES)]
        if cpu:
            doc = "FIXTURE (CPU test mode): torch-only stand-in for the implicit-GEMM convolution kernel."
            return CPU_CONV + fill(CONV_MODELS[task], DOC=doc)
        doc = f"Implicit-GEMM convolution, bias{' and ReLU' if task == 'conv_relu' else ''} in the epilogue; " \
              f"{bm}x{bn} tiles."
        return fill(CONV_KERNEL, FN=CONV_FN[task], BM=bm, BN=bn, WARPS=warps) + fill(CONV_MODELS[task], DOC=doc)
    ops = POOL_OPS[task]
    if cpu:
        return fill(CPU_POOL, DOC="FIXTURE (CPU test mode): torch-only stand-in for the pooling kernel.",
                    INIT_ARGS=ops["INIT_ARGS"], EXPR=CPU_POOL_EXPR[task])
    blk, warps = POOL_TILES[n % len(POOL_TILES)]
    return fill(POOL_KERNEL, DOC=f"One lane per output element; {blk} per program.", BLOCK=blk, WARPS=warps, **ops)


def dump(out: pathlib.Path, cpu: bool, size: str) -> None:
    """Every subproblem file, its first kernel reply, a batch file pairing them, and the problems."""
    for d in ("subkernel_problems", "kernels", "problems"):
        (out / d).mkdir(parents=True, exist_ok=True)
    files = {}
    for pool, (_, task) in POOLS.items():
        files.update(subproblems(pool, size))
        (out / "problems" / f"{task}.py").write_text(problem_source(task, size))
    lines = []
    for name, src in files.items():
        (out / "subkernel_problems" / f"{name}.py").write_text(src)
        (out / "kernels" / f"{name}.py").write_text(
            f"# conv_pool_fixture.py (hand-written fixture): the first reply for {name}\n" + kernel(name, 0, cpu))
        lines.append(f"subkernel_problems/{name}.py kernels/{name}.py")
    (out / "batch.txt").write_text("\n".join(lines) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", help="folder for the reply counters (default: per parent process)")
    ap.add_argument("--cpu", action="store_true", help="torch-only stand-ins for the worker's CPU test mode")
    ap.add_argument("--small", action="store_true", help="for copies of the problems at batch 2, 16x16 images")
    ap.add_argument("--dump", metavar="DIR",
                    help="write the subproblems, first kernels, a batch file and the problems; no reply")
    args = ap.parse_args()
    size = "small" if args.small else "full"
    if args.dump:
        dump(pathlib.Path(args.dump), args.cpu, size)
        return 0
    sys.stdin.read()  # the request body; the agent and task come from the environment
    agent = os.environ.get("MKEVOLVE_AGENT", "")
    task = os.environ.get("MKEVOLVE_TASK", "")
    state = pathlib.Path(args.state or os.path.join(tempfile.gettempdir(), f"mkevolve-conv-pool-fixture-{run_pid()}"))
    text = None
    if agent == "decompose":
        text = decomposition(task, size)
    elif agent in ("generate", "debug", "optimize") and task in SUBPROBLEMS:
        n = next_number(state, f"{agent}/{task}")
        text = (f"Fixture reply {agent} #{n} for {task}.\n\n"
                + block("kernel.py", f"# conv_pool_fixture.py (hand-written fixture): {agent} #{n} for {task}\n"
                        + kernel(task, n, args.cpu)))
    print(text if text is not None else f"(fixture: nothing scripted for agent {agent!r}, task {task!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
