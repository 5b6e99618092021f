#!/usr/bin/env bash
# End-to-end tests of `mkevolve run`, `evolve` and `decompose` (ctest passes the
# binary as $1). CPU only: bad usage, "no GPU / no LLM" (exit 3), and, with
# Debian's torch, a whole MKEvolve run driven by a HAND-WRITTEN FIXTURE session
# (examples/sessions/mlp_small_cpu.jsonl, replayed through the real `replay:`
# provider) with the real worker in its CPU test mode: decomposition verified
# for real, beam search, composition into solution/, the end-to-end check, the
# report, and a resume that pays for nothing again.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"

PROBLEM=$REPO/examples/sessions/mlp_small.py       # hand-written fixture problem
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl # hand-written fixture session
SMALL=(--iterations 2 --calls-per-iter 4 --refine-every 3 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120)

# Bad usage: exit 2, before anything starts.
expect "run without --out" 2 "--out DIR" -- "$BIN" run "$PROBLEM" --llm "replay:$SESSION"
expect "run without a problem" 2 "problem file" -- "$BIN" run --llm "replay:$SESSION" --out r0
expect "run with a missing problem" 2 "nope.py" -- "$BIN" run nope.py --llm "replay:$SESSION" --out r0
expect "run with an unknown method" 2 "method" -- "$BIN" run "$PROBLEM" --out r0 --method nonsense
expect "run with a zero budget" 2 "positive" -- "$BIN" run "$PROBLEM" --out r0 --calls-per-iter 0
expect "evolve without a problem" 2 "" -- "$BIN" evolve --budget 3
expect "decompose without --out" 2 "" -- "$BIN" decompose "$PROBLEM"
if [[ -e r0 ]]; then fail "bad usage left a run directory"; else pass "bad usage leaves nothing behind"; fi

# Missing things on this machine: exit 3 naming each.
expect "run without an LLM" 3 "no LLM: pass --llm" -- env -u MKEVOLVE_LLM -u ANTHROPIC_API_KEY -u OPENAI_API_KEY "$BIN" run "$PROBLEM" --out r0 --python "$PY" --test-cpu-unsafe
# A replay file that is not there is the user's input, named: exit 2.
expect "run with a missing replay file" 2 "missing.jsonl: no such file" -- "$BIN" run "$PROBLEM" --out r0 \
  --llm replay:missing.jsonl --python "$PY" --test-cpu-unsafe
if ! command -v nvidia-smi >/dev/null 2>&1; then
  expect "run without a GPU" 3 "no CUDA GPU is visible" -- "$BIN" run "$PROBLEM" --out r0 --llm "replay:$SESSION"
  expect "evolve without a GPU" 3 "no CUDA GPU is visible" -- "$BIN" evolve "$PROBLEM" --budget 2 --out r0 \
    --llm "replay:$SESSION"
fi
if "$BIN" run --help | grep -q test-cpu; then fail "--test-cpu-unsafe is hidden from --help"; else pass "test-only flag hidden"; fi

if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip the fixture runs: $PY has no torch"
  if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
  exit 0
fi

# A whole run on the CPU from the fixture session.
expect "fixture run" 0 "solution: .*r1/solution" -- "$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out r1 \
  --python "$PY" --test-cpu-unsafe "${SMALL[@]}"
cp "$T/out" "$T/run1.out"
for f in r1/solution/decomposed_solution.py r1/solution/subkernel_implementations/linear_gelu.py \
         r1/solution/subkernel_problems/linear.py r1/solution/manifest.json r1/topology/iteration-0.json \
         r1/topology/iteration-2.json r1/report.md r1/report.html r1/problem.py; do
  if [[ -f $f ]]; then pass "wrote $f"; else fail "missing $f"; fi
done
if grep -q 'sys.path' r1/solution/decomposed_solution.py; then fail "solution edits sys.path"; else pass "no sys.path edits"; fi
if solution_matches r1; then pass "solution package imports and matches the original"; else fail "solution package"; fi
# Appendix H: an importable package, relative imports, no sys.path edits anywhere.
if grep -rq 'sys\.path' r1/solution --include='*.py'; then fail "a solution file edits sys.path"; else pass "no sys.path edits in the package"; fi
if grep -qE '^from \.subkernel_implementations\.' r1/solution/decomposed_solution.py &&
   ! grep -qE '^(from|import) subkernel_' r1/solution/decomposed_solution.py; then
  pass "decomposed_solution imports its subkernels relatively"
