"""A HAND-WRITTEN FIXTURE LLM for GPU runs: it is not a real LLM, and nothing it
makes happen says anything about what an LLM would write.

It speaks the `exec:` provider protocol (docs/LLM.md): one process per request,
the request on stdin, the agent and task in $MKEVOLVE_AGENT / $MKEVOLVE_TASK,
the reply on stdout. It answers after a fixed --latency, so it stands in for a
slow endpoint in the search-concurrency benchmark (issue 4's 8-minute target),
and it drives the 3-problem GPU bench suite (issue 6):

  mkevolve run examples/problems/07_attention_block.py --out runs/attn \\
      --llm 'exec:python3 examples/sessions/gpu_fixture.py --latency 20'

What it answers, by agent and task:

- decompose, task 01_relu / 06_mlp3 / 07_attention_block: a fixed decomposition.
  07_attention_block has three subproblems (qkv_heads, causal_attention,
  linear_out); 06_mlp3 has two (linear_gelu, used twice, and linear), as in
  make_mlp3_gpu.py (mlp_fixture.py); 01_relu wraps its one op.
- generate / debug / optimize for a subproblem: a Triton kernel for it. The first
  `generate` reply for linear_gelu (GELU left out) and for causal_attention (the
  causal mask off by one) is wrong on purpose, so the debug path runs. Later
  replies cycle through tile shapes.
- generate / debug / optimize / postfuse for a whole problem (the `beam` and
  `parallel` methods, TotalFuse, PostFuse): the matching example kernel from
  examples/kernels/.
- anything else (split, fuse, judge): a reply with no files, which the agents
  treat as a failed attempt.

Every kernel reply starts with a comment naming the request's number, so no two
replies are the same file: each candidate is really compiled and evaluated
instead of hitting the verdict cache. The counters live in --state (default: a
folder in the temp directory named for the parent process, i.e. one mkevolve
run); a lock file keeps concurrent requests from taking the same number.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import pathlib
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))

import make_mlp3_gpu as mlp3  # noqa: E402  (the GEMM template)
from mlp_fixture import block, decomposition_reply  # noqa: E402

# -- 07_attention_block: three subproblems ----------------------------------------

ATTN_TOP = '''import torch.nn as nn

from subkernel_problems.qkv_heads import Model as QkvHeads
from subkernel_problems.causal_attention import Model as CausalAttention
from subkernel_problems.linear_out import Model as LinearOut


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len):
        super().__init__()
        # Same parameter order as the original: the qkv Linear, then the out Linear.
        self.qkv = QkvHeads(embed_dim, num_heads)
        self.out = LinearOut(embed_dim, embed_dim)
        self.attn = CausalAttention(max_len)

    def forward(self, x):
        q, k, v = self.qkv(x)
        return self.out(self.attn(q, k, v))
'''

QKV_HEADS = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Fused QKV projection, split into per-head q, k, v of shape (batch, heads, seq, head_dim)."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)

    def forward(self, x):
        batch, seq, embed = x.shape
        heads = self.num_heads
        dim = embed // heads
        q, k, v = self.qkv(x).split(embed, dim=2)
        q = q.view(batch, seq, heads, dim).transpose(1, 2)
        k = k.view(batch, seq, heads, dim).transpose(1, 2)
        v = v.view(batch, seq, heads, dim).transpose(1, 2)
        return q, k, v


def get_inputs():
    return [torch.randn(8, 256, 512)]


def get_init_inputs():
    return [512, 8]
'''

CAUSAL_ATTENTION = '''import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Causal softmax attention over per-head q, k, v; heads merged back into (batch, seq, embed)."""

    def __init__(self, max_len):
        super().__init__()
        causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, q, k, v):
        batch, heads, seq, dim = q.shape
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dim)
        scores = scores.masked_fill(~self.causal[:seq, :seq], float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        return ctx.transpose(1, 2).reshape(batch, seq, heads * dim)


def get_inputs():
    return [torch.randn(8, 8, 256, 64), torch.randn(8, 8, 256, 64), torch.randn(8, 8, 256, 64)]


def get_init_inputs():
    return [256]
'''

LINEAR_OUT = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The output projection, applied to (batch, seq, embed)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(8, 256, 512)]


def get_init_inputs():
    return [512, 512]
'''

LINEAR_PARAMS = '''

def linear_parameters(in_features, out_features):
    """Weight and bias drawn as nn.Linear draws them, in its order."""
    w = torch.empty(out_features, in_features)
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    b = torch.empty(out_features)
    bound = 1.0 / math.sqrt(in_features)
    nn.init.uniform_(b, -bound, bound)
    return nn.Parameter(w), nn.Parameter(b)
'''

# The tiled fp32 GEMM + bias main loop both GEMM kernels below share (TF32 off).
GEMM_BIAS_MAINLOOP = '''    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc=acc, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
'''

QKV_HEADS_KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _qkv_heads(x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, S, H, C, sxm, swn,
               D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # One GEMM (x @ w^T + b) whose epilogue scatters each column straight into
    # its (which, batch, head, seq, dim) slot: no split, view or transpose copies.
''' + GEMM_BIAS_MAINLOOP + '''    which = rn // C
    head = (rn %% C) // D
    d = rn %% D
    bidx = rm // S
    sidx = rm %% S
    dst = which[None, :] * (M * C) + ((bidx[:, None] * H + head[None, :]) * S + sidx[:, None]) * D + d[None, :]
    tl.store(out_ptr + dst, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
''' + LINEAR_PARAMS + '''

class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.weight, self.bias = linear_parameters(embed_dim, 3 * embed_dim)

    def forward(self, x):
        batch, seq, embed = x.shape
        heads = self.num_heads
        dim = embed // heads
        x2 = x.contiguous().view(batch * seq, embed)
        M, K = x2.shape
        N = 3 * embed
        out = torch.empty((3, batch, heads, seq, dim), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, %(bm)d), triton.cdiv(N, %(bn)d))
        _qkv_heads[grid](x2, self.weight, self.bias, out, M, N, K, seq, heads, embed, x2.stride(0),
                         self.weight.stride(0), D=dim, BM=%(bm)d, BN=%(bn)d, BK=32, num_warps=%(warps)d, num_stages=3)
        return out[0], out[1], out[2]
'''

ATTENTION_KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _causal_attention(q_ptr, k_ptr, v_ptr, o_ptr, T, H, scale,
                      D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Flash style: one program per (block of queries, batch*head), online softmax,
    # key blocks only up to the diagonal; writes its head's slice of (B, T, H*D).
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * T * D
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, D)
    m_ok = offs_m < T
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=m_ok[:, None], other=0.0)
    run_max = tl.full((BM,), -1.0e30, tl.float32)
    run_sum = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    stop = tl.minimum((pid_m + 1) * BM, T)
    for start_n in range(0, stop, BN):
        offs_n = start_n + tl.arange(0, BN)
        n_ok = offs_n < T
        kt = tl.load(k_ptr + base + offs_n[None, :] * D + offs_d[:, None], mask=n_ok[None, :], other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        allowed = (offs_n[None, :] %(cmp)s offs_m[:, None]) & n_ok[None, :]
        s = tl.where(allowed, s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, axis=1))
        alpha = tl.exp(run_max - new_max)
        p = tl.exp(s - new_max[:, None])
        run_sum = run_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=n_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        run_max = new_max
    acc = acc / run_sum[:, None]
    b = bh // H
    h = bh %% H
    tl.store(o_ptr + (b * T + offs_m)[:, None] * (H * D) + h * D + offs_d[None, :], acc, mask=m_ok[:, None])


class ModelNew(nn.Module):
    def __init__(self, max_len):
        super().__init__()
        self.max_len = max_len

    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        batch, heads, seq, dim = q.shape
        out = torch.empty((batch, seq, heads * dim), device=q.device, dtype=q.dtype)
        grid = (triton.cdiv(seq, %(bm)d), batch * heads)
        _causal_attention[grid](q, k, v, out, seq, heads, 1.0 / math.sqrt(dim), D=dim, BM=%(bm)d, BN=%(bn)d,
                                num_warps=%(warps)d)
        return out
'''

LINEAR_OUT_KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_bias(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, swn, sym,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
''' + GEMM_BIAS_MAINLOOP + '''    tl.store(y_ptr + rm[:, None] * sym + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
''' + LINEAR_PARAMS + '''

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight, self.bias = linear_parameters(in_features, out_features)

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.contiguous().view(-1, x.shape[-1])
        M, K = x2.shape
        N = self.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, %(bm)d), triton.cdiv(N, %(bn)d))
        _gemm_bias[grid](x2, self.weight, self.bias, y, M, N, K, x2.stride(0), self.weight.stride(0), y.stride(0),
                         BM=%(bm)d, BN=%(bn)d, BK=32, num_warps=%(warps)d, num_stages=3)
        return y.view(*lead, N)
'''

RELU_TOP = '''import torch.nn as nn

from subkernel_problems.relu import Model as Relu


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = Relu()

    def forward(self, x):
        return self.relu(x)
'''

RELU_KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.where(x > 0.0, x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, %(block)d),)](x, y, n, BLOCK=%(block)d, num_warps=%(warps)d)
        return y
'''

GEMM_TILES = [(64, 64, 4), (128, 128, 8), (128, 64, 4), (64, 128, 4)]
ATTN_TILES = [(64, 64, 4), (128, 64, 8), (64, 32, 4), (32, 64, 4)]
RELU_TILES = [(1024, 4), (2048, 8), (4096, 8), (512, 4)]

WHOLE = {"01_relu": "01_relu__triton.py", "06_mlp3": "06_mlp3__three_launches.py",
         "07_attention_block": "07_attention_block__flash.py"}


def decomposition(task: str) -> str | None:
    if task == "07_attention_block":
        return ("Cuts where a kernel needs a whole row or a whole head: the projections, and the attention core. "
                "The head split fuses into the QKV GEMM's store.\n\n" + block("decomposed_problem.py", ATTN_TOP)
                + block("subkernel_problems/qkv_heads.py", QKV_HEADS)
                + block("subkernel_problems/causal_attention.py", CAUSAL_ATTENTION)
                + block("subkernel_problems/linear_out.py", LINEAR_OUT))
    if task == "06_mlp3":
        return decomposition_reply("Each GEMM needs its full input row, so each Linear is a cut; GELU fuses into the "
                                   "GEMM before it.", tokens=1024, d_in=1024, hidden=2048, d_out=512)
    if task == "01_relu":
        src = (REPO / "examples" / "problems" / "01_relu.py").read_text()
        return ("One elementwise op: nothing to split.\n\n" + block("decomposed_problem.py", RELU_TOP)
                + block("subkernel_problems/relu.py", src))
    return None


def kernel(agent: str, task: str, n: int) -> str | None:
    """The n-th kernel reply (n counts this agent's requests for this task)."""
    first = agent == "generate" and n == 0
    g = GEMM_TILES[n % len(GEMM_TILES)]
    if task == "linear_gelu":
        return mlp3.kernel("False" if first else "True", g[0], g[1], g[2],
                           "Bias and exact GELU in the GEMM epilogue." + (" (Fixture bug: GELU is off.)" if first else ""))
    if task == "linear":
        return mlp3.kernel("False", g[0], g[1], g[2], "GEMM with the bias in the epilogue.")
    if task == "qkv_heads":
        return QKV_HEADS_KERNEL % {"bm": g[0], "bn": g[1], "warps": g[2]}
    if task == "linear_out":
        return LINEAR_OUT_KERNEL % {"bm": g[0], "bn": g[1], "warps": g[2]}
    if task == "causal_attention":
        a = ATTN_TILES[n % len(ATTN_TILES)]
        return ATTENTION_KERNEL % {"cmp": "<" if first else "<=", "bm": a[0], "bn": a[1], "warps": a[2]}
    if task == "relu":
        r = RELU_TILES[n % len(RELU_TILES)]
        return RELU_KERNEL % {"block": r[0], "warps": r[1]}
    if task in WHOLE:
        return (REPO / "examples" / "kernels" / WHOLE[task]).read_text()
    return None


def next_number(state: pathlib.Path, key: str) -> int:
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "counters.lock", "a+") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        path = state / "counters.json"
        counts = json.loads(path.read_text()) if path.exists() else {}
        n = counts.get(key, 0)
        counts[key] = n + 1
        path.write_text(json.dumps(counts))
        return n


def run_pid() -> int:
    """The mkevolve process: the parent, or the grandparent when /bin/sh stayed
    between us (the exec provider runs `/bin/sh -c COMMAND`)."""
    pid = os.getppid()
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        if comm in ("sh", "dash", "bash"):
            return int(stat[stat.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return pid


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.0, help="seconds to wait before answering")
    ap.add_argument("--state", help="folder for the reply counters (default: per parent process)")
    args = ap.parse_args()
    sys.stdin.read()  # the request body; the agent and task come from the environment
    agent = os.environ.get("MKEVOLVE_AGENT", "")
    task = os.environ.get("MKEVOLVE_TASK", "")
    state = pathlib.Path(args.state or os.path.join(tempfile.gettempdir(), f"mkevolve-gpu-fixture-{run_pid()}"))
    if args.latency > 0:
        time.sleep(args.latency)
    if agent == "decompose":
        text = decomposition(task)
    elif agent in ("generate", "debug", "optimize", "postfuse"):
        n = next_number(state, f"{agent}/{task}")
        src = kernel(agent, task, n)
        text = None if src is None else (
            f"Fixture reply {agent} #{n} for {task}.\n\n"
            + block("kernel.py", f"# gpu_fixture.py (hand-written fixture): {agent} #{n} for {task}\n" + src))
    else:
        text = None
    print(text if text is not None else f"(fixture: nothing scripted for agent {agent!r}, task {task!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
