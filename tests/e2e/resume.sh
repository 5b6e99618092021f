#!/usr/bin/env bash
# Issue 5's resume test: `mkevolve run` (CPU test mode, the replayed fixture
# session, a small budget) is killed with SIGKILL at several random moments,
# each run is resumed to completion, and each final result must equal an
# uninterrupted run's: the solution's Python files, run_end's decisions, and
# the event stream (minus timestamps, timings and resume markers), with every
# LLM call logged exactly once.
#
# `replay:` providers bypass the response cache, so to see which requests a
# resumed run sends, the runs here use an `exec:` provider (which goes through
# the cache, like real endpoints) that answers from a recording of the fixture
# session and logs every request it receives. A resumed run must send exactly
# the requests whose replies were not in the run's cache when it was killed. The kill points come from a seeded RNG
# (MKEVOLVE_RESUME_SEED, printed) so a failure can be reproduced.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
KILLS=${MKEVOLVE_RESUME_KILLS:-5}
SEED=${MKEVOLVE_RESUME_SEED:-20261130}
need_torch

source "$REPO/tests/e2e/lib/exec_session.bash"
now_ms() { date +%s%3N; }

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

# The uninterrupted run.
t0=$(now_ms)
MK_TEST_CALL_LOG=$T/base.calls "$BIN" run "$PROBLEM" --out base "${ARGS[@]}" >base.out 2>&1
rc=$?
dur=$(( $(now_ms) - t0 ))
if [[ $rc -ne 0 ]]; then fail "uninterrupted run: exit $rc"; sed 's/^/     | /' base.out | tail -20; exit 1; fi
pass "uninterrupted run (${dur} ms)"
shape base >base.shape
base_events=$(wc -l <base/events.jsonl)
base_sent=$(sent base.calls)
[[ $base_sent -eq $(grep -c '"type":"llm_call"' base/events.jsonl) ]] && pass "exec provider got every request ($base_sent)" \
  || fail "exec provider got $base_sent requests"
[[ $(cache_entries base) -eq $base_sent ]] && pass "one cache entry per request" || fail "cache entries: $(cache_entries base)"

echo "resume.sh: seed $SEED, $KILLS kills (MKEVOLVE_RESUME_SEED=$SEED to reproduce)"
RANDOM=$SEED
for k in $(seq 1 "$KILLS"); do
  # A random point of the run: once the log holds a random number of its
  # events (0: still starting up), plus a random 0-250 ms, so kills land
  # between events, inside LLM calls and evaluations, and during start-up.
  target=$(( RANDOM % base_events ))
  extra=$(( RANDOM % 250 ))
  MK_TEST_CALL_LOG=$T/r$k.calls "$BIN" run "$PROBLEM" --out "r$k" "${ARGS[@]}" >"r$k.out" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    n=0
    [[ -f r$k/events.jsonl ]] && n=$(wc -l <"r$k/events.jsonl")
    (( n >= target )) && break
    sleep 0.02
  done
  sleep "0.$(printf '%03d' "$extra")"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  logged=0
  [[ -f r$k/events.jsonl ]] && logged=$(wc -l <"r$k/events.jsonl")
  cached=$(cache_entries "r$k")
  echo "     kill $k after event $target + ${extra} ms: $logged events logged, $(sent r$k.calls) requests sent, $cached replies cached"
  if [[ ! -f r$k/config.json ]]; then
    # Killed before the run directory existed: a fresh start is the only way on.
    rm -rf "r$k"
    cached=0
    MK_TEST_CALL_LOG=$T/r$k.resume.calls "$BIN" run "$PROBLEM" --out "r$k" "${ARGS[@]}" >"r$k.resume.out" 2>&1
  else
    MK_TEST_CALL_LOG=$T/r$k.resume.calls "$BIN" run --resume "r$k" --python "$PY" -q >"r$k.resume.out" 2>&1
  fi
  rc=$?
  if [[ $rc -ne 0 ]]; then fail "kill $k: resume exit $rc"; sed 's/^/     | /' "r$k.resume.out" | tail -15; continue; fi
  if [[ "$(py_files base)" == "$(py_files "r$k")" ]]; then pass "kill $k: same solution files"; else
    fail "kill $k: solution files differ"; diff <(py_files base) <(py_files "r$k") | head -5; fi
  if cmp -s base.shape <(shape "r$k"); then pass "kill $k: same events and decisions (run_end included)"; else
    fail "kill $k: events differ"; diff base.shape <(shape "r$k") | head -10; fi
  again=$(sent "r$k.resume.calls")
  if [[ $again -eq $((base_sent - cached)) ]]; then
    pass "kill $k: the resume sent only the $again requests without a cached reply"
  else
    fail "kill $k: the resume sent $again requests; $base_sent - $cached cached = $((base_sent - cached)) expected"
    [[ -f r$k.calls && -f r$k.resume.calls ]] && comm -12 <(sort "r$k.calls") <(sort "r$k.resume.calls") | head -5
  fi
  d=$(dup_calls "r$k")
  [[ $d -eq 0 ]] && pass "kill $k: every LLM call logged once" || fail "kill $k: $d LLM calls logged twice"
  last=$(tail -1 "r$k/events.jsonl")
  [[ $last == *'"type":"run_end"'* ]] && pass "kill $k: the log ends with run_end" || fail "kill $k: log end: $last"
done

if [[ $fails -ne 0 ]]; then echo "$fails resume check(s) failed (seed $SEED)"; exit 1; fi
echo "all resume checks passed (seed $SEED)"