else fail "decomposed_solution imports"; fi
for d in r1/solution r1/solution/subkernel_implementations r1/solution/subkernel_problems; do
  [[ -f $d/__init__.py ]] && pass "$d is a package" || fail "$d has no __init__.py"
done
if (cd r1 && "$PY" -c "from solution.decomposed_solution import ModelNew; print(ModelNew.__name__)") >"$T/imp" 2>&1; then
  pass "cd DIR && python -c 'from solution.decomposed_solution import ModelNew'"
else fail "import from DIR"; sed 's/^/     | /' "$T/imp"; fi
expect "mkevolve eval accepts the solution package" 0 "decomposed_solution.py +correct" -- "$BIN" eval \
  --problem r1/problem.py --kernel r1/solution --test-cpu-unsafe --python "$PY" --perf-trials 2 --warmup 1
# Issue 12: the composed package reports each subkernel's time in its forward
# (CPU test mode: the wall time of each subkernel module's calls), one positive entry each.
"$BIN" eval --problem r1/problem.py --kernel r1/solution/decomposed_solution.py --test-cpu-unsafe --python "$PY" \
  --perf-trials 2 --warmup 1 --json >"$T/sub.json" 2>"$T/sub.err"
if "$PY" - "$T/sub.json" r1/solution/subkernel_implementations <<'PY'
import json, os, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
subs = sorted(f[:-3] for f in os.listdir(sys.argv[2]) if f.endswith(".py") and f != "__init__.py")
per = r.get("subkernel_runtime_ms") or {}
assert r["status"] == "correct", r["status"]
assert sorted(per) == subs and all(isinstance(v, float) and v > 0 for v in per.values()), (per, subs)
assert r["checks"]["subkernel_runtime"]["source"].startswith("module calls"), r["checks"]["subkernel_runtime"]
PY
then pass "eval of the package reports subkernel_runtime_ms, one positive entry per subkernel"
else fail "subkernel_runtime_ms of the package"; tail -5 "$T/sub.json" "$T/sub.err" | sed 's/^/     | /'; fi
# Trained weights: change the original's weights after construction, build ModelNew from it, compare.
if (cd r1 && "$PY" - <<'PY'
import importlib.util, torch
from solution.load_trained import from_trained, TrainedWeightsError
spec = importlib.util.spec_from_file_location("p", "problem.py")
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
torch.manual_seed(123)
m = p.Model(*p.get_init_inputs())
x = p.get_inputs()
fresh = m(*x).detach().clone()
with torch.no_grad():
    for t in m.parameters():
        t.add_(0.1 * torch.randn_like(t))   # "training"
m.eval()
n = from_trained(m, *p.get_init_inputs())
assert not n.training, "eval mode is kept"
with torch.no_grad():
    want, got = m(*x), n(*x)
assert not torch.allclose(want, fresh, atol=1e-3), "the weights did change"
assert torch.allclose(want, got, atol=1e-5, rtol=1e-5), (want - got).abs().max()
m.train()
assert from_trained(m, *p.get_init_inputs()).training, "train mode is kept"
# A model with a tensor ModelNew lacks: a clear error naming it.
class Extra(p.Model):
    def __init__(self, *a):
        super().__init__(*a)
        self.scale = torch.nn.Parameter(torch.full((3,), 2.0))
try:
    from_trained(Extra(*p.get_init_inputs()), *p.get_init_inputs())
    raise SystemExit("no error for an unmappable model")
except TrainedWeightsError as e:
    assert "7 parameters" in str(e) and "scale" in str(e), e
PY
) >"$T/tw" 2>&1; then pass "from_trained copies a trained model's weights (outputs match, mode kept, mismatch named)"
else fail "from_trained"; sed 's/^/     | /' "$T/tw" | tail -15; fi
first=$(head -1 r1/events.jsonl); second=$(sed -n 2p r1/events.jsonl); last=$(tail -1 r1/events.jsonl)
[[ $first == *'"type":"preflight"'* && $first == *'"ok":true'* && $second == *'"type":"run_start"'* ]] &&
  pass "log starts with a passed preflight record, then run_start" || fail "log starts with preflight, run_start"
