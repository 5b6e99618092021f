"""Writes mlp_small_cpu.jsonl: a HAND-WRITTEN FIXTURE session (not a recording of
a real LLM) in the replay format's scripted form (docs/LLM.md), for
`mkevolve run examples/sessions/mlp_small.py --llm replay:examples/sessions/mlp_small_cpu.jsonl
--test-cpu-unsafe ...` in tests/e2e/run.sh.

The "kernels" are torch-only, because CI has no GPU and no Triton: the worker's
CPU test mode accepts them (its static checks are off there). They exercise the
whole pipeline: decomposition (verified for real by the worker), beam search
replies, composition into solution/ and the end-to-end check.

Run: python3 examples/sessions/make_mlp_small_cpu.py
"""
import json
import pathlib

from mlp_fixture import block, decomposition_reply

HERE = pathlib.Path(__file__).parent


KERNEL_LINEAR_GELU = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): torch-only stand-in for a fused Linear+GELU kernel."""

    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)  # same RNG draws as the reference
        self.weight = lin.weight
        self.bias = lin.bias

    def forward(self, x):
        y = torch.addmm(self.bias, x, self.weight.t())
        return (0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))).contiguous()
'''
# The first linear_gelu reply forgets the GELU (a fixture bug), so the beam's
# debug path runs and, in iteration 2, the whole budget goes to the failing
# subproblem: decisions that do not depend on CPU timings.
KERNEL_LINEAR_GELU_BUG = KERNEL_LINEAR_GELU.replace(
    "return (0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))).contiguous()", "return y.contiguous()")

KERNEL_LINEAR = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): torch-only stand-in for a Linear kernel."""

    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)
        self.weight = lin.weight
        self.bias = lin.bias

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight.t()).contiguous()
'''

KERNEL_WHOLE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """FIXTURE (CPU test mode): torch-only stand-in for an end-to-end MLP kernel (baselines)."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        layers = [nn.Linear(in_features, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, out_features)]
        self.w = nn.ParameterList([l.weight for l in layers])
        self.b = nn.ParameterList([l.bias for l in layers])

    def forward(self, x):
        for i in range(3):
            x = torch.addmm(self.b[i], x, self.w[i].t())
            if i < 2:
                x = 0.5 * x * (1.0 + torch.erf(x * 0.7071067811865476))
        return x.contiguous()
'''


def main():
    lines = ["# HAND-WRITTEN FIXTURE session for tests/e2e/run.sh (see make_mlp_small_cpu.py); not a real LLM's output."]
    decomposition = decomposition_reply(
        "The fusion blockers are the two GEMMs' full-row dependencies; each Linear keeps its GELU.",
        tokens=64, d_in=32, hidden=64, d_out=16)
    lines.append(json.dumps({"agent": "decompose", "task": "mlp_small", "text": decomposition}))
    # Every reply for one (agent, task) is identical, so the order in which
    # concurrent requests take lines cannot change the run.
    for task, kernel in (("linear_gelu", KERNEL_LINEAR_GELU), ("linear", KERNEL_LINEAR), ("mlp_small", KERNEL_WHOLE)):
        for agent in ("generate", "debug", "optimize"):
            text = KERNEL_LINEAR_GELU_BUG if (task, agent) == ("linear_gelu", "generate") else kernel
            for _ in range(8):
                lines.append(json.dumps({"agent": agent, "task": task, "text": block("kernel.py", text)}))
    (HERE / "mlp_small_cpu.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
