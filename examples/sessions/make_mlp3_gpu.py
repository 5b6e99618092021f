"""Writes mlp3_gpu.jsonl: a HAND-WRITTEN FIXTURE session (not a real LLM's output)
for a GPU end-to-end run of `mkevolve run examples/problems/06_mlp3.py` with
real Triton kernels. NOT YET RUN ON A GPU (no device time was left when it was
written); suggested command, from the repository root on the GPU machine:

  MKEVOLVE_HOME=$PWD build/mkevolve run examples/problems/06_mlp3.py \
      --llm replay:examples/sessions/mlp3_gpu.jsonl --out runs/mlp3 \
      --iterations 3 --calls-per-iter 8 --refine-every 5 --decompose-workers 1

(no split/fuse lines are scripted, hence --refine-every 5). The first kernel
written for linear_gelu has a deliberate bug (no GELU), so the beam's debug
prompt path is exercised before the fixed kernel is composed.

Run: python3 examples/sessions/make_mlp3_gpu.py
"""
import json
import pathlib

from mlp_fixture import block, decomposition_reply

HERE = pathlib.Path(__file__).parent


KERNEL = '''import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gemm_bias_act(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, sxm, swn, sym,
                   GELU: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # y = act(x @ w^T + b): the bias and the activation run in the GEMM's epilogue,
    # so the pre-activation never reaches global memory.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(x_ptr + rm[:, None] * sxm + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * swn + kk[:, None], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc=acc, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if GELU:
        acc = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    tl.store(y_ptr + rm[:, None] * sym + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    """%(doc)s"""

    def __init__(self, in_features, out_features):
        super().__init__()
        w = torch.empty(out_features, in_features)
        nn.init.kaiming_uniform_(w, a=math.sqrt(5))  # the draws nn.Linear makes, in its order
        b = torch.empty(out_features)
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(b, -bound, bound)
        self.weight = nn.Parameter(w)
        self.bias = nn.Parameter(b)

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, %(bm)d), triton.cdiv(N, %(bn)d))
        _gemm_bias_act[grid](x, self.weight, self.bias, y, M, N, K, x.stride(0), self.weight.stride(0), y.stride(0),
                             GELU=%(gelu)s, BM=%(bm)d, BN=%(bn)d, BK=32, num_warps=%(warps)d, num_stages=3)
        return y
'''


def kernel(gelu, bm, bn, warps, doc):
    return KERNEL % {"gelu": gelu, "bm": bm, "bn": bn, "warps": warps, "doc": doc}


def main():
    lines = ["# HAND-WRITTEN FIXTURE session for a GPU run of 06_mlp3 (see make_mlp3_gpu.py); not a real LLM's output."]
    why = "Each GEMM needs its full input row, so each Linear is a cut; GELU fuses into the GEMM before it."
    lines.append(json.dumps({"agent": "decompose", "task": "06_mlp3",
                             "text": decomposition_reply(why, tokens=1024, d_in=1024, hidden=2048, d_out=512)}))
    bug = kernel("False", 64, 64, 4, "Fuses bias and GELU into the GEMM epilogue. (Fixture bug: GELU is off.)")
    fixed = kernel("True", 64, 64, 4, "Fuses bias and exact GELU into the GEMM epilogue.")
    tuned = kernel("True", 128, 128, 8, "Fuses bias and exact GELU into the GEMM epilogue; 128x128 tiles.")
    lin = kernel("False", 64, 64, 4, "GEMM with the bias in the epilogue.")
    lin_tuned = kernel("False", 128, 64, 4, "GEMM with the bias in the epilogue; 128x64 tiles.")
    for _ in range(16):
        lines.append(json.dumps({"agent": "generate", "task": "linear_gelu", "text": block("kernel.py", bug)}))
        lines.append(json.dumps({"agent": "debug", "task": "linear_gelu", "text": block("kernel.py", fixed)}))
        lines.append(json.dumps({"agent": "optimize", "task": "linear_gelu", "text": block("kernel.py", tuned)}))
        lines.append(json.dumps({"agent": "generate", "task": "linear", "text": block("kernel.py", lin)}))
        lines.append(json.dumps({"agent": "debug", "task": "linear", "text": block("kernel.py", lin)}))
        lines.append(json.dumps({"agent": "optimize", "task": "linear", "text": block("kernel.py", lin_tuned)}))
    (HERE / "mlp3_gpu.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
