#!/usr/bin/env python3
"""The paper's Appendix D on one case: a bf16 causal attention block
(examples/precision/attention_bf16.py) and its three stages
(examples/precision/attention_bf16_stages/: qkv, attend, out).

For two correct implementations and seven buggy ones it asks:
- end to end (E2E), at fixed atol = rtol = t for t in a ladder: over --runs
  input seeds, how often is the correct one rejected and each bug caught? The
  "best usable" t is the smallest that rejects no correct run.
- decomposed: each stage checked on its own inputs at its calibrated
  tolerances (mkevolve_worker.calibration: the stage's reference against a
  float64 run of it over --calib-runs other seeds, max + 3 sigma, at least
  one ulp, rtol 0), the way `mkevolve calibrate` and `--tolerance calibrated`
  judge subkernels: is each bug caught, and is no correct run rejected?

The implementations are PyTorch functions that do what a Triton kernel of
each stage would (float32 arithmetic on bf16 data, rounded once per stage),
with one injected bug each; the comparison is the evaluator's own
(mkevolve_worker.correctness.compare_tree).

  scripts/appendix_d.py [--cpu] [--runs 20] [--calib-runs 20] [--out DIR]

Each result is one JSON line on stdout and in DIR/appendix_d.jsonl as it is
found; the tables follow, also in DIR/appendix_d.md. --cpu uses small sizes
(it is what tests/python/test_appendix_d.py runs). On a GPU at the example's
sizes the whole script takes well under four minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "worker"))

import torch  # noqa: E402

from mkevolve_worker import calibration as K  # noqa: E402
from mkevolve_worker import correctness as C  # noqa: E402
from mkevolve_worker import loader  # noqa: E402

EXAMPLE = os.path.join(REPO, "examples", "precision", "attention_bf16.py")
STAGES = ("qkv", "attend", "out")
STAGE_FILES = {s: os.path.join(REPO, "examples", "precision", "attention_bf16_stages", s + ".py") for s in STAGES}
SIZES = {"gpu": dict(batch=8, seq_len=256, embed_dim=768, num_heads=12),
         "cpu": dict(batch=2, seq_len=32, embed_dim=64, num_heads=4)}
LADDER = (1e-3, 3e-3, 1e-2, 2e-2, 3e-2, 5e-2, 1e-1)
EVAL_SEED_BASE = 20_000  # the evaluation's input seeds: none of calibration's (calibration.SEED_BASE)

BUGS = {
    "correct": "no bug: float32 arithmetic on bf16 data, rounded once per stage",
    "correct_p_bf16": "no bug: as FlashAttention's kernels do, the softmax weights rounded to bf16 before P V",
    "mask_off_by_one": "causal mask off by one row: each position also sees the next one (tril(diagonal=1))",
    "unsafe_softmax": "softmax as exp(x) / sum(exp(x)) without subtracting the row maximum",
    "acc_bf16_qk": "Q K^T accumulated in bf16 (the running sum rounded to bf16 every 16 products)",
    "tile_boundary_k": "the last partial tile of K's head dimension never loaded (treated as zeros)",
    "softmax_dim": "softmax over dim=-2 instead of dim=-1",
    "v_bias_dropped": "the V part of the QKV projection's bias never added (every context vector shifted)",
    "k_bias_dropped": "the K part of the QKV projection's bias never added (the softmax is invariant to it: "
                      "no end-to-end output can show it)",
}
CORRECT = tuple(b for b in BUGS if b.startswith("correct"))


# -- the implementations: what each stage's kernel computes --------------------

def qkv_impl(x, weight, bias, heads, bug):
    batch, seq, embed = x.shape
    b = bias.float()
    if bug in ("k_bias_dropped", "v_bias_dropped"):
        b = b.clone()
        part = 1 if bug == "k_bias_dropped" else 2
        b[part * embed:(part + 1) * embed] = 0
    y = (x.float() @ weight.float().t() + b).to(x.dtype)
    q, k, v = y.split(embed, dim=2)
    return tuple(t.reshape(batch, seq, heads, embed // heads).transpose(1, 2).contiguous() for t in (q, k, v))


def attend_impl(q, k, v, bug):
    seq, dim = q.shape[-2], q.shape[-1]
    qf, kf, vf = q.float(), k.float(), v.float()
    if bug == "tile_boundary_k":
        block = max(1, (dim * 3) // 4)  # BLOCK_D does not divide dim: the tail tile is not loaded
        kf = kf.clone()
        kf[..., block:] = 0
    if bug == "acc_bf16_qk":
        acc = torch.zeros(*q.shape[:-1], seq, dtype=torch.bfloat16, device=q.device)
        for a in range(0, dim, 16):
            part = qf[..., a:a + 16] @ kf[..., a:a + 16].transpose(-2, -1)
            acc = (acc.float() + part).to(torch.bfloat16)
        scores = acc.float()
    else:
        scores = qf @ kf.transpose(-2, -1)
    scores = scores / math.sqrt(dim)
    causal = torch.tril(torch.ones(seq, seq, dtype=torch.bool, device=q.device),
                        diagonal=1 if bug == "mask_off_by_one" else 0)
    scores = scores.masked_fill(~causal, float("-inf"))
    if bug == "unsafe_softmax":
        e = torch.exp(scores)
        w = e / e.sum(dim=-1, keepdim=True)
    else:
        w = torch.softmax(scores, dim=-2 if bug == "softmax_dim" else -1)
    if bug == "correct_p_bf16":
        w = w.to(torch.bfloat16).float()
    return (w @ vf).to(q.dtype)


def out_impl(ctx, weight, bias, bug):
    batch, heads, seq, dim = ctx.shape
    c = ctx.transpose(1, 2).reshape(batch, seq, heads * dim)
    return (c.float() @ weight.float().t() + bias.float()).to(ctx.dtype)


def pipeline(model, x, bug):
    q, k, v = qkv_impl(x, model.qkv.weight, model.qkv.bias, model.num_heads, bug)
    return out_impl(attend_impl(q, k, v, bug), model.out.weight, model.out.bias, bug)


def stage_impl(stage, model, inputs, bug):
    if stage == "qkv":
        return qkv_impl(inputs[0], model.qkv.weight, model.qkv.bias, model.num_heads, bug)
    if stage == "attend":
        return attend_impl(*inputs, bug)
    return out_impl(inputs[0], model.out.weight, model.out.bias, bug)


# -- the run ---------------------------------------------------------------------

def load(path: str, sizes: dict):
    mod = loader.load_problem(path)
    for k, v in sizes.items():
        if hasattr(mod, k):
            setattr(mod, k, v)
    if hasattr(mod, "head_dim"):
        mod.head_dim = sizes["embed_dim"] // sizes["num_heads"]
    return mod


def build(mod, device):
    C.seed_all(42)
    return mod.Model(*mod.get_init_inputs()).to(device).eval()


def inputs(mod, seed, device):
    return C.generate_inputs({"get_inputs": mod.get_inputs}, {"seed": seed, "alt": False}, device)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", action="store_true", help="run on the CPU at small sizes")
    ap.add_argument("--runs", type=int, default=20, help="evaluation seeds per implementation")
    ap.add_argument("--calib-runs", type=int, default=20, help="calibration seeds per stage")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="where appendix_d.jsonl and .md go")
    a = ap.parse_args(argv)
    if not a.cpu and not torch.cuda.is_available():
        print("appendix_d: no CUDA GPU visible; use --cpu for the small CPU run", file=sys.stderr)
        return 3
    device = "cpu" if a.cpu else "cuda"
    sizes = SIZES["cpu" if a.cpu else "gpu"]
    C.disable_tf32()
    os.makedirs(a.out, exist_ok=True)
    jsonl = open(os.path.join(a.out, "appendix_d.jsonl"), "w", encoding="utf-8")
    t0 = time.monotonic()

    def emit(rec: dict) -> None:
        rec["t_s"] = round(time.monotonic() - t0, 2)
        line = json.dumps(rec)
        print(line, flush=True)
        jsonl.write(line + "\n")
        jsonl.flush()

    whole = load(EXAMPLE, sizes)
    stages = {s: load(STAGE_FILES[s], sizes) for s in STAGES}
    emit({"what": "setup", "device": device, "sizes": sizes, "runs": a.runs, "calib_runs": a.calib_runs,
          "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
          "ladder": LADDER})

    # Calibration of each stage, on seeds of its own.
    cal = {}
    for s in STAGES:
        r = K.calibrate_module(stages[s], STAGE_FILES[s], device, a.calib_runs, kinds=("x1",))
        if "error" in r:
            emit({"what": "error", "stage": s, "message": r["error"]})
            return 1
        cal[s] = C.normalize_options({"calibrated": K.applied(r) | {"source": f"calibration of {s}"}})
        emit({"what": "calibration", "stage": s, "high_precision": r["high_precision"],
              "atol": {p: o["by_kind"]["x1"]["atol"] for p, o in r["outputs"].items()},
              "max": {p: o["by_kind"]["x1"]["max"] for p, o in r["outputs"].items()},
              "std": {p: o["by_kind"]["x1"]["std"] for p, o in r["outputs"].items()},
              "floor": {p: o["by_kind"]["x1"]["floor"] for p, o in r["outputs"].items()}})

    ref_whole = build(whole, device)
    ref_stage = {s: build(stages[s], device) for s in STAGES}
    results = {}
    for bug in BUGS:
        e2e_fail = {t: 0 for t in LADDER}
        dec_fail, stage_fail = 0, {s: 0 for s in STAGES}
        worst = {s: 0.0 for s in STAGES}
        e2e_err = 0.0
        for r in range(a.runs):
            seed = EVAL_SEED_BASE + r
            with torch.no_grad():
                x = inputs(whole, seed, device)
                exp = ref_whole(*x)
                got = pipeline(ref_whole, x[0], bug)
            for t in LADDER:
                res = C.compare_tree(exp, got, C.normalize_options({"atol": t, "rtol": t}))
                e2e_fail[t] += not res["ok"]
                e2e_err = max(e2e_err, res.get("max_abs_err") or 0.0)
            any_stage = False
            for s in STAGES:
                with torch.no_grad():
                    xs = inputs(stages[s], seed, device)
                    exp_s = ref_stage[s](*xs)
                    got_s = stage_impl(s, ref_stage[s], xs, bug)
                res = C.compare_tree(exp_s, got_s, cal[s])
                worst[s] = max(worst[s], res.get("max_abs_err") or 0.0)
                if not res["ok"]:
                    stage_fail[s] += 1
                    any_stage = True
            dec_fail += any_stage
        results[bug] = {"e2e_fail": e2e_fail, "decomposed_fail": dec_fail, "stage_fail": stage_fail,
                        "e2e_max_abs_err": e2e_err, "stage_max_abs_err": worst}
        emit({"what": "implementation", "bug": bug, "description": BUGS[bug], "runs": a.runs,
              **{k: ({str(t): n for t, n in v.items()} if k == "e2e_fail" else v) for k, v in results[bug].items()}})

    # The best usable fixed tolerance rejects no run of any correct implementation.
    usable = [t for t in LADDER if all(results[c]["e2e_fail"][t] == 0 for c in CORRECT)]
    best = usable[0] if usable else None
    bugs = [b for b in BUGS if b not in CORRECT]
    summary = {"what": "summary", "best_usable_e2e_tolerance": best,
               "correct_rejected_e2e_at_best": sum(results[c]["e2e_fail"][best] for c in CORRECT) if best else None,
               "correct_rejected_decomposed": sum(results[c]["decomposed_fail"] for c in CORRECT),
               "correct_runs": len(CORRECT) * a.runs,
               "bugs": len(bugs),
               "caught_e2e_at_best": sum(results[b]["e2e_fail"][best] == a.runs for b in bugs) if best else None,
               "caught_decomposed": sum(results[b]["decomposed_fail"] == a.runs for b in bugs),
               "missed_e2e_caught_decomposed": [b for b in bugs if best and results[b]["e2e_fail"][best] < a.runs
                                                and results[b]["decomposed_fail"] == a.runs],
               "seconds": round(time.monotonic() - t0, 1)}
    emit(summary)

    n = a.runs
    lines = [f"# Appendix D on a bf16 causal attention block ({device}, {sizes}, torch {torch.__version__})", "",
             f"Fixed E2E tolerance atol = rtol = t: runs rejected of {n} (correct) or caught of {n} (bugs).", "",
             "| implementation | " + " | ".join(f"t = {t:g}" for t in LADDER) + " | decomposed, calibrated | "
             "stages that failed |",
             "|---|" + "---|" * (len(LADDER) + 2)]
    for bug in BUGS:
        r = results[bug]
        lines.append(f"| {bug} | " + " | ".join(f"{r['e2e_fail'][t]}/{n}" for t in LADDER)
                     + f" | {r['decomposed_fail']}/{n} | "
                     + (", ".join(f"{s} {k}/{n}" for s, k in r["stage_fail"].items() if k) or "none") + " |")
    lines += ["", f"Best usable fixed E2E tolerance (the smallest that rejects no correct run): "
                  f"{best if best is not None else 'none in the ladder'}.",
              f"At it, bugs caught in every run: {summary['caught_e2e_at_best']} of {summary['bugs']}. "
              f"Decomposed with calibrated per-stage tolerances: {summary['caught_decomposed']} of "
              f"{summary['bugs']}; correct runs rejected: {summary['correct_rejected_decomposed']} of "
              f"{summary['correct_runs']}.",
              "Missed end to end at the best usable tolerance, caught in every run decomposed: "
              + (", ".join(summary["missed_e2e_caught_decomposed"]) or "none") + ".", "",
              "Implementations: " + "; ".join(f"{b}: {d}" for b, d in BUGS.items()) + "."]
    md = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "appendix_d.md"), "w", encoding="utf-8") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
