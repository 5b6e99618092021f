#!/usr/bin/env python3
"""Makes KernelBench candidates of a peer's published, LLM-written Triton kernels
(Laurawly/kernelagent-artifacts), and an `mkevolve eval --batch` pairs file for
them. Nothing of the peer's or KernelBench's is committed: both are read at run
time, the peer's from its fetched mirror (a folder the caller names, unpacked or
a git directory), KernelBench's from its checkout (--kb, e.g. .kb/).

  scripts/peer_kernels.py --peer .peer --kb .kb --out /tmp/peer
  mkevolve eval --batch /tmp/peer/pairs.txt --json

The peer's kernels expose `kernel_function(...)`, not `ModelNew`. Each adapter
is one file: the KernelBench problem's own source (its Model builds the
parameters, drawn as the reference draws them), then the peer's kernel file
unchanged, then `class ModelNew(Model)` whose forward calls kernel_function
with the module's own parameters. ADAPTERS below says how each is called; it
holds L3/31_VisionAttention (judged cheating once for a `torch.randn(...) *
scale` weight fallback that never runs) and a few L1/L2 kernels.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

# peer folder -> (peer file, KernelBench level, forward's arguments, the call)
ADAPTERS = {
    "L3/31_VisionAttention": (
        "final_kernel.py", "level3", "x",
        "kernel_function(x, self.attn.embed_dim, self.attn.num_heads, self.attn.in_proj_weight, "
        "self.attn.in_proj_bias, self.attn.out_proj.weight, self.attn.out_proj.bias, self.norm.weight, "
        "self.norm.bias, self.norm.eps)"),
    "L1/12_Matmul_with_diagonal_matrices_": ("kernel_code.py", "level1", "A, B", "kernel_function(A, B)"),
    "L1/1_Square_matrix_multiplication_": ("kernel_code.py", "level1", "A, B", "kernel_function(A, B)"),
    "L2/29_Matmul_Mish_Mish": ("kernel_code.py", "level2", "x",
                               "kernel_function(x, self.linear.weight, self.linear.bias)"),
    "L2/76_Gemm_Add_ReLU": ("kernel_code.py", "level2", "x", "kernel_function(x, self.gemm.weight, self.bias)"),
    "L2/63_Gemm_ReLU_Divide": ("kernel_code.py", "level2", "x",
                               "kernel_function(x, self.linear.weight, self.linear.bias, self.divisor)"),
    "L2/80_Gemm_Max_Subtract_GELU": ("kernel_code.py", "level2", "x",
                                     "kernel_function(x, self.gemm.weight, self.gemm.bias, self.max_dim)"),
    "L2/53_Gemm_Scaling_Hardtanh_GELU": (
        "kernel_code.py", "level2", "x",
        "kernel_function(x, self.gemm.weight, self.gemm.bias, self.scaling_factor, self.hardtanh.min_val, "
        "self.hardtanh.max_val)"),
}

ADAPTER = '''

# ---- adapter (scripts/peer_kernels.py): the peer's kernel_function as KernelBench's ModelNew ----
class ModelNew(Model):
    """The peer's kernel ({path}), called with this module's own parameters."""

    def forward(self, {args}):
        return {call}
'''


def read(root: str, rel: str) -> str:
    """A file of a folder, or of a git directory's HEAD."""
    p = pathlib.Path(root) / rel
    if p.is_file():
        return p.read_text(encoding="utf-8")
    try:
        return subprocess.run(["git", "-C", root, "show", f"HEAD:{rel}"], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise FileNotFoundError(f"{root}: no {rel}") from exc


def quote(path: str) -> str:
    return f'"{path}"' if any(c.isspace() for c in path) else path


def build(peer: str, kb: str, out: str, only=None) -> tuple[pathlib.Path, list[str]]:
    """Writes OUT/<name>.py per adapter and OUT/pairs.txt; returns (pairs file, skipped lines)."""
    out_dir = pathlib.Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines, skipped = ["# peer kernels (Laurawly/kernelagent-artifacts) adapted by scripts/peer_kernels.py"], []
    for name, (fname, level, args, call) in ADAPTERS.items():
        if only and not any(o in name for o in only):
            continue
        problem = pathlib.Path(kb, "KernelBench", level, name.split("/", 1)[1] + ".py").resolve()
        try:
            kernel = read(peer, f"{name}/{fname}")
            problem_src = problem.read_text(encoding="utf-8")
        except (OSError, FileNotFoundError) as exc:
            skipped.append(f"{name}: {exc}")
            continue
        src = (f"# {name}: KernelBench's problem, then the peer's {fname} unchanged, then an adapter.\n"
               + problem_src.rstrip() + f"\n\n\n# ---- the peer's {name}/{fname} ----\n" + kernel.rstrip() + "\n"
               + ADAPTER.format(path=f"{name}/{fname}", args=args, call=call))
        cand = out_dir / (name.replace("/", "_") + ".py")
        cand.write_text(src, encoding="utf-8")
        lines.append(f"{quote(str(problem))} {quote(str(cand.resolve()))}")
    pairs = out_dir / "pairs.txt"
    pairs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return pairs, skipped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peer", default=os.environ.get("MKEVOLVE_PEER", ".peer"),
                    help="the peer's mirror: a folder holding L1/ L2/ L3/, or its git directory (default .peer)")
    ap.add_argument("--kb", default=os.environ.get("MKEVOLVE_KB", ".kb"), help="KernelBench checkout (default .kb)")
    ap.add_argument("--out", required=True, help="folder for the adapters and pairs.txt")
    ap.add_argument("--only", nargs="*", help="only adapters whose name contains one of these")
    args = ap.parse_args(argv)
    pairs, skipped = build(args.peer, args.kb, args.out, args.only)
    for s in skipped:
        print(f"peer_kernels: skipped {s}", file=sys.stderr)
    n = sum(1 for line in pairs.read_text().splitlines() if line and not line.startswith("#"))
    print(f"peer_kernels: {n} adapter(s), pairs file {pairs}")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
