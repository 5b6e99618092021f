#!/usr/bin/env bash
# Issue 5's resume test: `mkevolve run` (CPU test mode, the replayed fixture
# session, a small budget) is killed with SIGKILL at several random moments,
# each run is resumed to completion, and each final result must equal an
# uninterrupted run's: the solution's Python files, run_end's decisions, and
# the event stream (minus timestamps, timings and resume markers), with every
# LLM call logged exactly once.
#
# Not checked here: that no completed LLM request is sent again. `replay:`
# providers bypass the response cache (docs/LLM.md), so a resumed replayed run
# asks the replay provider again for free and nothing counts those requests. The kill delays come from a seeded RNG
# (MKEVOLVE_RESUME_SEED, printed) so a failure can be reproduced.
set -uo pipefail
BIN=${1:?usage: resume.sh path/to/mkevolve}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
PY=${MKEVOLVE_TEST_PYTHON:-/usr/bin/python3}
REPO=$(pwd)
KILLS=${MKEVOLVE_RESUME_KILLS:-5}
SEED=${MKEVOLVE_RESUME_SEED:-20261130}
if ! "$PY" -c 'import torch' 2>/dev/null; then echo "skip: $PY has no torch"; exit 0; fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export HOME=$T/home XDG_CACHE_HOME=$T/cache
mkdir -p "$HOME"
cd "$T"
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

PROBLEM=$REPO/examples/sessions/mlp_small.py
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl
ARGS=(--llm "replay:$SESSION" --python "$PY" --test-cpu-unsafe -q --iterations 2 --calls-per-iter 4
      --refine-every 3 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120)

now_ms() { date +%s%3N; }

# What must not change: event types and decisions in order (no times, no seq/ts).
shape() {
  "$PY" - "$1" <<'PY'
import json, sys
keys = ("type", "agent", "task", "candidate", "iteration", "sample", "status", "kind", "reason", "change",
        "from", "into", "t", "name", "to", "ok", "correct", "result", "best_speedup_compile")
events = [json.loads(line) for line in open(sys.argv[1] + "/events.jsonl")]
# A run killed after its run_end (while writing the report) logs another one
# when resumed: only the last run_end is the result.
last_end = max((i for i, e in enumerate(events) if e["type"] == "run_end"), default=-1)
for i, e in enumerate(events):
    if e["type"] == "resume" or (e["type"] == "run_end" and i != last_end):
        continue
    print(json.dumps({k: e[k] for k in keys if k in e}, sort_keys=True))
PY
}
# Every LLM call appears once: (agent, task, iteration, sample) is unique.
dup_calls() {
  "$PY" - "$1" <<'PY'
import json, sys, collections
c = collections.Counter()
for line in open(sys.argv[1] + "/events.jsonl"):
    e = json.loads(line)
    if e["type"] == "llm_call":
        c[(e.get("agent"), e.get("task"), e.get("iteration"), e.get("sample"))] += 1
print(sum(n - 1 for n in c.values()))
PY
}
py_files() { (cd "$1/solution" && find . -name '*.py' -print0 | sort -z | xargs -0 sha256sum); }

# The uninterrupted run.
t0=$(now_ms)
"$BIN" run "$PROBLEM" --out base "${ARGS[@]}" >base.out 2>&1
rc=$?
dur=$(( $(now_ms) - t0 ))
if [[ $rc -ne 0 ]]; then fail "uninterrupted run: exit $rc"; sed 's/^/     | /' base.out | tail -20; exit 1; fi
pass "uninterrupted run (${dur} ms)"
shape base >base.shape

echo "resume.sh: seed $SEED, $KILLS kills (MKEVOLVE_RESUME_SEED=$SEED to reproduce)"
RANDOM=$SEED
for k in $(seq 1 "$KILLS"); do
  # A delay anywhere in the run's span (the first ~300 ms only start the process).
  delay=$(( 200 + (RANDOM * 32768 + RANDOM) % (dur > 400 ? dur - 200 : 200) ))
  "$BIN" run "$PROBLEM" --out "r$k" "${ARGS[@]}" >"r$k.out" 2>&1 &
  pid=$!
  sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  logged=0
  [[ -f r$k/events.jsonl ]] && logged=$(wc -l <"r$k/events.jsonl")
  echo "     kill $k after ${delay} ms: $logged events logged"
  if [[ ! -f r$k/config.json ]]; then
    # Killed before the run directory existed: a fresh start is the only way on.
    rm -rf "r$k"
    "$BIN" run "$PROBLEM" --out "r$k" "${ARGS[@]}" >"r$k.resume.out" 2>&1
  else
    "$BIN" run --resume "r$k" --python "$PY" -q >"r$k.resume.out" 2>&1
  fi
  rc=$?
  if [[ $rc -ne 0 ]]; then fail "kill $k: resume exit $rc"; sed 's/^/     | /' "r$k.resume.out" | tail -15; continue; fi
  if [[ "$(py_files base)" == "$(py_files "r$k")" ]]; then pass "kill $k: same solution files"; else
    fail "kill $k: solution files differ"; diff <(py_files base) <(py_files "r$k") | head -5; fi
  if cmp -s base.shape <(shape "r$k"); then pass "kill $k: same events and decisions (run_end included)"; else
    fail "kill $k: events differ"; diff base.shape <(shape "r$k") | head -10; fi
  d=$(dup_calls "r$k")
  [[ $d -eq 0 ]] && pass "kill $k: every LLM call logged once" || fail "kill $k: $d LLM calls logged twice"
  last=$(tail -1 "r$k/events.jsonl")
  [[ $last == *'"type":"run_end"'* ]] && pass "kill $k: the log ends with run_end" || fail "kill $k: log end: $last"
done

if [[ $fails -ne 0 ]]; then echo "$fails resume check(s) failed (seed $SEED)"; exit 1; fi
echo "all resume checks passed (seed $SEED)"
