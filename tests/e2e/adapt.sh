#!/usr/bin/env bash
# End-to-end test of `mkevolve adapt` (issue 17), CPU only, with the real worker
# in its CPU test mode and two HAND-WRITTEN FIXTURE sessions replayed through
# the real `replay:` provider (not a real LLM's output):
#   1. `mkevolve run` of examples/sessions/mlp_small.py (Linear+GELU twice, then
#      Linear) with mlp_small_cpu.jsonl: the earlier run;
#   2. `mkevolve adapt` of it to mlp_small_relu.py (ReLU in place of GELU) with
#      mlp_small_relu_adapt_cpu.jsonl, whose decomposition keeps `linear`
#      unchanged and has kernel replies for `linear_relu` only: the linear
#      subkernel must be reused with no LLM call, only linear_relu evolved, and
#      the composed package must verify;
#   3. the adapted run resumed (nothing left to do) and adapted again (every
#      subkernel reused, no kernel call at all);
#   4. `mkevolve swap` of a reused subkernel clears its reused_from.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"

S=$REPO/examples/sessions
SMALL=(--trials 2 --perf-trials 2 --warmup 1 --timeout 120)

# Bad usage: exit 2, before anything starts.
expect "adapt without --out" 2 "--out" -- "$BIN" adapt r1 "$S/mlp_small_relu.py"
expect "adapt of a directory that is not a run" 2 "not a run directory" -- "$BIN" adapt "$T" "$S/mlp_small_relu.py" \
  --out a0 --llm "replay:$S/mlp_small_relu_adapt_cpu.jsonl"
mkdir -p unfinished && echo '{}' >unfinished/config.json
expect "adapt of a run without a solution" 2 "manifest.json: missing" -- "$BIN" adapt unfinished \
  "$S/mlp_small_relu.py" --out a0 --llm "replay:$S/mlp_small_relu_adapt_cpu.jsonl"
if [[ -e a0 ]]; then fail "bad usage left a run directory"; else pass "bad usage leaves nothing behind"; fi

if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip the fixture runs: $PY has no torch"
  if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
  exit 0
fi

expect "the earlier run" 0 "solution: .*r1/solution" -- "$BIN" run "$S/mlp_small.py" --llm "replay:$S/mlp_small_cpu.jsonl" \
  --out r1 --python "$PY" --test-cpu-unsafe --iterations 2 --calls-per-iter 4 --refine-every 3 --decompose-workers 1 \
  "${SMALL[@]}"
expect "adapt with a zero budget" 2 "budget" -- "$BIN" adapt r1 "$S/mlp_small_relu.py" --out a0 --budget 0 \
  --llm "replay:$S/mlp_small_relu_adapt_cpu.jsonl"

expect "adapt to the ReLU variant" 0 "solution: .*r2/solution" -- "$BIN" adapt r1 "$S/mlp_small_relu.py" \
  --llm "replay:$S/mlp_small_relu_adapt_cpu.jsonl" --out r2 --budget 2 --python "$PY" --test-cpu-unsafe
"$PY" - r1 r2 <<'PY'
import json, sys

def events(d):
    return [json.loads(l) for l in open(f"{d}/events.jsonl")]

def kernel_calls(evs, task):
    return sum(1 for e in evs if e["type"] == "llm_call" and e.get("task") == task
               and e.get("agent") in ("generate", "debug", "optimize"))

r1, r2 = events(sys.argv[1]), events(sys.argv[2])
bad = []
reuse = [e for e in r2 if e["type"] == "reuse"]
if [(e["task"], e["from_task"], e["match"], e["correct"]) for e in reuse] != [("linear", "linear", "same source", True)]:
    bad.append(f"reuse events: {reuse}")
elif reuse[0]["calls_saved"] != kernel_calls(r1, "linear") or reuse[0]["calls_saved"] < 1:
    bad.append(f"calls_saved {reuse[0]['calls_saved']}, the earlier run spent {kernel_calls(r1, 'linear')} on linear")
if kernel_calls(r2, "linear") != 0:
    bad.append(f"{kernel_calls(r2, 'linear')} kernel calls for the reused linear")
if kernel_calls(r2, "linear_relu") != 2:
    bad.append(f"{kernel_calls(r2, 'linear_relu')} kernel calls for linear_relu, wanted the budget: 2")
agents = sorted({e.get("agent") for e in r2 if e["type"] == "llm_call"})
if agents != ["decompose", "generate"]:
    bad.append(f"agents called: {agents}")
# The reused subkernel was re-verified on the variant's subproblem, with no LLM call.
ev = [e for e in r2 if e["type"] == "eval" and e.get("candidate") == "linear-reused"]
if len(ev) != 1 or ev[0].get("status") != "correct":
    bad.append(f"the reused kernel's eval events: {ev}")
fc = [e for e in r2 if e["type"] == "final_check"]
if not fc or not fc[-1].get("passed"):
    bad.append(f"final check: {fc}")
