"""A HAND-WRITTEN FIXTURE LLM for GPU runs on three real KernelBench problems
at their real sizes (issue 33's GPU measurement). It is not a real LLM, and
nothing it makes happen says anything about what an LLM would write: every
reply below was written by hand, to answer the way a real LLM's honest but
messy answers look.

It speaks the `exec:` provider protocol (docs/LLM.md), as gpu_fixture.py does:
one process per request, the request (an OpenAI chat body) on stdin, the agent
and task in $MKEVOLVE_AGENT / $MKEVOLVE_TASK, the reply on stdout.

  mkevolve run .kb/KernelBench/level3/43_MinGPTCausalAttention.py --out runs/m43 \\
      --llm 'exec:python3 examples/sessions/messy_gpu_fixture.py' \\
      --iterations 3 --calls-per-iter 3 --refine-every 4 --decompose-workers 1

(scripts/gpu-suite.sh stage `messy` runs all three). Tasks are the problems'
file stems, as the binary names them, and the subproblems' file stems:

- 99_Matmul_GELU_Softmax (batch 1024, 8192 -> 8192): linear_gelu (matmul +
  bias, GELU written with erf) and softmax_cols, a softmax over dim 0 written
  out as max-subtracted exponentials over their sum, which the top level feeds
  h.t() and turns back with .t(): a transposed, non-contiguous view.
- 43_MinGPTCausalAttention (B 128, T 512, C 768, 8 heads of 96): qkv_heads
  (matmul + bias, split into head views: q, k and v reach the attention as
  non-contiguous views of one buffer), causal_attention (scores `/ sqrt(d)`
  where the original multiplies by `1/sqrt(d)`, the tril buffer, the softmax
  written out; the kernel pads the head dim 96 to 128 with masks) and
  out_proj (matmul + bias, the dropout of p = 0).
- 31_VisionAttention (B 2, C 128, 128x128 image: sequence 16384, 4 heads of
  32): self_attention (nn.MultiheadAttention's fused path written out with
  the module's own parameters: in-projection, softmax attention, out-
  projection) fed the top level's view/permute of the image, and
  add_layernorm (the residual add and LayerNorm written out).

Messy on purpose, as real answers are:
(a) the `generate` replies of softmax_cols, causal_attention and
    self_attention index their input as if it were contiguous: they pass on
    get_inputs()' fresh tensors and fail the trials in the composition's layout.
    A `debug` request whose prompt says "non-contiguous view" gets the stride-
    aware kernel; other debug requests get the same contiguous-only code again.
(b) the kernels of linear_gelu, out_proj and add_layernorm name their
    constructor's arguments otherwise than the top level passes them by
    keyword: they pass their own trials (positional arguments) and the
    composition raises. A `debug` request whose prompt says "inside the
    composed solution" gets the fix.
(c) softmax_cols and causal_attention fall back to PyTorch for other dtypes,
    and self_attention draws random weights when none are given (the branch
    a peer's VisionAttention kernel carries): branches that never run.
(d) every reply has prose around its code blocks.
An `optimize` or `debug` request on a kernel that already has a fix (its source,
quoted in the prompt, carries the fix's marker comment) keeps the fix and
moves to the next tile shape. Every kernel reply starts with a comment naming
the request's number, so no two replies are the same file and nothing hits the
verdict cache (counters in --state, as in gpu_fixture.py). Anything else
(split, fuse, judge, a whole problem) gets a reply with no files.

Every Triton kernel here was run through a CPU emulator of Triton
(tests/python/test_messy_gpu_fixture.py), which checks indices, masks,
strides and results, not that Triton compiles them.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_fixture import next_number, run_pid  # noqa: E402  (the reply counters)
from mlp_fixture import block  # noqa: E402

BANNER = "HAND-WRITTEN FIXTURE reply (messy_gpu_fixture.py), not an LLM's."

# What the fixes carry (a comment in the kernel; the prompt of a request on that
# kernel quotes its source), and what the prompts the fixes answer say.
STRIDED_MARK = "fixture-mark: strided"
NAMES_MARK = "fixture-mark: keyword names"
LAYOUT_WORDS = "non-contiguous view"
COMPOSED_WORDS = "inside the composed solution"


def fill(template: str, **values) -> str:
    """template with each @NAME@ replaced; every placeholder must be given."""
    out = template
    for k, v in values.items():
        out = out.replace(f"@{k}@", str(v))
    left = re.findall(r"@[A-Z_0-9]+@", out)
    if left:
        raise KeyError(f"unfilled placeholders {sorted(set(left))}")
    return out


# -- problem sizes (the real KernelBench ones; tests pass smaller ones) -------------

SIZES = {
    "99_Matmul_GELU_Softmax": dict(batch=1024, in_features=8192, out_features=8192),
    "43_MinGPTCausalAttention": dict(batch=128, seq=512, embd=768, heads=8, max_seqlen=1024),
    "31_VisionAttention": dict(batch=2, embed=128, heads=4, height=128, width=128),
}
# Small sizes (odd ones: partial blocks, a head dim of 24 padded to 32) for CPU checks of the same
# answers (tests/python/test_messy_gpu_fixture.py; --small): KernelBench's files with these constants.
SMALL_SIZES = {
    "99_Matmul_GELU_Softmax": dict(batch=24, in_features=40, out_features=72),
    "43_MinGPTCausalAttention": dict(batch=2, seq=40, embd=48, heads=2, max_seqlen=64),
    "31_VisionAttention": dict(batch=2, embed=32, heads=2, height=6, width=7),
}

# =================================================================================
# 99_Matmul_GELU_Softmax
# =================================================================================

TOP_99 = '''import torch.nn as nn

from subkernel_problems.linear_gelu import Model as LinearGelu
from subkernel_problems.softmax_cols import Model as SoftmaxCols


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # Built with keywords, in the original's order (the Linear's parameters first).
        self.proj = LinearGelu(in_features=in_features, out_features=out_features)
        self.softmax = SoftmaxCols()

    def forward(self, x):
        h = self.proj(x)
        # softmax over dim 1 == softmax over dim 0 of the transposed view; .t() turns it back.
        return self.softmax(h.t()).t()
'''

LINEAR_GELU_99 = '''import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """x @ W^T + b, then the exact GELU written with erf: one GEMM with an elementwise epilogue."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = torch.matmul(x, self.linear.weight.t()) + self.linear.bias
        return 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))


