#!/usr/bin/env bash
# What a new user meets on a clean machine without a GPU (the newcomer
# findings): a run in the worker's CPU test mode says so wherever its results
# are (last lines, summary.json, manifest.json, bench-report's text, CSV and
# HTML); an unknown speedup (Debian's torch has no torch.compile, so there is no
# baseline) is null in data and "n/a" in text, never 0; a --out that cannot
# hold a run gets advice that fits the cause and exit 2; `eval P.py K.py` takes
# positionals like the other commands; and without --python the worker's
# interpreter is the first python3 with torch, as scripts/demo.sh picks it.
# Driven by the hand-written fixture session (replay:).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary
need_torch

PROBLEM=$REPO/examples/sessions/mlp_small.py
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl
SMALL=(--python "$PY" --test-cpu-unsafe --iterations 2 --calls-per-iter 4 --refine-every 3 --decompose-workers 1
       --trials 2 --perf-trials 2 --warmup 1 --timeout 120)
"$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out r "${SMALL[@]}" >run.out 2>&1
code=$?
[[ $code -eq 0 ]] && pass "fixture run (exit 0)" || { fail "fixture run: exit $code"; tail -20 run.out; exit 1; }

# Test mode, said where the results are.
tail -6 run.out | grep -q "^TEST MODE (--test-cpu-unsafe): the kernels may be PyTorch stand-ins run on the CPU" &&
  pass "the run's last lines say TEST MODE" || { fail "no TEST MODE in the last lines"; tail -6 run.out; }
expect "a finished test-mode run, resumed, says TEST MODE too" 0 "^TEST MODE \(--test-cpu-unsafe\)" -- \
  "$BIN" run --resume r --python "$PY"
if "$PY" - r <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
assert s["test_mode"] is True and "TEST MODE" in s["test_mode_note"], s
assert s["uses_pytorch"] is None, s  # test mode lets stand-ins pass: not known, not false
m = json.load(open(f"{d}/solution/manifest.json"))
assert m["test_mode"] is True and m.get("uses_pytorch", None) is None, m
assert m["contains_pytorch_subkernels"] is None, m
assert all(k["pytorch"] is None for k in m["subkernels"]), m["subkernels"]
PY
then pass "summary.json and manifest.json say test_mode and claim nothing about PyTorch"
else fail "summary.json or manifest.json"; fi

# No torch.compile baseline on this machine: unknown, never 0.
if grep -q "torch.compile" run.out && ! grep -qE "0\.0+x vs torch.compile" run.out &&
   grep -q "n/a vs torch.compile (no torch.compile baseline on this machine)" run.out; then
  pass "the last lines say n/a vs torch.compile, and why"
elif grep -qE "[1-9][0-9.]*x vs torch.compile" run.out; then
  pass "this torch measured a torch.compile baseline (nothing unknown to show)"
else fail "the last lines: $(grep -i 'best' run.out)"; fi
if "$PY" - r <<'PY'
import json, sys
s = json.load(open(f"{sys.argv[1]}/summary.json"))
c = s["speedup"]["compile"]
assert c is None or c > 0, s["speedup"]
for p in s["timeline"]:
    assert p["speedup_compile"] is None or p["speedup_compile"] > 0, p
PY
then pass "summary.json: an unknown speedup is null"; else fail "summary.json holds 0 for unknown"; fi
compile_known=$("$PY" -c 'import json,sys; print(int(json.load(open("r/summary.json"))["speedup"]["compile"] is not None))')

expect "bench-report on the run" 0 "" -- "$BIN" bench-report r --out rep -q
grep -q '^\*\*TEST MODE\*\*: 1 of the 1 runs ran in the worker.s CPU TEST MODE' rep/report.md &&
  pass "bench-report's text says TEST MODE" || { fail "report.md lacks TEST MODE"; head -5 rep/report.md; }
grep -q "same GPU" rep/report.md rep/report.html && fail "bench-report says 'on the same GPU' of CPU stand-ins" ||
  pass "bench-report does not say 'on the same GPU'"
grep -q "<b>TEST MODE</b>" rep/report.html && pass "bench-report's HTML says TEST MODE" || fail "report.html lacks TEST MODE"
head -1 rep/report.csv | grep -q ",test_mode," && sed -n 2p rep/report.csv | grep -qE ",1,[^,]*$" &&
  pass "bench-report's CSV has test_mode 1" || { fail "report.csv"; cat rep/report.csv; }
if [[ $compile_known == 0 ]]; then
  grep -qE '\| (0\.00|0) \|' <(grep '^| mkevolve |' rep/report.md | head -1 | cut -d'|' -f8) &&
    fail "the geomean of unknowns is 0.00" || pass "the geomean of unknowns is not 0.00"
  grep '^| mkevolve |' rep/report.md | head -1 | grep -q '| n/a |' && pass "geomean vs torch.compile: n/a" ||
    { fail "no n/a geomean"; grep '^| mkevolve' rep/report.md; }
  grep -q "no torch.compile baseline on the machine" rep/report.md && pass "the report says why" ||
    fail "the report does not say why the speedup is unknown"
  sed -n 2p rep/report.csv | cut -d, -f6 | grep -qx '' && pass "CSV: unknown is an empty field" ||
    { fail "CSV speedup_compile is not empty"; sed -n 2p rep/report.csv; }
  grep -q "never 0" r/report.md && pass "report.md defines its unknown mark" || fail "report.md has no legend for unknown"
fi

# A --out that cannot hold a run: advice that fits the cause, exit 2 (bad input).
echo x >afile
expect "a file in the way" 2 "afile is a file, not a folder: choose another --out" -- \
  "$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out afile/run "${SMALL[@]}"
grep -q "freeing space" "$T/err" && fail "a file in the way advised to free space" || pass "no talk of space"
if command -v unshare >/dev/null && unshare -m --propagation private true 2>/dev/null; then
  mkdir -p ro
  unshare -m --propagation private bash -c 'mount -t tmpfs -o ro,size=1m tmpfs "$1" && shift && exec "$@"' _ \
    "$T/ro" "$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out "$T/ro/run" "${SMALL[@]}" >ro.out 2>ro.err
  rc=$?
  if [[ $rc -eq 2 ]] && grep -q "is on a read-only file system: choose an --out on a writable one" ro.err &&
     ! grep -q "freeing space" ro.err; then pass "a read-only --out: exit 2, and what to do"
  else fail "a read-only --out: exit $rc"; cat ro.err; fi
else
  echo "skip: no private mount namespace for a read-only file system"
fi

# eval takes positionals, as the other commands do.
RELU=$REPO/examples/problems/01_relu.py
cat >cand.py <<'PY'
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
PY
expect "eval P.py K.py" 0 "correct" -- \
  "$BIN" eval "$RELU" cand.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --trials 1 --no-cache
# Without --python: the first python3 with torch, even when PATH's python3 has none.
mkdir -p notorch
printf '#!/bin/sh\nexec %s -S "$@"\n' "$(command -v python3 || echo /usr/bin/python3)" >notorch/python3
chmod +x notorch/python3
if ! PATH=$T/notorch:$PATH python3 -c 'import torch' 2>/dev/null && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  expect "without --python, a python3 without torch is passed over" 0 "correct" -- \
    env -u MKEVOLVE_PYTHON PATH="$T/notorch:$PATH" "$BIN" eval "$RELU" cand.py --test-cpu-unsafe --allow-pytorch \
    --no-perf --trials 1 --no-cache
else
  echo "skip: cannot make a python3 without torch in front of one with it"
fi

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all newcomer e2e checks passed"
