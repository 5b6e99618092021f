#!/usr/bin/env bash
# End-to-end tests of `mkevolve eval` and `mkevolve check` (ctest passes the
# binary as $1). CPU only: exit statuses and messages for bad input, the
# static checker, "no GPU", and (with Debian's torch) a test-mode CPU eval
# through the real worker.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
[[ -x $BIN ]] || { echo "FAIL no mkevolve binary at $BIN (did the build fail?)"; exit 1; }

cat >problem.py <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.randn(64, 128)]

def get_init_inputs():
    return []
PY
cat >good.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, min=0.0) * 2.0
PY
cat >wrong.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp(x, min=0.0) * 3.0
PY
cat >nomodelnew.py <<'PY'
class Kernel:
    pass
PY
cat >noinputs.py <<'PY'
class Model:
    pass
PY
cat >clean.py <<'PY'
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu2_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * 2.0, mask=mask)

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu2_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
PY
cat >cheat.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.relu(x) * 2.0
PY

# Bad input: exit 2, naming the file and what is missing.
expect "missing problem" 2 "nope.py: no such file" -- "$BIN" eval --problem nope.py --kernel good.py --python "$PY"
expect "unknown timing mode" 2 "--timing: wall not in {device,synced}" -- "$BIN" eval --problem problem.py --kernel good.py --timing wall --python "$PY"
expect "missing kernel" 2 "gone.py: no such file" -- "$BIN" eval --problem problem.py --kernel gone.py --python "$PY"
expect "problem without get_inputs" 2 "noinputs.py: no get_inputs" -- "$BIN" eval --problem noinputs.py --kernel good.py --python "$PY"
expect "kernel without ModelNew" 2 "nomodelnew.py: no ModelNew" -- "$BIN" eval --problem problem.py --kernel nomodelnew.py --python "$PY"
expect "problem given as kernel" 2 "is this the problem file" -- "$BIN" eval --problem problem.py --kernel problem.py --python "$PY"
expect "directory without a package" 2 "decomposed_solution.py" -- "$BIN" eval --problem problem.py --kernel "$T" --python "$PY"
expect "missing --problem" 2 "problem" -- "$BIN" eval --kernel good.py
expect "bad flag value" 2 "" -- "$BIN" eval --problem problem.py --kernel good.py --trials 0
expect "help" 0 "--kernel" -- "$BIN" eval --help
if "$BIN" eval --help | grep -q test-cpu; then fail "--test-cpu-unsafe is hidden from --help"; else pass "test-only flag hidden"; fi

# No GPU: exit 3 with the clear message (this machine or CI has none; hide any).
expect "no GPU" 3 "no CUDA GPU visible: eval needs a GPU \(mkevolve check still works\)" -- \
  env CUDA_VISIBLE_DEVICES= "$BIN" eval --problem problem.py --kernel good.py --python "$PY"
expect "no python" 3 "/nonexistent/python" -- "$BIN" eval --problem problem.py --kernel good.py --python /nonexistent/python

# check: the static checker, no GPU or torch needed.
if [[ -f $REPO/worker/mkevolve_worker/static_check.py ]]; then
  expect "check clean" 0 "" -- "$BIN" check clean.py --python "$PY"
  expect "check cheat" 1 "cheat.py:[0-9]+: [a-z-]+: " -- "$BIN" check cheat.py --python "$PY"
  expect "check json" 1 '"clean":false' -- "$BIN" check --json cheat.py --python "$PY"
  expect "check without ModelNew" 1 "missing-modelnew|ModelNew" -- "$BIN" check nomodelnew.py --python "$PY"
else
  echo "skip check clean/cheat: the worker's static checker is not there yet"
fi
expect "check missing file" 2 "nope.py" -- "$BIN" check nope.py --python "$PY"
mkdir -p unreadable && expect "check a directory" 2 "decomposed_solution.py" -- "$BIN" check unreadable --python "$PY"

# A test-mode CPU eval through the real worker (needs torch in $PY).
if "$PY" -c 'import torch' 2>/dev/null; then
  expect "cpu eval correct" 0 "correct" -- "$BIN" eval --problem problem.py --kernel good.py --python "$PY" \
    --test-cpu-unsafe --allow-pytorch --no-perf --timeout 120
  expect "cpu eval two kernels json" 1 '"status":"incorrect"' -- "$BIN" eval --problem problem.py --kernel good.py \
    --kernel wrong.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --json --timeout 120
  if [[ $(grep -c '"status"' "$T/out") -ne 2 ]]; then fail "one JSON line per kernel"; else pass "one JSON line per kernel"; fi
  expect "cpu eval cached" 0 "cached" -- "$BIN" eval --problem problem.py --kernel good.py --python "$PY" \
    --test-cpu-unsafe --allow-pytorch --no-perf --timeout 120
  # Candidates run in processes the server forked and warmed beforehand, unless --no-prestart.
  expect "cpu eval prestarted" 0 '"prestarted":true' -- "$BIN" eval --problem problem.py --kernel good.py \
    --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --timeout 120
  expect "cpu eval --no-prestart" 0 '"prestarted":false' -- "$BIN" eval --problem problem.py --kernel good.py \
    --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --no-prestart --timeout 120
else
  echo "skip CPU evals: $PY has no torch"
fi

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all eval/check e2e checks passed"