def get_inputs():
    return [torch.rand(@BATCH@, @IN@)]


def get_init_inputs():
    return [@IN@, @OUT@]
'''

SOFTMAX_COLS_99 = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over dim 0 (down each column), written out: max-subtracted exponentials over their sum."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=0, keepdim=True))
        return e / e.sum(dim=0, keepdim=True)


def get_inputs():
    return [torch.randn(@OUT@, @BATCH@)]


def get_init_inputs():
    return []
'''


def subproblems_99(s: dict) -> dict:
    v = dict(BATCH=s["batch"], IN=s["in_features"], OUT=s["out_features"])
    return {"linear_gelu": fill(LINEAR_GELU_99, **v), "softmax_cols": fill(SOFTMAX_COLS_99, **v)}


def decomposition_99(s: dict) -> str:
    sub = subproblems_99(s)
    return (
        "Looking at the model: a Linear, an exact GELU, then a softmax over the feature dimension.\n\n"
        "The GEMM is where the time goes, and GELU is elementwise, so it belongs in the GEMM's epilogue. The "
        "softmax needs a whole row of the GEMM's output before it can normalise, so it is a cut.\n\n"
        "I wrote the linear as a matmul plus the bias and GELU with erf spelled out, and the softmax as "
        "exponentials of the max-subtracted input over their sum; these agree with the original up to "
        "floating-point rounding. I express the softmax as a reduction over dim 0 of the transposed "
        "activations (a free relabelling in the top level), which is how the kernel will walk it.\n\n"
        "Top level:\n\n" + block("decomposed_problem.py", TOP_99)
        + "\nThe GEMM with its GELU epilogue:\n\n" + block("subkernel_problems/linear_gelu.py", sub["linear_gelu"])
        + "\nAnd the column softmax:\n\n" + block("subkernel_problems/softmax_cols.py", sub["softmax_cols"])
        + "\nThe top level only wires the two together; all arithmetic is in the subproblems.\n")


LINEAR_GELU_KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

# @NOTE@


@triton.jit
def _linear_gelu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym, syn,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # y = gelu(x @ w^T + b): bias and exact GELU in the epilogue, fp32 accumulation, TF32 off.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + kk[None, :] * sxk,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None] * swk,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc=acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    y = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :] * syn, y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, @A@, @B@):
        super().__init__()
        # The same Linear as the reference, so its parameters are drawn the same way; only its
        # weight and bias are used, by the Triton kernel.
        self.linear = nn.Linear(@A@, @B@)

    def forward(self, x):
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        w = self.linear.weight
        grid = (triton.cdiv(M, @BM@), triton.cdiv(N, @BN@))
        _linear_gelu[grid](x, w, self.linear.bias, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                           y.stride(0), y.stride(1), BM=@BM@, BN=@BN@, BK=32, num_warps=@WARPS@, num_stages=3)
        return y
'''

SOFTMAX_COLS_CONTIGUOUS = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _softmax_dim0(x_ptr, y_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    # One program per block of BC columns; online max and sum down the R rows, then a second pass writes.
    cols = tl.program_id(0) * BC + tl.arange(0, BC)
    col_ok = cols < C
    run_max = tl.full((BC,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BC,), tl.float32)
    for r0 in range(0, R, BR):
        rows = r0 + tl.arange(0, BR)
        ok = (rows[:, None] < R) & col_ok[None, :]
        x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=ok, other=float("-inf"))
        new_max = tl.maximum(run_max, tl.max(x, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(x - new_max[None, :]), axis=0)
        run_max = new_max
    for r0 in range(0, R, BR):
        rows = r0 + tl.arange(0, BR)
        ok = (rows[:, None] < R) & col_ok[None, :]
        x = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=ok, other=float("-inf"))
        tl.store(y_ptr + rows[:, None] * C + cols[None, :], tl.exp(x - run_max[None, :]) / run_sum[None, :], mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        R, C = x.shape
        y = torch.empty((R, C), device=x.device, dtype=x.dtype)
        _softmax_dim0[(triton.cdiv(C, @BC@),)](x, y, R, C, BR=@BR@, BC=@BC@, num_warps=@WARPS@)
        return y
'''

SOFTMAX_COLS_STRIDED = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

# @MARK@: every input is indexed through its strides.


