#!/usr/bin/env bash
# Issue 37: a credential inside a flag never reaches a run directory. A whole
# CPU run whose --llm is an exec: command carrying an API key on its command
# line (the exec fixture tests/e2e/lib/exec_replay.py answers from the
# HAND-WRITTEN FIXTURE session examples/sessions/messy_cpu.jsonl and ignores
# the key): the key is in no file of the run (config.json, events, reports,
# caches, candidates, solution); config.json records which credential it was
# by fingerprint; a resume without the flag stops before any call, naming what
# to give, and one with the same flag goes on.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"

need_torch
S=$REPO/examples/sessions
KEY=sk-test-Zq8d7f6g5h4j3k2l1m0n
LLM="exec:$PY $REPO/tests/e2e/lib/exec_replay.py $S/messy_cpu.jsonl --api-key $KEY"
SMALL=(--iterations 3 --calls-per-iter 4 --refine-every 4 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120)
expect "a run with a key on its exec: command line" 0 "" -- "$BIN" run "$S/messy.py" --llm "$LLM" --out c1 \
  --python "$PY" --test-cpu-unsafe "${SMALL[@]}"
if grep -rl -- "$KEY" c1 >"$T/hits" 2>/dev/null; then
  fail "the key reached the run directory:"; sed 's/^/     | /' "$T/hits"
else pass "the key is in no file of the run directory"; fi
if grep -q -- "$KEY" "$T/out" "$T/err"; then fail "the key was printed"; else pass "the key was not printed"; fi
fp=$("$PY" -c 'import hashlib,sys; print(hashlib.sha256(sys.argv[1].encode()).hexdigest()[:8])' "$KEY")
if grep -q "\[REDACTED sha256:$fp\]" c1/config.json; then pass "config.json records the credential by fingerprint"
else fail "config.json: no fingerprint"; sed 's/^/     | /' c1/config.json | head -20; fi
expect "a resume without the flag names what to give" 2 "pass --llm again" -- "$BIN" run --resume c1 \
  --python "$PY" --test-cpu-unsafe
expect "a resume with another key is a change" 2 "allow-llm-change" -- "$BIN" run --resume c1 \
  --llm "exec:$PY $REPO/tests/e2e/lib/exec_replay.py $S/messy_cpu.jsonl --api-key sk-test-Other0000000000000000" \
  --python "$PY" --test-cpu-unsafe
expect "a resume with the same flag goes on" 0 "" -- "$BIN" run --resume c1 --llm "$LLM" --python "$PY" --test-cpu-unsafe
if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all credential e2e checks passed"