if "$PY" -c '
import json, sys
ev = [json.loads(l) for l in open("r1/events.jsonl")]
types = [e["type"] for e in ev]
fc = [e for e in ev if e["type"] == "final_check"]
sys.exit(0 if len(fc) == 1 and fc[0]["passed"] and types[-2] == "final_check" and types[-1] == "run_end" else 1)'
then pass "a passed final_check (fresh seed) comes just before run_end"; else fail "no final_check before run_end"; fi
# Its outcome, stated where people look: the run's output, summary.json, report.md.
if grep -qE '^final check: passed \(fresh seed 43, every check on\): [0-9.]+x vs (torch.compile|eager)' "$T/run1.out" &&
   "$PY" -c 'import json, sys; s = json.load(open("r1/summary.json")); sys.exit(0 if s["final_check"]["result"] == "passed" and s["speedup"]["measured_by"] == "final_check" else 1)' &&
   grep -q '^- Final check: passed' r1/report.md
then pass "the final check's outcome is printed, in summary.json and in report.md"
else fail "the final check's outcome is not stated"; grep -i 'final check' "$T/run1.out" r1/report.md | head -5; fi
# Each iteration's end-to-end verdict with its timings, for diagnosis (never in
# the events): e2e/t<N>.json, one per logged end-to-end evaluation of an iteration.
if "$PY" -c '
import json, sys
ev = [json.loads(l) for l in open("r1/events.jsonl")]
its = [e["candidate"] for e in ev if e["type"] == "eval" and e.get("scope") == "e2e" and e["candidate"].startswith("t")]
ok = bool(its)
for t in its:
    r = json.load(open(f"r1/e2e/{t}.json"))
    ok = ok and r["status"] == [e for e in ev if e.get("candidate") == t][-1]["status"] and r["eval_s"] > 0 \
        and any(p[0] == "exited" for p in r["phases_s"])
sys.exit(0 if ok else 1)'
then pass "e2e/t<N>.json keeps each iteration's end-to-end verdict with eval_s and phases_s"; else fail "e2e/t<N>.json"; fi
[[ $last == *'"type":"run_end"'* && $last == *'"status":"finished"'* && $last == *'"result":"ok"'* ]] && pass "log ends with run_end finished (ok)" || fail "log end: $last"
# Issue 12: the wall time against the LLM critical path, in summary.json, report.md and the last line.
# The fixture's chain: 1 decomposition round; t=1 one beam round (2 calls per
# subproblem); t=2 the failing linear_gelu's 4 calls in 2 rounds of 2 (its beam holds 2).
if "$PY" - r1 <<'PY'
import json, sys
t = json.load(open(sys.argv[1] + "/summary.json"))["time"]
cp = t["critical_path"]
assert cp["rounds"] == 4, cp
assert isinstance(cp["llm_s"], float) and cp["llm_s"] >= 0, cp
assert isinstance(t["wall_s"], float) and t["wall_s"] > 0, t
assert [p["label"] for p in t["phases"]] == ["decomposition", "iteration 1", "iteration 2", "after the search"], t
assert [p["rounds"] for p in t["phases"]] == [1, 1, 2, 0], t["phases"]
for k in ("llm_s", "eval_s", "queued_s", "baseline_s", "e2e_s", "verify_s", "other_s"):
    assert isinstance(t["path"][k], float), (k, t["path"])
ev = [json.loads(l) for l in open(sys.argv[1] + "/events.jsonl")]
assert all("round" in e and "latency_ms" in e for e in ev if e["type"] == "llm_call")
assert any(e.get("eval_s") for e in ev if e["type"] == "eval"), "no eval event carries its time"
PY
then pass "summary.json states the critical path (4 rounds), the wall time and where it went"
else fail "summary.json time"; fi
grep -q '^## Time' r1/report.md && pass "report.md has a Time section" || fail "report.md: no Time section"
grep -q '<section><h2>Time</h2>' r1/report.html && pass "report.html has a Time section" || fail "report.html: no Time section"
last_line=$(grep -v '^$' "$T/run1.out" | tail -1)
[[ $last_line == "time: wall "*"; LLM critical path 4 rounds, "*"; wall / critical path "* ]] &&
  pass "run's last line states the wall time and the critical path" || fail "run's last line: $last_line"