@triton.jit
def _softmax_dim0(x_ptr, y_ptr, R, C, sxr, sxc, syr, syc, BR: tl.constexpr, BC: tl.constexpr):
    # One program per block of BC columns; online max and sum down the R rows, then a second pass writes.
    cols = tl.program_id(0) * BC + tl.arange(0, BC)
    col_ok = cols < C
    run_max = tl.full((BC,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BC,), tl.float32)
    for r0 in range(0, R, BR):
        rows = r0 + tl.arange(0, BR)
        ok = (rows[:, None] < R) & col_ok[None, :]
        x = tl.load(x_ptr + rows[:, None] * sxr + cols[None, :] * sxc, mask=ok, other=float("-inf"))
        new_max = tl.maximum(run_max, tl.max(x, axis=0))
        run_sum = run_sum * tl.exp(run_max - new_max) + tl.sum(tl.exp(x - new_max[None, :]), axis=0)
        run_max = new_max
    for r0 in range(0, R, BR):
        rows = r0 + tl.arange(0, BR)
        ok = (rows[:, None] < R) & col_ok[None, :]
        x = tl.load(x_ptr + rows[:, None] * sxr + cols[None, :] * sxc, mask=ok, other=float("-inf"))
        tl.store(y_ptr + rows[:, None] * syr + cols[None, :] * syc, tl.exp(x - run_max[None, :]) / run_sum[None, :],
                 mask=ok)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.dtype != torch.float32:
            # The kernel is written for fp32; anything else takes PyTorch's softmax.
            return torch.softmax(x.float(), dim=0).to(x.dtype)
        R, C = x.shape
        # empty_like keeps a transposed input's strides, so each column stays contiguous in the output too.
        y = torch.empty_like(x)
        _softmax_dim0[(triton.cdiv(C, @BC@),)](x, y, R, C, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                               BR=@BR@, BC=@BC@, num_warps=@WARPS@)
        return y
'''

# =================================================================================
# 43_MinGPTCausalAttention
# =================================================================================

TOP_43 = '''import torch.nn as nn

from subkernel_problems.qkv_heads import Model as QkvHeads
from subkernel_problems.causal_attention import Model as CausalAttention
from subkernel_problems.out_proj import Model as OutProj


class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head, attn_pdrop, resid_pdrop, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        # Parameters in the original's order: c_attn, then c_proj (the mask buffer draws nothing).
        self.qkv = QkvHeads(n_embd, n_head)
        self.attn = CausalAttention(max_seqlen, attn_pdrop)
        self.proj = OutProj(in_features=n_embd, out_features=n_embd, resid_pdrop=resid_pdrop)

    def forward(self, x):
        q, k, v = self.qkv(x)      # (B, nh, T, hs) views into one (B, T, 3C) buffer
        y = self.attn(q, k, v)     # (B, T, C), heads side by side
        return self.proj(y)
'''

QKV_HEADS_43 = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The fused QKV projection (matmul + bias), split into per-head views (B, nh, T, hs)."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.shape
        qkv = torch.matmul(x, self.c_attn.weight.t()) + self.c_attn.bias
        q, k, v = qkv.split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        return q, k, v


def get_inputs():
    return [torch.rand(@B@, @T@, @C@)]


def get_init_inputs():
    return [@C@, @H@]
'''

CAUSAL_ATTENTION_43 = '''import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """Causal softmax attention per head, written out; the heads come back side by side as (B, T, C)."""

    def __init__(self, max_seqlen, attn_pdrop):
        super().__init__()
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen))
                             .view(1, 1, max_seqlen, max_seqlen))

    def forward(self, q, k, v):
        B, nh, T, hs = q.shape
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = torch.exp(att - att.amax(dim=-1, keepdim=True))
        att = att / att.sum(dim=-1, keepdim=True)
        att = self.attn_dropout(att)
        y = torch.matmul(att, v)
        return y.transpose(1, 2).reshape(B, T, nh * hs)


def get_inputs():
    return [torch.randn(@B@, @H@, @T@, @D@), torch.randn(@B@, @H@, @T@, @D@), torch.randn(@B@, @H@, @T@, @D@)]


def get_init_inputs():
    return [@MAXLEN@, 0.0]
'''

