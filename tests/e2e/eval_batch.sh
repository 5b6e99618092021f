#!/usr/bin/env bash
# End-to-end tests of `mkevolve eval --batch FILE` (ctest passes the binary as
# $1): usage errors and bad batch lines (exit 2, FILE:LINE, no worker started),
# and, with Debian's torch, a test-mode CPU eval of pairs over two problems
# through one worker server.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary

mkdir -p probs kernels pkg batch
cat >probs/relu2.py <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.randn(64, 128)]

def get_init_inputs():
    return []
PY
cat >probs/addone.py <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return x + y + 1.0

def get_inputs():
    return [torch.randn(32, 16), torch.randn(32, 16)]

def get_init_inputs():
    return []
PY
modelnew() {  # modelnew FILE ARGS BODY: a torch-only candidate (the CPU test mode runs no Triton)
  printf 'import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, %s):\n        %s\n' \
    "$2" "$3" >"$1"
}
modelnew kernels/relu2_good.py x 'return torch.clamp(x, min=0.0) * 2.0'
modelnew kernels/relu2_wrong.py x 'return torch.clamp(x, min=0.0) * 3.0'
modelnew kernels/addone_good.py 'x, y' 'return torch.add(x, y) + 1.0'
modelnew kernels/addone_raises.py 'x, y' 'raise RuntimeError("deliberate failure in forward")'
modelnew pkg/decomposed_solution.py 'x, y' 'return (x + 1.0) + y'
printf 'class Kernel:\n    pass\n' >kernels/nomodelnew.py

# A --python that logs how it was called: the worker server is `-m mkevolve_worker serve`.
cat >logpy <<EOF
#!/bin/bash
echo "\$*" >>"$T/pylog"
exec "$PY" "\$@"
EOF
chmod +x logpy
servers() { grep -c 'mkevolve_worker serve' "$T/pylog" 2>/dev/null; }

# Usage errors: exit 2 with a one-line message, before anything starts.
expect "--kernel without --problem" 2 "--kernel needs --problem" -- "$BIN" eval --kernel kernels/relu2_good.py
expect "--problem without --kernel" 2 "the problem needs at least one kernel" -- "$BIN" eval --problem probs/relu2.py
expect "nothing to evaluate" 2 "nothing to evaluate" -- "$BIN" eval --json
expect "missing batch file" 2 "nope.txt: no such file" -- "$BIN" eval --batch nope.txt --python "$PY"
printf '# nothing here yet\n\n' >batch/empty.txt
expect "empty batch file" 2 "batch/empty.txt: no pairs" -- "$BIN" eval --batch batch/empty.txt --python "$PY"

# Bad lines: every one is named (FILE:LINE), and no worker server starts.
printf '%s\n' '../probs/relu2.py ../kernels/relu2_good.py' \
  '../probs/relu2.py ../kernels/relu2_good.py ../kernels/relu2_wrong.py' \
  '../probs/relu2.py ../kernels/gone.py' \
  '../probs/missing.py ../kernels/relu2_good.py' \
  '../probs/relu2.py' \
  '../probs/relu2.py ../kernels/nomodelnew.py' >batch/bad.txt
rm -f "$T/pylog"
expect "bad batch lines" 2 "batch/bad.txt:2: expected 'PROBLEM KERNEL', got '../probs/relu2.py ../kernels/relu2_good.py ../kernels/relu2_wrong.py'" -- \
  "$BIN" eval --test-cpu-unsafe --json --batch batch/bad.txt --python "$T/logpy"
for want in "batch/bad.txt:3: batch/../kernels/gone.py: no such file" \
  "batch/bad.txt:4: batch/../probs/missing.py: no such file" \
  "batch/bad.txt:5: expected 'PROBLEM KERNEL', got '../probs/relu2.py'" \
  "batch/bad.txt:6: batch/../kernels/nomodelnew.py: no ModelNew"; do
  if grep -qF -- "$want" "$T/err"; then pass "bad batch names: $want"; else fail "bad batch lacks: $want"; cat "$T/err"; fi
done
if grep -q 'batch/bad.txt:1:' "$T/err"; then fail "a good line reported as bad"; else pass "good line not reported"; fi
if [[ -s $T/out ]]; then fail "bad batch printed verdicts"; else pass "bad batch printed no verdicts"; fi
if [[ $(servers) -eq 0 ]]; then pass "bad batch started no worker"; else fail "bad batch started a worker server"; fi

# Without torch the rest cannot run.
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip CPU batch evals: $PY has no torch"
  if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
  echo "all eval --batch e2e checks passed"
  exit 0
fi