calls=$(grep -c '"type":"llm_call"' r1/events.jsonl)
kernel_calls=$(grep '"type":"llm_call"' r1/events.jsonl | grep -cE '"agent":"(generate|debug|optimize)"')
[[ $kernel_calls -eq 8 ]] && pass "spent exactly 2 x 4 kernel calls" || fail "kernel calls: $kernel_calls"
ncand=$(find r1/candidates -name result.json | wc -l)
[[ $ncand -eq 8 ]] && pass "stored every candidate" || fail "candidates stored: $ncand"

# Resume a finished run: nothing to do, nothing paid, nothing logged or
# rewritten (the replay from caches is covered by the kill -9 case below).
before=$(wc -l <r1/events.jsonl)
expect "resume a finished run" 0 "already finished \(result: ok\).*nothing to resume" -- \
  "$BIN" run --resume r1 --python "$PY"
grep -q "^solution: r1/solution" "$T/out" && pass "it names the solution" || fail "finished resume: no solution line"
after=$(wc -l <r1/events.jsonl)
[[ $after -eq $before ]] && pass "resume of a finished run logs nothing" || fail "resume added $((after - before)) events"
# Under --events-json its stdout is events only: the recorded run_end.
"$BIN" run --resume r1 --python "$PY" --events-json >"$T/ej.out" 2>"$T/ej.err"
if "$PY" -c 'import json,sys; ls=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; assert ls and all(e.get("type") == "run_end" for e in ls), ls' "$T/ej.out" \
   && grep -q "already finished" "$T/ej.err"; then
  pass "a finished resume under --events-json prints only events on stdout"
else
  fail "finished resume under --events-json: $(head -c 300 "$T/ej.out")"
fi
expect "resume of a directory that is not a run" 2 "" -- "$BIN" run --resume nowhere --python "$PY"
expect "run into a used directory offers --resume" 2 "r1 holds a run: continue it with .mkevolve run --resume r1." -- "$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out r1 \
  --python "$PY" --test-cpu-unsafe

# Kill -9 in the middle, then resume: the log continues as one stream and
# ends with the same sequence of decisions as the uninterrupted run r1.
"$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out r5 --python "$PY" --test-cpu-unsafe -q "${SMALL[@]}" \
  >/dev/null 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  [[ -f r5/events.jsonl ]] && (( $(wc -l <r5/events.jsonl) >= 12 )) && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
expect "resume after kill -9" 0 "solution:" -- "$BIN" run --resume r5 --python "$PY"
shape() {
  "$PY" - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1] + "/events.jsonl"):
    e = json.loads(line)
    if e["type"] in ("resume", "run_end", "preflight"):
        continue
    print(e["type"], e.get("agent"), e.get("task"), e.get("candidate"), e.get("iteration"), e.get("status"))
PY
}
if [[ "$(shape r1)" == "$(shape r5)" ]]; then pass "killed and resumed run makes the same decisions"; else
  fail "killed and resumed run differs"; diff <(shape r1) <(shape r5) | head -10; fi

# The baselines use the same prompts and budget.
expect "beam baseline" 0 "solution:" -- "$BIN" run "$PROBLEM" --method beam --llm "replay:$SESSION" --out r2 \
  --python "$PY" --test-cpu-unsafe "${SMALL[@]}"
expect "evolve" 0 "solution:" -- "$BIN" evolve "$PROBLEM" --budget 3 --llm "replay:$SESSION" --out r3 \
  --python "$PY" --test-cpu-unsafe --trials 2 --perf-trials 2 --warmup 1
n=$(grep '"type":"llm_call"' r3/events.jsonl | grep -c '"agent":"generate"')
[[ $n -eq 3 ]] && pass "evolve spent its budget" || fail "evolve generate calls: $n"

# The decomposition alone, verified by the worker on the CPU.
expect "decompose" 0 "2 subproblems" -- "$BIN" decompose "$PROBLEM" --llm "replay:$SESSION" --out d1 --workers 1 \
  --python "$PY" --test-cpu-unsafe
[[ -f d1/decomposed_problem.py && -f d1/subkernel_problems/linear_gelu.py ]] && pass "decompose wrote the files" \
  || fail "decompose files"

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all run/evolve/decompose e2e checks passed"