OUT_PROJ_43 = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The output projection (matmul + bias) and its dropout."""

    def __init__(self, in_features, out_features, resid_pdrop):
        super().__init__()
        self.c_proj = nn.Linear(in_features, out_features)
        self.resid_dropout = nn.Dropout(resid_pdrop)

    def forward(self, y):
        return self.resid_dropout(torch.matmul(y, self.c_proj.weight.t()) + self.c_proj.bias)


def get_inputs():
    return [torch.randn(@B@, @T@, @C@)]


def get_init_inputs():
    return [@C@, @C@, 0.0]
'''


def subproblems_43(s: dict) -> dict:
    v = dict(B=s["batch"], T=s["seq"], C=s["embd"], H=s["heads"], D=s["embd"] // s["heads"], MAXLEN=s["max_seqlen"])
    return {"qkv_heads": fill(QKV_HEADS_43, **v), "causal_attention": fill(CAUSAL_ATTENTION_43, **v),
            "out_proj": fill(OUT_PROJ_43, **v)}


def decomposition_43(s: dict) -> str:
    sub = subproblems_43(s)
    return (
        "This is minGPT's causal self-attention. Three natural kernels:\n\n"
        "1. the fused QKV projection, a GEMM; its output is split into heads with views only, so q, k and v "
        "reach the attention as strided views of one buffer (no copies);\n"
        "2. causal attention per head: scores, mask, softmax and the weighted sum of v, which a flash-style "
        "kernel does without materialising the T x T scores;\n"
        "3. the output projection, another GEMM.\n\n"
        "Both dropouts have p = 0 in this problem, but I kept them in the subproblems so they stay faithful for "
        "any p. I divide the scores by sqrt(hs) instead of multiplying by 1/sqrt(hs) and write the softmax out; "
        "both only change rounding.\n\n"
        + block("decomposed_problem.py", TOP_43)
        + "\nThe projection and head split:\n\n" + block("subkernel_problems/qkv_heads.py", sub["qkv_heads"])
        + "\nThe attention core (note: the inputs are views, not contiguous tensors):\n\n"
        + block("subkernel_problems/causal_attention.py", sub["causal_attention"])
        + "\nAnd the output projection:\n\n" + block("subkernel_problems/out_proj.py", sub["out_proj"])
        + "\nParameters are created in the original's order (c_attn, then c_proj), so a fresh ModelNew and a fresh "
          "Model agree under the same seed.\n")


GEMM_BIAS_KERNEL = '''@triton.jit
def @NAME@(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, sxk, swn, swk, sym,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # y = x @ w^T + b, fp32 accumulation, TF32 off; x and w through their strides.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + kk[None, :] * sxk,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None] * swk,
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc=acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
'''

QKV_HEADS_KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


''' + GEMM_BIAS_KERNEL.replace("@NAME@", "_qkv_gemm") + '''

class ModelNew(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # drawn as the reference draws it; the kernel uses its tensors
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.shape
        x2 = x.reshape(B * T, C)  # a view for the contiguous input the top level passes
        M, K = x2.shape
        N = 3 * C
        w = self.c_attn.weight
        qkv = torch.empty((B, T, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, @BM@), triton.cdiv(N, @BN@))
        _qkv_gemm[grid](x2, w, self.c_attn.bias, qkv, M, N, K, x2.stride(0), x2.stride(1), w.stride(0), w.stride(1),
                        N, BM=@BM@, BN=@BN@, BK=32, num_warps=@WARPS@, num_stages=3)
        # The head split is views only, as in the reference: no copies.
        q, k, v = qkv.split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        return q, k, v
'''

CAUSAL_ATTENTION_CONTIGUOUS = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _causal_flash(q_ptr, k_ptr, v_ptr, o_ptr, H, T, D, scale,
                  DP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Flash attention: one program per (block of queries, batch*head), online softmax, keys up to the
    # diagonal only. The head dim D (96) is padded to DP (128) with masks: tl.arange needs a power of two.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * T * D
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, DP)
    m_ok = offs_m < T
    d_ok = offs_d < D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    run_max = tl.full((BM,), -1.0e30, tl.float32)
    run_sum = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, DP), tl.float32)
    stop = tl.minimum((pid_m + 1) * BM, T)
    for start_n in range(0, stop, BN):
        offs_n = start_n + tl.arange(0, BN)
        n_ok = offs_n < T
        kt = tl.load(k_ptr + base + offs_n[None, :] * D + offs_d[:, None], mask=n_ok[None, :] & d_ok[:, None],
                     other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        s = tl.where((offs_n[None, :] <= offs_m[:, None]) & n_ok[None, :], s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, axis=1))
        alpha = tl.exp(run_max - new_max)
        p = tl.exp(s - new_max[:, None])
        run_sum = run_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=n_ok[:, None] & d_ok[None, :],
                    other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        run_max = new_max
    acc = acc / run_sum[:, None]
    b = bh // H
    h = bh % H
    tl.store(o_ptr + (b * T + offs_m[:, None]) * (H * D) + h * D + offs_d[None, :], acc,
             mask=m_ok[:, None] & d_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, max_seqlen, attn_pdrop):
        super().__init__()
        self.attn_pdrop = attn_pdrop
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen))
                             .view(1, 1, max_seqlen, max_seqlen))

    def forward(self, q, k, v):
        B, H, T, D = q.shape
        out = torch.empty((B, T, H * D), device=q.device, dtype=q.dtype)
        DP = max(16, triton.next_power_of_2(D))
        grid = (triton.cdiv(T, @BM@), B * H)
        _causal_flash[grid](q, k, v, out, H, T, D, 1.0 / math.sqrt(D), DP=DP, BM=@BM@, BN=@BN@, num_warps=@WARPS@,
                            num_stages=2)
        return out
'''

CAUSAL_ATTENTION_STRIDED = '''import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

# @MARK@: q, k and v are indexed through their strides (they are views into one qkv buffer).


@triton.jit
def _causal_flash(q_ptr, k_ptr, v_ptr, o_ptr, H, T, D, scale,
                  sqb, sqh, sqt, sqd, skb, skh, skt, skd, svb, svh, svt, svd,
                  DP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Flash attention: one program per (block of queries, batch*head), online softmax, keys up to the
    # diagonal only. The head dim D (96) is padded to DP (128) with masks: tl.arange needs a power of two.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, DP)
    m_ok = offs_m < T
    d_ok = offs_d < D
    q = tl.load(q_ptr + b * sqb + h * sqh + offs_m[:, None] * sqt + offs_d[None, :] * sqd,
                mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    run_max = tl.full((BM,), -1.0e30, tl.float32)
    run_sum = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, DP), tl.float32)
    stop = tl.minimum((pid_m + 1) * BM, T)
    for start_n in range(0, stop, BN):
        offs_n = start_n + tl.arange(0, BN)
        n_ok = offs_n < T
        kt = tl.load(k_ptr + b * skb + h * skh + offs_n[None, :] * skt + offs_d[:, None] * skd,
                     mask=n_ok[None, :] & d_ok[:, None], other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        s = tl.where((offs_n[None, :] <= offs_m[:, None]) & n_ok[None, :], s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, axis=1))
        alpha = tl.exp(run_max - new_max)
        p = tl.exp(s - new_max[:, None])
        run_sum = run_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + b * svb + h * svh + offs_n[:, None] * svt + offs_d[None, :] * svd,
                    mask=n_ok[:, None] & d_ok[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        run_max = new_max
    acc = acc / run_sum[:, None]
    # Heads side by side: out[b, t, h * D + d], contiguous (B, T, H * D).
    tl.store(o_ptr + (b * T + offs_m[:, None]) * (H * D) + h * D + offs_d[None, :], acc,
             mask=m_ok[:, None] & d_ok[None, :])


class ModelNew(nn.Module):
    def __init__(self, max_seqlen, attn_pdrop):
        super().__init__()
        self.attn_pdrop = attn_pdrop
        # Kept as the reference keeps it; the kernel applies the same causal mask by index (T <= max_seqlen).
        self.register_buffer("bias", torch.tril(torch.ones(max_seqlen, max_seqlen))
                             .view(1, 1, max_seqlen, max_seqlen))

    def forward(self, q, k, v):
        B, H, T, D = q.shape
        if self.training and self.attn_pdrop > 0:
            raise NotImplementedError("attention dropout is not fused into this kernel (attn_pdrop > 0)")
        if q.dtype != torch.float32:
            # The kernel is written for fp32; half precision takes PyTorch's fused attention.
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).reshape(B, T, H * D)
        out = torch.empty((B, T, H * D), device=q.device, dtype=q.dtype)
        DP = max(16, triton.next_power_of_2(D))
        grid = (triton.cdiv(T, @BM@), B * H)
        _causal_flash[grid](q, k, v, out, H, T, D, 1.0 / math.sqrt(D), *q.stride(), *k.stride(), *v.stride(),
                            DP=DP, BM=@BM@, BN=@BN@, num_warps=@WARPS@, num_stages=2)
        return out
'''

OUT_PROJ_KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

# @NOTE@


''' + GEMM_BIAS_KERNEL.replace("@NAME@", "_out_proj_gemm") + '''

class ModelNew(nn.Module):
    def __init__(self, @A@, @B@, resid_pdrop=0.0):
        super().__init__()
        self.c_proj = nn.Linear(@A@, @B@)  # drawn as the reference draws it; the kernel uses its tensors
        self.resid_pdrop = resid_pdrop

    def forward(self, y):
        if self.training and self.resid_pdrop > 0:
            raise NotImplementedError("residual dropout is not fused into this kernel (resid_pdrop > 0)")
        lead = y.shape[:-1]
        y2 = y.reshape(-1, y.shape[-1])
        M, K = y2.shape
        w = self.c_proj.weight
        N = w.shape[0]
        out = torch.empty((M, N), device=y.device, dtype=y.dtype)
        grid = (triton.cdiv(M, @BM@), triton.cdiv(N, @BN@))
        _out_proj_gemm[grid](y2, w, self.c_proj.bias, out, M, N, K, y2.stride(0), y2.stride(1), w.stride(0),
                             w.stride(1), out.stride(0), BM=@BM@, BN=@BN@, BK=32, num_warps=@WARPS@, num_stages=3)
        return out.view(*lead, N)
'''


# =================================================================================
# 31_VisionAttention
# =================================================================================

TOP_31 = '''import torch.nn as nn

from subkernel_problems.self_attention import Model as SelfAttention
from subkernel_problems.add_layernorm import Model as AddLayerNorm


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        # The original's order: the attention's parameters, then the LayerNorm's.
        self.attn = SelfAttention(embed_dim, num_heads)
        self.norm = AddLayerNorm(embed_dim=embed_dim)

    def forward(self, x):
        B, C, H, W = x.shape
        seq = x.view(B, C, H * W).permute(2, 0, 1)  # (seq_len, batch, embed): a permuted view, no copy
        attn_output = self.attn(seq)
        y = self.norm(attn_output, seq)             # LayerNorm(attn_output + seq)
        return y.permute(1, 2, 0).view(B, C, H, W)
'''

SELF_ATTENTION_31 = '''import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.MultiheadAttention's self-attention (query = key = value = x, no mask), written out with the
    module's own parameters: the in-projection, per-head softmax attention, the out-projection."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        # The original's module, for its parameters and their initialisation (xavier in_proj, zero
        # biases); its forward is not called.
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.num_heads = num_heads

    def forward(self, x):
        L, N, E = x.shape
        H = self.num_heads
        D = E // H
        qkv = torch.matmul(x, self.attn.in_proj_weight.t()) + self.attn.in_proj_bias  # (L, N, 3E)
        q, k, v = qkv.split(E, dim=-1)
        q = q.reshape(L, N * H, D).transpose(0, 1)  # (N*H, L, D), head index n * H + h
        k = k.reshape(L, N * H, D).transpose(0, 1)
        v = v.reshape(L, N * H, D).transpose(0, 1)
        scores = torch.matmul(q, k.transpose(1, 2)) * (1.0 / math.sqrt(D))
        p = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
        p = p / p.sum(dim=-1, keepdim=True)
        ctx = torch.matmul(p, v).transpose(0, 1).reshape(L, N, E)
        return torch.matmul(ctx, self.attn.out_proj.weight.t()) + self.attn.out_proj.bias


def get_inputs():
    return [torch.rand(@L@, @N@, @E@)]


def get_init_inputs():
    return [@E@, @H@]
'''

ADD_LAYERNORM_31 = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm(attn_output + x) over the embedding dim, written out (population variance)."""

    def __init__(self, embed_dim):
        super().__init__()
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, attn_output, x):
        h = attn_output + x
        mu = h.mean(dim=-1, keepdim=True)
        var = ((h - mu) ** 2).mean(dim=-1, keepdim=True)
        return (h - mu) / torch.sqrt(var + self.norm.eps) * self.norm.weight + self.norm.bias


