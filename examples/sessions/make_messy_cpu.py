"""Writes messy_cpu.jsonl: a HAND-WRITTEN FIXTURE session (not a recording of a
real LLM) in the replay format's scripted form (docs/LLM.md), for
tests/e2e/messy.sh. It plays the kind of answer a real LLM gives, honest but
messy, for examples/sessions/messy.py (softmax(gelu(linear(x)), dim=1) * 2):

- the decomposition comes with prose around several code blocks, re-expresses
  every op (the linear as a matmul plus bias, GELU with erf, the softmax written
  out as max-subtracted exponentials over their sum: equal to the original up
  to rounding, not bit for bit), and passes the softmax a transposed view of
  the GELU's output (a softmax over dim 0 of h.t(), turned back by .t());
- the first softmax kernel assumes a contiguous input (x.view(-1)): it passes on
  get_inputs()' fresh tensors but not on the view the composition passes, so
  its local trials, which now use that layout, fail and the debug prompt names it;
- the linear_gelu kernel names its constructor's arguments otherwise than the
  top level passes them (in_f/out_f against in_features=/out_features=): it
  passes its own trials (positional arguments) and makes the composition raise
  at the top level's line that builds it; the debug reply for that error fixes it;
- the kernels carry a fallback branch that never runs (weights always passed).

The "kernels" are torch-only stand-ins, as every CPU fixture's: the worker's
CPU test mode accepts them (its static checks are off). Nothing here is evidence
of what an LLM would write.

Run: python3 examples/sessions/make_messy_cpu.py
"""
import json
import pathlib

HERE = pathlib.Path(__file__).parent


def block(name: str, text: str) -> str:
    return f"```python file={name}\n{text}```\n"


TOP = '''import torch.nn as nn

from subkernel_problems.linear_gelu import Model as LinearGelu
from subkernel_problems.softmax_scale import Model as SoftmaxScale


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        # Built with keywords, in the original's order (the Linear's weights first).
        self.proj = LinearGelu(in_features=in_features, out_features=out_features)
        self.norm = SoftmaxScale(scale=2.0)

    def forward(self, x):
        h = self.proj(x)
        # The softmax runs over the columns of the transposed view: a free relabel.
        return self.norm(h.t()).t()
'''

LINEAR_GELU = '''import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """x @ W^T + b, then the exact (erf) GELU: one GEMM with an elementwise epilogue."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.matmul(x, self.fc.weight.t()) + self.fc.bias
        return 0.5 * y * (1.0 + torch.erf(y / math.sqrt(2.0)))


def get_inputs():
    return [torch.randn(32, 48)]


def get_init_inputs():
    return [48, 40]
'''

SOFTMAX_SCALE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """A softmax over dim 0, written out (max-subtracted exponentials over their sum), times a scale."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        e = torch.exp(x - x.max(dim=0, keepdim=True).values)
        return e / e.sum(dim=0, keepdim=True) * self.scale


def get_inputs():
    return [torch.randn(40, 32)]


def get_init_inputs():
    return [2.0]
'''

DECOMPOSITION = (
    "Two pieces fuse naturally: the GEMM with its GELU epilogue, and the normalisation. "
    "I re-expressed the ops so each subproblem reads as its kernel will compute it; they agree "
    "with the original up to floating-point rounding.\n\n"
    + block("decomposed_problem.py", TOP)
    + "\nThe GEMM + GELU subproblem:\n\n" + block("subkernel_problems/linear_gelu.py", LINEAR_GELU)
    + "\nAnd the softmax, over dim 0 of the transposed activations:\n\n"
    + block("subkernel_problems/softmax_scale.py", SOFTMAX_SCALE)
    + "\nThe top level only wires them together; all math lives in the subproblems.\n")

# Kernels: FIXTURE (CPU test mode) torch-only stand-ins.
LINEAR_GELU_KERNEL = '''import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): stand-in for a fused GEMM + GELU Triton kernel."""

    def __init__(self, {a}, {b}):
        super().__init__()
        fc = nn.Linear({a}, {b})  # the same RNG draws as the reference
        self.weight = fc.weight
        self.bias = fc.bias

    def forward(self, x, weight=None):
        if weight is None:
            weight = self.weight
        else:  # never taken: the composition never passes weights
            weight = torch.randn_like(self.weight) * 0.02
        y = torch.addmm(self.bias, x, weight.t())
        return 0.5 * y * (1.0 + torch.erf(y * (1.0 / math.sqrt(2.0))))
'''
LINEAR_GELU_MISNAMED = LINEAR_GELU_KERNEL.format(a="in_f", b="out_f")
LINEAR_GELU_FIXED = LINEAR_GELU_KERNEL.format(a="in_features", b="out_features")

SOFTMAX_CONTIGUOUS_ONLY = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): stand-in for a column-softmax kernel that walks its
    input as one flat buffer, which only a contiguous input allows."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        flat = x.view(-1)  # assumes row-major contiguous storage
        cols = flat.view(x.shape[0], x.shape[1])
        e = torch.exp(cols - cols.max(dim=0, keepdim=True).values)
        return e / e.sum(dim=0, keepdim=True) * self.scale
'''
SOFTMAX_FIXED = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): stand-in for a column-softmax kernel that indexes its
    input through its strides, whatever the layout."""

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        if not torch.is_floating_point(x):
            raise TypeError("expects a floating-point input")
        e = torch.exp(x - x.max(dim=0, keepdim=True).values)
        return e / e.sum(dim=0, keepdim=True) * self.scale
'''

WHOLE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): stand-in for a whole-problem kernel (TotalFuse, never expected)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.softmax(torch.nn.functional.gelu(self.fc(x)), dim=1) * 2
'''


def kernel_reply(prose: str, text: str) -> str:
    return prose + "\n\n" + block("kernel.py", text) + "\nThe launch grid covers every row.\n"


def main():
    lines = ["# HAND-WRITTEN FIXTURE session for tests/e2e/messy.sh (see make_messy_cpu.py); not a real LLM's output."]
    lines.append(json.dumps({"agent": "decompose", "task": "messy", "text": DECOMPOSITION}))
    line = lambda agent, task, text, guard=None: lines.append(json.dumps(
        {"agent": agent, "task": task, "text": text, **({"prompt_contains": guard} if guard else {})}))
    for _ in range(8):
        # A debug prompt that carries the composition's error gets the fix; the
        # other kernel replies keep the misnamed constructor.
        line("debug", "linear_gelu", kernel_reply("The top level builds it with keywords; I renamed the "
                                                  "constructor's arguments to match.", LINEAR_GELU_FIXED),
             "inside the composed solution")
        line("debug", "softmax_scale", kernel_reply("The input can be a transposed view; the kernel now "
                                                    "indexes it through its strides.", SOFTMAX_FIXED),
             "non-contiguous view")
    for _ in range(8):
        for agent in ("generate", "debug", "optimize"):
            line(agent, "linear_gelu", kernel_reply("Fused GEMM with a GELU epilogue.", LINEAR_GELU_MISNAMED))
            line(agent, "softmax_scale", kernel_reply("One program per column, two passes.",
                                                      SOFTMAX_CONTIGUOUS_ONLY if agent == "generate"
                                                      else SOFTMAX_FIXED))
            line(agent, "whole_model", kernel_reply("Everything in one kernel.", WHOLE))
    (HERE / "messy_cpu.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