# Two problems, relative and absolute paths, a solution package, comments,
# blank lines, tabs and a CRLF line; results in input order.
{
  printf '# pairs for two problems\n\n'
  printf '../probs/relu2.py\t\t../kernels/relu2_good.py\n'
  printf '   ../probs/relu2.py    ../kernels/relu2_wrong.py\r\n'
  printf '%s %s\n' "$T/probs/addone.py" "$T/kernels/addone_good.py"
  printf '  # an indented comment\n'
  printf '../probs/addone.py ../kernels/addone_raises.py\n'
  printf '../probs/addone.py ../pkg\n'
} >batch/pairs.txt
cpu=(--test-cpu-unsafe --allow-pytorch --no-perf --timeout 120 --python "$T/logpy")
rm -f "$T/pylog"
expect "batch over two problems" 1 '"status":"runtime_error"' -- "$BIN" eval --json --no-cache --batch batch/pairs.txt "${cpu[@]}"
cp "$T/out" "$T/batch.json"
if [[ $(servers) -eq 1 ]]; then pass "one worker server for the whole batch"; else
  fail "the batch started $(servers) worker servers, wanted 1"; fi
check_lines() {  # check_lines NAME EXPECTED...: each JSON line's "problem kernel status", in order
  local name=$1
  shift
  if "$PY" - "$T/batch.json" "$@" <<'PY'; then pass "$name"; else fail "$name"; fi
import json, os, sys
got = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = [w.split() for w in sys.argv[2:]]
ok = len(got) == len(want)
for i, (g, (problem, kernel, status)) in enumerate(zip(got, want)):
    same = (os.path.realpath(g["problem"]) == os.path.realpath(problem)
            and os.path.realpath(g["kernel"]) == os.path.realpath(kernel) and g["status"] == status)
    if not same:
        print(f"     | line {i + 1}: got {g['problem']} {g['kernel']} {g['status']}, wanted {problem} {kernel} {status}")
    ok &= same
if len(got) != len(want):
    print(f"     | {len(got)} JSON lines, wanted {len(want)}")
sys.exit(0 if ok else 1)
PY
}
check_lines "each pair's problem, kernel and status, in input order" \
  "probs/relu2.py kernels/relu2_good.py correct" \
  "probs/relu2.py kernels/relu2_wrong.py incorrect" \
  "probs/addone.py kernels/addone_good.py correct" \
  "probs/addone.py kernels/addone_raises.py runtime_error" \
  "probs/addone.py pkg/decomposed_solution.py correct"

# --stream: every verdict once, each with its index in the input, whatever the order.
expect "batch --stream" 1 '"index":' -- "$BIN" eval --json --stream --no-cache --batch batch/pairs.txt "${cpu[@]}"
if "$PY" - "$T/out" "$T/batch.json" <<'PY'; then pass "--stream: same verdicts, each with its input index"; else
import json, sys
got = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
want = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ok = sorted(g["index"] for g in got) == list(range(len(want)))
for g in got:
    w = want[g["index"]]
    ok &= (g["problem"], g["kernel"], g["status"]) == (w["problem"], w["kernel"], w["status"])
sys.exit(0 if ok else 1)
PY
  fail "--stream lines do not match the in-order ones"; cat "$T/out"; fi

# --problem/--kernel pairs come first, then the batch file's.
printf '../probs/addone.py ../kernels/addone_good.py\n' >batch/one.txt
expect "flags and batch together" 0 "" -- "$BIN" eval --json --problem probs/relu2.py --kernel kernels/relu2_good.py \
  --batch batch/one.txt "${cpu[@]}"
cp "$T/out" "$T/batch.json"
check_lines "flag pairs first, then the batch" \
  "probs/relu2.py kernels/relu2_good.py correct" \
  "probs/addone.py kernels/addone_good.py correct"

# The table gains a problem column when there are several problems, and not otherwise.
expect "batch table" 1 "runtime_error" -- "$BIN" eval --batch batch/pairs.txt "${cpu[@]}"
if head -1 "$T/out" | grep -qE '^problem +kernel +status'; then pass "table has a problem column"; else
  fail "table lacks a problem column"; head -3 "$T/out"; fi
if grep -qE '^addone +.*addone_raises\.py +runtime_error' "$T/out"; then pass "problem column holds the stem"; else
  fail "problem column does not hold the stem"; cat "$T/out"; fi
expect "one-problem table" 0 "" -- "$BIN" eval --batch batch/one.txt "${cpu[@]}"
if head -1 "$T/out" | grep -qE '^kernel +status'; then pass "one problem: no problem column"; else
  fail "one problem: unexpected header"; head -3 "$T/out"; fi

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all eval --batch e2e checks passed"