def get_inputs():
    return [torch.randn(@L@, @N@, @E@), torch.rand(@L@, @N@, @E@)]


def get_init_inputs():
    return [@E@]
'''


def subproblems_31(s: dict) -> dict:
    v = dict(L=s["height"] * s["width"], N=s["batch"], E=s["embed"], H=s["heads"])
    return {"self_attention": fill(SELF_ATTENTION_31, **v), "add_layernorm": fill(ADD_LAYERNORM_31, **v)}


def decomposition_31(s: dict) -> str:
    sub = subproblems_31(s)
    return (
        "The block is self-attention over the H*W pixels, then a residual LayerNorm. nn.MultiheadAttention's "
        "forward hides three GEMM-shaped steps; I write them out explicitly with the module's own parameters "
        "(so the initialisation, xavier for in_proj and zero biases, stays exactly the original's):\n\n"
        "- self_attention: in-projection, softmax(q k^T / sqrt(d)) v per head, out-projection. The sequence is "
        "long (H*W), so the kernel must be flash-style; the reference here materialises the scores, which is "
        "fine for checking;\n"
        "- add_layernorm: the residual add fused with the LayerNorm.\n\n"
        "The top level keeps the original's view/permute of the image: the attention gets a permuted view, "
        "not a contiguous tensor.\n\n"
        + block("decomposed_problem.py", TOP_31)
        + "\n" + block("subkernel_problems/self_attention.py", sub["self_attention"])
        + "\n" + block("subkernel_problems/add_layernorm.py", sub["add_layernorm"])
        + "\nThe scores use `* (1/sqrt(d))` after the matmul where MultiheadAttention scales q before it; the "
          "softmax and the LayerNorm are written out. All of that is equal up to rounding.\n")


SELF_ATTENTION_KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

# @NOTE@


@triton.jit
def _in_proj_heads(x_ptr, w_ptr, b_ptr, qkv_ptr, M, NB, K, E, sxl, sxn, sxe, swn, swk,
                   H: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # qkv = x @ W_in^T + b_in over rows m = l * NB + n, scattered straight into q, k, v of shape
    # (3, NB * H, L, D): no split, reshape or transpose copies.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    L = M // NB
    l = rm // NB
    n = rm % NB
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
@LOAD_X@
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None] * swk,
                    mask=(kk[:, None] < K) & (rn[None, :] < 3 * E), other=0.0)
        acc = tl.dot(a, w, acc=acc, input_precision="ieee")
    acc = acc + tl.load(b_ptr + rn, mask=rn < 3 * E, other=0.0)[None, :]
    which = rn // E
    head = (rn % E) // D
    d = rn % D
    dst = which[None, :] * (M * E) + ((n[:, None] * H + head[None, :]) * L + l[:, None]) * D + d[None, :]
    tl.store(qkv_ptr + dst, acc, mask=(rm[:, None] < M) & (rn[None, :] < 3 * E))


@triton.jit
def _flash(q_ptr, k_ptr, v_ptr, ctx_ptr, L, NB, scale,
           H: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Non-causal flash attention per (block of queries, n * H + h); writes ctx[l, n, h * D + d].
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh * L * D
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, DP)
    m_ok = offs_m < L
    d_ok = offs_d < D
    q = tl.load(q_ptr + base + offs_m[:, None] * D + offs_d[None, :], mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    run_max = tl.full((BM,), -1.0e30, tl.float32)
    run_sum = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, DP), tl.float32)
    for start_n in range(0, L, BN):
        offs_n = start_n + tl.arange(0, BN)
        n_ok = offs_n < L
        kt = tl.load(k_ptr + base + offs_n[None, :] * D + offs_d[:, None], mask=n_ok[None, :] & d_ok[:, None],
                     other=0.0)
        s = tl.dot(q, kt, input_precision="ieee") * scale
        s = tl.where(n_ok[None, :], s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, axis=1))
        alpha = tl.exp(run_max - new_max)
        p = tl.exp(s - new_max[:, None])
        run_sum = run_sum * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + offs_n[:, None] * D + offs_d[None, :], mask=n_ok[:, None] & d_ok[None, :],
                    other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        run_max = new_max
    acc = acc / run_sum[:, None]
    n = bh // H
    h = bh % H
    tl.store(ctx_ptr + (offs_m[:, None] * NB + n) * (H * D) + h * D + offs_d[None, :], acc,
             mask=m_ok[:, None] & d_ok[None, :])


''' + GEMM_BIAS_KERNEL.replace("@NAME@", "_out_proj") + '''

def _self_attention(x, num_heads, in_w=None, in_b=None, out_w=None, out_b=None):
    L, NB, E = x.shape
    if in_w is None:
        # Standalone use without a module: deterministic small weights (ModelNew always passes its own).
        g = torch.Generator(device=x.device)
        g.manual_seed(2025)
        in_w = torch.randn(3 * E, E, device=x.device, dtype=x.dtype, generator=g) * 0.05
        in_b = torch.zeros(3 * E, device=x.device, dtype=x.dtype)
        out_w = torch.randn(E, E, device=x.device, dtype=x.dtype, generator=g) * 0.05
        out_b = torch.zeros(E, device=x.device, dtype=x.dtype)
    H = num_heads
    D = E // H
    M = L * NB
    qkv = torch.empty((3, NB * H, L, D), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, @GBM@), triton.cdiv(3 * E, @GBN@))
    _in_proj_heads[grid](x, in_w, in_b, qkv, M, NB, E, E, x.stride(0), x.stride(1), x.stride(2), in_w.stride(0),
                         in_w.stride(1), H=H, D=D, BM=@GBM@, BN=@GBN@, BK=32, num_warps=4, num_stages=3)
    ctx = torch.empty((L, NB, E), device=x.device, dtype=x.dtype)
    DP = max(16, triton.next_power_of_2(D))
    _flash[(triton.cdiv(L, @BM@), NB * H)](qkv[0], qkv[1], qkv[2], ctx, L, NB, 1.0 / math.sqrt(D), H=H, D=D, DP=DP,
                                           BM=@BM@, BN=@BN@, num_warps=@WARPS@, num_stages=2)
    out = torch.empty((L, NB, E), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, @GBM@), triton.cdiv(E, @GBN@))
    _out_proj[grid](ctx, out_w, out_b, out, M, E, E, E, 1, out_w.stride(0), out_w.stride(1), E,
                    BM=@GBM@, BN=@GBN@, BK=32, num_warps=4, num_stages=3)
    return out


class ModelNew(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        # The same module as the reference, for its parameters (and their initialisation) only.
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.num_heads = num_heads

    def forward(self, x):
        a = self.attn
        return _self_attention(x, self.num_heads, a.in_proj_weight, a.in_proj_bias, a.out_proj.weight,
                               a.out_proj.bias)
'''

