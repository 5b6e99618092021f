#!/usr/bin/env bash
# End-to-end tests of `mkevolve eval` and `mkevolve check` (ctest passes the
# binary as $1). CPU only: exit statuses and messages for bad input, the
# static checker, "no GPU", and (with Debian's torch) a test-mode CPU eval
# through the real worker.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary

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
if [[ -f $REPO/worker/mkevolve_worker/static_check/__init__.py ]]; then
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
  # Unknown is null, never 0: torch 1.13 has no torch.compile, so that speedup is
  # unknown, while the eager one is measured (timed, in test mode).
  expect "cpu eval unknown speedup is null" 0 '"speedup":\{"compile":null,"eager":[0-9]' -- "$BIN" eval \
    --problem problem.py --kernel good.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-cache --json \
    --perf-trials 3 --warmup 1 --timeout 120
  # No GPU, no peaks: the roofline is null (known only on a GPU of the peaks table).
  if grep -q '"roofline":null' "$T/out"; then pass "cpu eval roofline is null"; else fail "cpu eval roofline is null"; fi
  # Candidates run in processes the server forked and warmed beforehand, unless --no-prestart.
  expect "cpu eval prestarted" 0 '"prestarted":true' -- "$BIN" eval --problem problem.py --kernel good.py \
    --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --timeout 120
  expect "cpu eval --no-prestart" 0 '"prestarted":false' -- "$BIN" eval --problem problem.py --kernel good.py \
    --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --no-prestart --timeout 120
  # Issue 16's case: a bf16 problem (GELU*3 + x, 256x1024) and an honest
  # candidate that computes in fp32 and rounds once: correct at the bf16
  # defaults (1e-2), with the tolerance and where it came from in the verdict;
  # incorrect when the flags ask for fp32's 1e-4.
  cat >bf16.py <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x) * 3 + x

def get_inputs():
    return [torch.randn(256, 1024).to(torch.bfloat16)]

def get_init_inputs():
    return []
PY
  cat >bf16_fp32.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        y = x.float()
        return (torch.nn.functional.gelu(y) * 3 + y).to(torch.bfloat16)
PY
  expect "bf16 problem: correct at its dtype's tolerance" 0 '"bfloat16 default"' -- "$BIN" eval --problem bf16.py \
    --kernel bf16_fp32.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --timeout 120
  grep -q '"rtol":0.01' "$T/out" && pass "the verdict reports rtol 0.01" || fail "no rtol 0.01 in the verdict"
  expect "bf16 problem: incorrect at --atol/--rtol 1e-4" 1 '"status":"incorrect"' -- "$BIN" eval --problem bf16.py \
    --kernel bf16_fp32.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json \
    --atol 1e-4 --rtol 1e-4 --timeout 120
  # A problem that declares its own tolerance.
  { cat bf16.py; echo 'MKEVOLVE_TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}'; } >bf16_strict.py
  expect "a problem's MKEVOLVE_TOLERANCE is used" 1 '"status":"incorrect"' -- "$BIN" eval --problem bf16_strict.py \
    --kernel bf16_fp32.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --timeout 120
  { cat bf16.py; echo 'MKEVOLVE_TOLERANCE = {"atl": 1e-5}'; } >bf16_bad.py
  expect "a bad MKEVOLVE_TOLERANCE is named before anything runs" 2 "unknown key 'atl'" -- "$BIN" eval \
    --problem bf16_bad.py --kernel bf16_fp32.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf \
    --no-cache --timeout 120
  expect "--pass-rate out of range" 2 "pass-rate" -- "$BIN" eval --problem bf16.py --kernel bf16_fp32.py \
    --python "$PY" --test-cpu-unsafe --pass-rate 1.5
  expect "--trials-dist with an unknown scale" 2 "unknown scale 'x2'" -- "$BIN" eval --problem bf16.py \
    --kernel bf16_fp32.py --python "$PY" --test-cpu-unsafe --trials-dist x3,x2
  # --baseline-tf32: a second baseline with TF32 on, beside the TF32-off one
  # (torch 1.13 on the CPU has no torch.compile: its compile figures are null).
  expect "--baseline-tf32 adds a second baseline" 0 '"compile_tf32":null' -- "$BIN" eval --problem problem.py \
    --kernel good.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-cache --json --baseline-tf32 \
    --perf-trials 5 --warmup 1 --timeout 120
  grep -qE '"baseline_tf32":\{[^}]*"eager_ms":[0-9.e-]+,"tf32":true\}' "$T/out" \
    && pass "checks.baseline_tf32 has its eager timing" || fail "no checks.baseline_tf32 timing in the verdict"
  expect "the scaled trials are planned and run" 0 '"dist_trials":\["c0x3","c0neg"\]' -- "$BIN" eval \
    --problem problem.py --kernel good.py --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache \
    --json --trials-dist x3,neg --timeout 120
  # --shapes (issue 35): a kernel that hard-codes the benchmark's batch passes
  # KernelBench's one shape, is told where it breaks (check, the default), and
  # is rejected under search, naming the shape.
  cat >kbshape.py <<'PY'
import torch
import torch.nn as nn

batch_size = 16
dim = 96

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
PY
  cat >hard16.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return (torch.clamp(x, min=0.0) * 2.0).reshape(16, 96)  # the benchmark's shape, hard-coded
PY
  expect "--shapes with an unknown mode" 2 "--shapes: all not in {benchmark,check,search}" -- "$BIN" eval \
    --problem kbshape.py --kernel hard16.py --python "$PY" --test-cpu-unsafe --shapes all
  expect "--shapes benchmark: the hard-coded kernel passes" 0 "correct" -- "$BIN" eval --problem kbshape.py \
    --kernel hard16.py --python "$PY" --test-cpu-unsafe --no-perf --no-cache --shapes benchmark --timeout 120
  expect "the default (check) says where it holds" 0 "fails at batch_size=7, dim=47" -- "$BIN" eval \
    --problem kbshape.py --kernel hard16.py --python "$PY" --test-cpu-unsafe --no-perf --no-cache --timeout 120
  expect "--shapes search rejects it, naming the shape" 1 "failed at shape variant batch_size=7, dim=47" -- "$BIN" \
    eval --problem kbshape.py --kernel hard16.py --python "$PY" --test-cpu-unsafe --no-perf --no-cache \
    --shapes search --timeout 120
  expect "--shapes search: an honest kernel holds" 0 "3 of 3 shape variants" -- "$BIN" eval --problem kbshape.py \
    --kernel good.py --python "$PY" --test-cpu-unsafe --no-perf --no-cache --shapes search --timeout 120
else
  echo "skip CPU evals: $PY has no torch"
fi

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all eval/check e2e checks passed"
