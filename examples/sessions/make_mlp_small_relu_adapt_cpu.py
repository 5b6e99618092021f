"""Writes mlp_small_relu_adapt_cpu.jsonl: a HAND-WRITTEN FIXTURE session (not a
recording of a real LLM) in the replay format's scripted form (docs/LLM.md), for
`mkevolve adapt RUN mlp_small_relu.py --llm replay:...mlp_small_relu_adapt_cpu.jsonl
--test-cpu-unsafe ...` in tests/e2e/adapt.sh, where RUN is a finished run of
mlp_small.py with mlp_small_cpu.jsonl.

The decomposition reply keeps the earlier run's `linear` subproblem file
unchanged (so its verified subkernel is reused) and replaces `linear_gelu` with
a new `linear_relu`. Kernel replies exist only for linear_relu: a call for any
other subproblem would find no scripted line and fail the run. As in
make_mlp_small_cpu.py the "kernels" are torch-only (CPU test mode).

Run: python3 examples/sessions/make_mlp_small_relu_adapt_cpu.py
"""
import json
import pathlib

from mlp_fixture import LINEAR, block

HERE = pathlib.Path(__file__).parent
SIZES = dict(tokens=64, d_in=32, hidden=64, d_out=16)

TOP = '''import torch.nn as nn

from subkernel_problems.linear_relu import Model as LinearRelu
from subkernel_problems.linear import Model as Linear


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        # Same construction order as the original: fc1, fc2, fc3.
        self.block1 = LinearRelu(in_features, hidden)
        self.block2 = LinearRelu(hidden, hidden)
        self.head = Linear(hidden, out_features)

    def forward(self, x):
        return self.head(self.block2(self.block1(x)))
'''

LINEAR_RELU = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear then ReLU: a GEMM with an elementwise epilogue (one kernel)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.relu(self.proj(x))


tokens = %(tokens)d


def get_input_configs():
    return [
        {"get_init_inputs": lambda: [%(d_in)d, %(hidden)d], "get_inputs": lambda: [torch.randn(tokens, %(d_in)d)]},
        {"get_init_inputs": lambda: [%(hidden)d, %(hidden)d], "get_inputs": lambda: [torch.randn(tokens, %(hidden)d)]},
    ]
'''

KERNEL_LINEAR_RELU = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): torch-only stand-in for a fused Linear+ReLU kernel."""

    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)  # same RNG draws as the reference
        self.weight = lin.weight
        self.bias = lin.bias

    def forward(self, x):
        return torch.clamp_min(torch.addmm(self.bias, x, self.weight.t()), 0.0).contiguous()
'''


def main():
    lines = ["# HAND-WRITTEN FIXTURE session for tests/e2e/adapt.sh (see make_mlp_small_relu_adapt_cpu.py); "
             "not a real LLM's output."]
    text = ("The variant differs only in its activation: `linear` is unchanged, `linear_gelu` becomes `linear_relu`."
            "\n\n" + block("decomposed_problem.py", TOP) + block("subkernel_problems/linear_relu.py", LINEAR_RELU % SIZES)
            + block("subkernel_problems/linear.py", LINEAR % SIZES))
    lines.append(json.dumps({"agent": "decompose", "task": "mlp_small_relu", "text": text}))
    for agent in ("generate", "debug", "optimize"):
        for _ in range(8):
            lines.append(json.dumps({"agent": agent, "task": "linear_relu", "text": block("kernel.py", KERNEL_LINEAR_RELU)}))
    (HERE / "mlp_small_relu_adapt_cpu.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