# How the in-projection reads x: through its strides, or as if it were a contiguous (L, NB, E) tensor.
LOAD_X_STRIDED = '''        a = tl.load(x_ptr + l[:, None] * sxl + n[:, None] * sxn + kk[None, :] * sxe,
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)'''
LOAD_X_CONTIGUOUS = '''        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)'''

ADD_LAYERNORM_KERNEL = '''import torch
import torch.nn as nn
import triton
import triton.language as tl

# @NOTE@


@triton.jit
def _add_layernorm(a_ptr, x_ptr, w_ptr, b_ptr, y_ptr, M, NB, E, eps, sal, san, sae, sxl, sxn, sxe,
                   BR: tl.constexpr, BE: tl.constexpr):
    # y[m] = LayerNorm(a[m] + x[m]) for rows m = l * NB + n; both inputs through their strides.
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.arange(0, BE)
    l = rows // NB
    n = rows % NB
    ok = (rows[:, None] < M) & (cols[None, :] < E)
    a = tl.load(a_ptr + l[:, None] * sal + n[:, None] * san + cols[None, :] * sae, mask=ok, other=0.0)
    x = tl.load(x_ptr + l[:, None] * sxl + n[:, None] * sxn + cols[None, :] * sxe, mask=ok, other=0.0)
    h = a + x
    mean = tl.sum(h, axis=1) / E
    diff = tl.where(ok, h - mean[:, None], 0.0)
    var = tl.sum(diff * diff, axis=1) / E
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=cols < E, other=0.0)
    b = tl.load(b_ptr + cols, mask=cols < E, other=0.0)
    tl.store(y_ptr + rows[:, None] * E + cols[None, :], diff * rstd[:, None] * w[None, :] + b[None, :], mask=ok)


class ModelNew(nn.Module):
    def __init__(self, @A@, eps=1e-5):
        super().__init__()
        # LayerNorm's parameters, as it creates them (no random draws): weight ones, bias zeros.
        self.weight = nn.Parameter(torch.ones(@A@))
        self.bias = nn.Parameter(torch.zeros(@A@))
        self.eps = eps

    def forward(self, attn_output, x):
        L, NB, E = x.shape
        y = torch.empty((L, NB, E), device=x.device, dtype=x.dtype)
        M = L * NB
        BE = triton.next_power_of_2(E)
        _add_layernorm[(triton.cdiv(M, @BR@),)](attn_output, x, self.weight, self.bias, y, M, NB, E, self.eps,
                                               *attn_output.stride(), *x.stride(), BR=@BR@, BE=BE,
                                               num_warps=@WARPS@)
        return y
'''