man = json.load(open(f"{sys.argv[2]}/solution/manifest.json"))
by = {s["name"]: s for s in man["subkernels"]}
if not str(by.get("linear", {}).get("reused_from")).endswith("/r1") or "reused_from" in by.get("linear_relu", {"reused_from": 1}):
    bad.append(f"manifest subkernels: {man['subkernels']}")
if man.get("method") != "adapt":
    bad.append(f"manifest method {man.get('method')}")
if open(f"{sys.argv[2]}/solution/subkernel_implementations/linear.py").read() != \
        open(f"{sys.argv[1]}/solution/subkernel_implementations/linear.py").read():
    bad.append("the reused linear subkernel is not the earlier run's file")
print("\n".join(bad) if bad else "adapted run as expected")
sys.exit(1 if bad else 0)
PY
if [[ $? -eq 0 ]]; then pass "linear reused with 0 LLM calls, only linear_relu evolved, final check passed"; else fail "adapted run"; fi
if grep -qE "linear \(reused from /.*/r1\)" r2/report.md && grep -qE "LLM calls saved: [1-9]" r2/report.md; then
  pass "report marks the reused subkernel and the calls saved"
else
  fail "report: reused subkernel or calls saved missing"; grep -n -i "reuse\|saved" r2/report.md | head
fi
# The package verifies on its own against the variant.
expect "adapted package verifies" 0 "correct" -- "$BIN" eval --problem "$S/mlp_small_relu.py" --kernel r2/solution \
  --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --timeout 120
# A finished adapt run resumes to nothing; it can be adapted again.
expect "resume of the adapted run" 0 "already finished" -- "$BIN" run --resume r2 --python "$PY" --test-cpu-unsafe
expect "adapt of an adapted run" 0 "solution: .*r3/solution" -- "$BIN" adapt r2 "$S/mlp_small_relu.py" \
  --llm "replay:$S/mlp_small_relu_adapt_cpu.jsonl" --out r3 --budget 2 --python "$PY" --test-cpu-unsafe \
  --trials 3 --timeout 100
# The evaluator's settings given to adapt replace the earlier run's; the others stay.
"$PY" - r2 r3 <<'PY'
import json, sys
ev = [json.load(open(f"{d}/config.json"))["options"]["eval"] for d in sys.argv[1:]]
got = {k: ev[1][k] for k in ("trials", "timeout_s", "perf_trials", "warmup")}
print("r3's evaluator settings:", got)
sys.exit(0 if got == {"trials": 3, "timeout_s": 100, "perf_trials": ev[0]["perf_trials"], "warmup": ev[0]["warmup"]} else 1)
PY
if [[ $? -eq 0 ]]; then pass "adapt's --trials/--timeout replace the earlier run's, the rest is kept"
else fail "adapt's evaluator flags in config.json"; fi
"$PY" - r3 <<'PY'
import json, sys
evs = [json.loads(l) for l in open(f"{sys.argv[1]}/events.jsonl")]
reuse = sorted((e["task"], e["correct"], e["calls_saved"]) for e in evs if e["type"] == "reuse")
kernel = [e for e in evs if e["type"] == "llm_call" and e.get("agent") != "decompose"]
# linear saves what r1 spent on it (r2 reused it); linear_relu what r2 spent: 2.
ok = [t for t, c, _ in reuse] == ["linear", "linear_relu"] and all(c for _, c, _ in reuse) and not kernel \
    and dict((t, n) for t, _, n in reuse)["linear_relu"] == 2
print("second adaptation:", reuse, f"{len(kernel)} kernel calls")
sys.exit(0 if ok else 1)
PY
if [[ $? -eq 0 ]]; then pass "second adaptation reuses both subkernels, no kernel call"; else fail "second adaptation"; fi

# `mkevolve swap` of a reused subkernel: the manifest entry it replaces loses
# reused_from (it is no longer the earlier run's kernel); the other keeps it,
# and the report marks only that one.
expect "swap a reused subkernel" 0 "swapped linear -> pytorch" -- "$BIN" swap r3 --subkernel linear --with pytorch \
  --python "$PY" --test-cpu-unsafe "${SMALL[@]}"
"$PY" - r3 <<'PY'
import json, sys
m = json.load(open(f"{sys.argv[1]}/solution/manifest.json"))
by = {s["name"]: s for s in m["subkernels"]}
print("reused_from after the swap:", {n: s.get("reused_from") for n, s in by.items()})
ok = "reused_from" not in by["linear"] and str(by["linear_relu"].get("reused_from")).endswith("/r2") \
    and by["linear"]["pytorch"] is True
sys.exit(0 if ok else 1)
PY
if [[ $? -eq 0 ]]; then pass "the swapped subkernel lost reused_from in the manifest, the other kept it"
else fail "manifest after swapping a reused subkernel"; fi
expect "report after the swap" 0 "" -- "$BIN" report r3 -q
if grep -qF "| linear (PyTorch) |" r3/report.md && grep -qE "\| linear_relu \(reused from /.*/r2\) \|" r3/report.md
then pass "report marks only the subkernel still reused"
else fail "report after the swap"; grep -n "reused from" r3/report.md | head; fi

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all adapt e2e checks passed"
