#!/usr/bin/env bash
# End-to-end tests of `mkevolve bench` and `bench-report` (ctest passes the binary
# as $1). CPU only, with the real worker in its CPU test mode (Debian's torch at
# /usr/bin/python3) and a HAND-WRITTEN exec: LLM (a shell script printing a
# torch-only ModelNew per problem, and counting its calls): a 2-problem suite run
# twice (the second run skips both and calls no LLM), as two shards into one
# directory, then bench-report over the merged directory.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"

# The tiny suite (hand-written fixtures).
source "$REPO/tests/e2e/lib/scale_suite.bash"
write_scale_suite suite
# The LLM: a correct torch-only ModelNew for the problem named in MKEVOLVE_TASK.
cat >llm.sh <<'SH'
#!/bin/sh
echo "$MKEVOLVE_AGENT $MKEVOLVE_TASK" >>"$CALLS"
n=${MKEVOLVE_TASK%%_*}
cat <<REPLY
\`\`\`python file=kernel.py
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, min=0) * $n
\`\`\`
REPLY
SH
chmod +x llm.sh
export CALLS=$T/calls
LLM="exec:$T/llm.sh"
COMMON=(--method parallel --iterations 1 --calls-per-iter 2 --trials 1 --perf-trials 2 --warmup 1 --timeout 120
        --python "$PY" --test-cpu-unsafe --llm "$LLM")

expect "bench without problems" 2 "" -- "$BIN" bench --out b0 "${COMMON[@]}"
expect "bench with a bad shard" 2 "I/N|shard" -- "$BIN" bench suite --out b0 --shard 2/2 "${COMMON[@]}"
expect "bench with nothing to run" 2 "no problem" -- "$BIN" bench "$T/home" --out b0 "${COMMON[@]}"
expect "bench-report of nothing" 2 "summary.json" -- "$BIN" bench-report "$T/home"
# A folder with one problem and two files that are not: each is named and
# left out; and when nothing can start (no LLM), no output folder is left.
mkdir -p mixed
cp suite/level1/1_Scale.py mixed/
printf 'import torch\nclass Model(torch.nn.Module):\n    pass\n' >mixed/no_inputs.py
printf 'X = 1\n' >mixed/helper.py
expect "files that are not problems are named" 3 "skipped .*mixed/no_inputs.py: .*get_inputs" -- \
  env -u MKEVOLVE_LLM -u ANTHROPIC_API_KEY -u OPENAI_API_KEY "$BIN" bench mixed --out b_none --method parallel --python "$PY" --test-cpu-unsafe
grep -q "skipped .*mixed/helper.py: .*class Model" "$T/err" && pass "a helper module is named as skipped" ||
  fail "helper.py not named: $(cat "$T/err")"
[[ ! -e b_none ]] && pass "no output folder when nothing started" || fail "b_none was created"

if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip the suite runs: $PY has no torch"
  [[ $fails -eq 0 ]] || { echo "$fails bench e2e check(s) failed"; exit 1; }
  exit 0
fi

expect "bench, 2 problems at once" 0 "2 of 2 correct" -- "$BIN" bench suite --out b1 --jobs 2 "${COMMON[@]}"
grep -qE '^\[start\] level1-1_Scale' "$T/out" && grep -qE '^\[[12]/2\] level1-2_Scale' "$T/out" &&
  pass "progress lines per problem with a counter" || { fail "progress lines"; cat "$T/out"; }
for n in 1 2; do
  d=$(ls -d b1/parallel/level1-${n}_Scale-*)
  for f in summary.json config.json events.jsonl report.md solution/decomposed_solution.py; do
    [[ -f $d/$f ]] && pass "wrote $d/$f" || fail "missing $d/$f"
  done
  "$PY" - "$d/summary.json" <<'PY' && pass "$d/summary.json is finished and correct" || fail "$d/summary.json"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["status"] == "finished" and s["correct"] is True, s
assert s["method"] == "parallel" and s["calls"] == 2 and s["timeline"], s
PY
done
[[ -d b1/cache/llm && -d b1/cache/eval ]] && pass "one LLM and one eval cache for the suite" || fail "shared caches"
[[ -d b1/eval ]] && pass "worker logs kept under b1/eval" || fail "no b1/eval"
before=$(wc -l <"$CALLS")
[[ $before -eq 4 ]] && pass "4 LLM calls for 2 problems x 2" || fail "LLM calls: $before"

expect "bench again skips finished problems" 0 "2 skipped" -- "$BIN" bench suite --out b1 --jobs 2 "${COMMON[@]}"
after=$(wc -l <"$CALLS")
[[ $after -eq $before ]] && pass "the re-run called no LLM" || fail "the re-run made $((after - before)) LLM calls"

# Ctrl-C mid-suite: exit 130, the runs in flight say "interrupted", and the same
# command resumes them to the end.
cat >slow.sh <<'SH'
#!/bin/sh
sleep 3
exec "$(dirname "$0")/llm.sh"
SH
chmod +x slow.sh
SLOW=("${COMMON[@]}")
SLOW[${#SLOW[@]}-1]="exec:$T/slow.sh"
"$BIN" bench suite --out b3 --jobs 2 "${SLOW[@]}" >"$T/int.out" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ $(grep -c '^\[start\]' "$T/int.out") -ge 2 ]] && break; sleep 0.1; done
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
[[ $rc -eq 130 ]] && pass "Ctrl-C stops the suite with 130" || { fail "Ctrl-C: exit $rc"; cat "$T/int.out"; }
n=$(grep -l '"status": "interrupted"' b3/parallel/*/summary.json 2>/dev/null | wc -l)
[[ $n -eq 2 ]] && pass "both runs in flight recorded as interrupted" || fail "interrupted summaries: $n"
expect "the same command resumes them" 0 "2 of 2 correct; 0 skipped .*, 2 resumed" -- "$BIN" bench suite --out b3 --jobs 2 "${COMMON[@]}"

# Two shards into one directory (as two machines would), then the merged report.
expect "shard 0/2" 0 "1 of 2 problems" -- "$BIN" bench suite --out b2 --shard 0/2 "${COMMON[@]}"
expect "shard 1/2" 0 "1 of 2 problems" -- "$BIN" bench suite --out b2 --shard 1/2 "${COMMON[@]}"
n=$(find b2 -name summary.json | wc -l)
[[ $n -eq 2 ]] && pass "the shards wrote one summary per problem" || fail "summaries: $n"
expect "bench-report merges the shards" 0 "parallel" -- "$BIN" bench-report b2
for f in report.md report.html report.json report.csv; do
  [[ -s b2/$f ]] && pass "wrote b2/$f" || fail "missing b2/$f"
done
"$PY" - b2/report.json <<'PY' && pass "report.json: 2 problems, Correct 1, fast_0.5 1" || fail "report.json metrics"
import json, sys
r = json.load(open(sys.argv[1]))
text = json.dumps(r)
assert "level1-1_Scale" in text and "level1-2_Scale" in text, text[:500]
m = r["methods"]["parallel"]
assert m["problems"] == 2 and m["correct"] == 1.0, m
PY
rows=$(grep -c '^parallel,' b2/report.csv)
[[ $rows -eq 2 ]] && pass "report.csv has one row per problem" || { fail "report.csv rows: $rows"; cat b2/report.csv; }
expect "bench-report --out FILE" 0 "wrote .*merged/all.html" -- "$BIN" bench-report b1 b2 --out merged/all.md
# -q means what it means for `report`: nothing on stdout on success.
expect "bench-report -q" 0 "" -- "$BIN" bench-report b1 b2 --out merged/all.md -q
[[ ! -s $T/out ]] && pass "bench-report -q prints nothing, as report -q" || { fail "bench-report -q printed"; head -3 "$T/out"; }

[[ $fails -eq 0 ]] || { echo "$fails bench e2e check(s) failed"; exit 1; }
echo "all bench e2e checks passed"