# =================================================================================
# Which reply for which request
# =================================================================================

GEMM_TILES = [(64, 64, 4), (128, 128, 8), (128, 64, 4), (64, 128, 4)]
SOFTMAX_TILES = [(256, 8, 4), (512, 4, 4), (128, 16, 4), (1024, 4, 8)]
ATTN43_TILES = [(64, 64, 4), (64, 32, 4), (32, 64, 4), (64, 64, 8)]
ATTN31_TILES = [(64, 64, 4), (128, 64, 8), (64, 32, 4), (128, 32, 8)]
LN_TILES = [(16, 4), (32, 4), (8, 2), (64, 8)]

DECOMPOSITIONS = {"99_Matmul_GELU_Softmax": (decomposition_99, subproblems_99),
                  "43_MinGPTCausalAttention": (decomposition_43, subproblems_43),
                  "31_VisionAttention": (decomposition_31, subproblems_31)}

# Subproblem -> its messy behaviour: "layout" (a), "names" (b), None.
KIND = {"linear_gelu": "names", "softmax_cols": "layout", "qkv_heads": None, "causal_attention": "layout",
        "out_proj": "names", "self_attention": "layout", "add_layernorm": "names"}

# The constructor's argument names: as the top level passes them, and as the misnamed kernel has them.
NAMES = {"linear_gelu": (("in_features", "out_features"), ("in_f", "out_f")),
         "out_proj": (("in_features", "out_features"), ("in_f", "out_f")),
         "add_layernorm": (("embed_dim",), ("normalized_shape",))}


