"""The decomposition both hand-written MLP fixture sessions reply with (a
FIXTURE, not an LLM's output): a top level that chains two Linear+GELU blocks
and an output Linear, and the two subproblem files, at the sizes a session
needs. Used by make_mlp_small_cpu.py (CPU, tests/e2e) and make_mlp3_gpu.py
(06_mlp3 on a GPU).
"""

TOP = '''import torch.nn as nn

from subkernel_problems.linear_gelu import Model as LinearGelu
from subkernel_problems.linear import Model as Linear


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        # Same construction order as the original: fc1, fc2, fc3.
        self.block1 = LinearGelu(in_features, hidden)
        self.block2 = LinearGelu(hidden, hidden)
        self.head = Linear(hidden, out_features)

    def forward(self, x):
        return self.head(self.block2(self.block1(x)))
'''

LINEAR_GELU = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear then exact GELU: a GEMM with an elementwise epilogue (one kernel)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.gelu(self.proj(x))


tokens = %(tokens)d


def get_input_configs():
    return [
        {"get_init_inputs": lambda: [%(d_in)d, %(hidden)d], "get_inputs": lambda: [torch.randn(tokens, %(d_in)d)]},
        {"get_init_inputs": lambda: [%(hidden)d, %(hidden)d], "get_inputs": lambda: [torch.randn(tokens, %(hidden)d)]},
    ]
'''

LINEAR = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """The output projection (a GEMM with bias; the GELU before it ends the previous subproblem)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.proj = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.proj(x)


def get_inputs():
    return [torch.randn(%(tokens)d, %(hidden)d)]


def get_init_inputs():
    return [%(hidden)d, %(d_out)d]
'''


def block(path, src):
    """One file of a reply, as the reply format fences it."""
    return "```python file=%s\n%s```\n" % (path, src)


def decomposition_reply(why, tokens, d_in, hidden, d_out):
    """The decompose agent's reply: a sentence, then the three files."""
    sizes = {"tokens": tokens, "d_in": d_in, "hidden": hidden, "d_out": d_out}
    return (why + "\n\n" + block("decomposed_problem.py", TOP)
            + block("subkernel_problems/linear_gelu.py", LINEAR_GELU % sizes)
            + block("subkernel_problems/linear.py", LINEAR % sizes))