def kernel_source(task: str, n: int, fixed: bool) -> str:
    """The kernel for subproblem `task`, tile shape n (cycled), with its messy behaviour (fixed=False:
    contiguous-only or misnamed) or its fix."""
    names = NAMES.get(task, ((), ()))[0 if fixed else 1]
    note = (f"{NAMES_MARK}: the constructor takes the keywords the top level passes" if fixed else
            "constructor arguments named as in my own test harness")
    if task == "linear_gelu":
        bm, bn, w = GEMM_TILES[n % 4]
        return fill(LINEAR_GELU_KERNEL, A=names[0], B=names[1], NOTE=note, BM=bm, BN=bn, WARPS=w)
    if task == "softmax_cols":
        br, bc, w = SOFTMAX_TILES[n % 4]
        return fill(SOFTMAX_COLS_STRIDED if fixed else SOFTMAX_COLS_CONTIGUOUS, MARK=STRIDED_MARK, BR=br, BC=bc,
                    WARPS=w)
    if task == "qkv_heads":
        bm, bn, w = GEMM_TILES[n % 4]
        return fill(QKV_HEADS_KERNEL, BM=bm, BN=bn, WARPS=w)
    if task == "causal_attention":
        bm, bn, w = ATTN43_TILES[n % 4]
        return fill(CAUSAL_ATTENTION_STRIDED if fixed else CAUSAL_ATTENTION_CONTIGUOUS, MARK=STRIDED_MARK,
                    BM=bm, BN=bn, WARPS=w)
    if task == "out_proj":
        bm, bn, w = GEMM_TILES[n % 4]
        return fill(OUT_PROJ_KERNEL, A=names[0], B=names[1], NOTE=note, BM=bm, BN=bn, WARPS=w)
    if task == "self_attention":
        bm, bn, w = ATTN31_TILES[n % 4]
        gbm, gbn, _ = GEMM_TILES[n % 4]
        return fill(SELF_ATTENTION_KERNEL, LOAD_X=LOAD_X_STRIDED if fixed else LOAD_X_CONTIGUOUS,
                    NOTE=(f"{STRIDED_MARK}: x is read through its strides (the top level passes a permuted view)"
                          if fixed else "x is read as a contiguous (L, N, E) tensor"),
                    BM=bm, BN=bn, WARPS=w, GBM=gbm, GBN=gbn)
    if task == "add_layernorm":
        br, w = LN_TILES[n % 4]
        return fill(ADD_LAYERNORM_KERNEL, A=names[0], NOTE=note, BR=br, WARPS=w)
    raise KeyError(task)


def choose(agent: str, task: str, prompt: str) -> bool:
    """Whether the reply to this request is the fixed kernel (True) or the messy one (False)."""
    kind = KIND[task]
    if kind is None:
        return True
    mark, words = (STRIDED_MARK, LAYOUT_WORDS) if kind == "layout" else (NAMES_MARK, COMPOSED_WORDS)
    if agent == "generate":
        return False
    if mark in prompt:  # a request on a kernel that has the fix already keeps it
        return True
    return agent == "debug" and words in prompt


PROSE = {
    ("layout", False): ("Here is a Triton kernel for it. I index the input as a dense row-major tensor, which "
                        "keeps the address arithmetic simple.", "Each program handles a block; masks cover the "
                        "partial blocks at the edges."),
    ("layout", True): ("The failure says the input arrives as a non-contiguous view (the top level passes a "
                       "transposed/permuted tensor). The kernel assumed row-major storage; it now takes the "
                       "strides as arguments and indexes every input through them.",
                       "This reads the view in place: no .contiguous() copy."),
    ("names", False): ("A fused Triton kernel for this subproblem; the parameters are created exactly as the "
                       "reference creates them, so the weights match.", "Tile sizes are a first guess."),
    ("names", True): ("The kernel itself was right: inside the composed model the top level builds this module "
                      "with keyword arguments, and my constructor named them differently. Renamed to match the "
                      "reference's signature.", "Nothing else changed."),
    (None, True): ("A Triton kernel for this subproblem.", "It keeps the reference's output layout."),
}


def prompt_text(raw: str) -> str:
    """The request's messages as one text (the exec provider sends an OpenAI chat body)."""
    try:
        body = json.loads(raw)
        parts = []
        for m in body.get("messages", []):
            c = m.get("content")
            if isinstance(c, str):
                parts.append(c)
            elif isinstance(c, list):
                parts.extend(p.get("text", "") for p in c if isinstance(p, dict))
        return "\n".join(parts)
    except (ValueError, AttributeError):
        return raw


def reply(agent: str, task: str, prompt: str, state: pathlib.Path, small: bool = False) -> str | None:
    if agent == "decompose":
        if task not in DECOMPOSITIONS:
            return None
        return f"({BANNER})\n\n" + DECOMPOSITIONS[task][0]((SMALL_SIZES if small else SIZES)[task])
    if agent not in ("generate", "debug", "optimize") or task not in KIND:
        return None
    n = next_number(state, f"{agent}/{task}")
    fixed = choose(agent, task, prompt)
    lead, tail = PROSE[(KIND[task], fixed)]
    if agent == "optimize":
        lead = "Same kernel, another tile shape: the last one left the GPU underused. " + lead
    src = f"# messy_gpu_fixture.py (HAND-WRITTEN FIXTURE, not an LLM): {agent} #{n} for {task}\n" + \
        kernel_source(task, n, fixed)
    return f"({BANNER})\n\n{lead}\n\n" + block("kernel.py", src) + f"\n{tail}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", help="folder for the reply counters (default: per parent process)")
    ap.add_argument("--small", action="store_true",
                    help="decompositions for copies of the problems at SMALL_SIZES (CPU checks of the same answers)")
    args = ap.parse_args()
    prompt = prompt_text(sys.stdin.read())
    agent = os.environ.get("MKEVOLVE_AGENT", "")
    task = os.environ.get("MKEVOLVE_TASK", "")
    state = pathlib.Path(args.state or os.path.join(tempfile.gettempdir(), f"mkevolve-messy-gpu-fixture-{run_pid()}"))
    text = reply(agent, task, prompt, state, args.small)
    print(text if text is not None else
          f"({BANNER}) Nothing scripted for agent {agent!r}, task {task!r}: no files in this reply.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
