#!/usr/bin/env bash
# End-to-end tests of `mkevolve calibrate` and `--tolerance calibrated|FILE`
# (issue 16; the paper's Appendix D), in the worker's CPU test mode: the
# calibration file is written and read, a subtle bug that the default fp32
# tolerance lets through fails the calibrated check while an honest kernel
# passes it, and bad input is named.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary
need_torch

cat >gelu3.py <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x) * 3 + x

def get_inputs():
    return [torch.randn(64, 256)]

def get_init_inputs():
    return []
PY
# Honest: float64, rounded once.
cat >honest.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        y = x.double()
        return (torch.nn.functional.gelu(y) * 3 + y).float()
PY
# A 1e-5 relative error on the GELU term: within fp32's 1e-4 + 1e-4 * |expected|.
cat >off.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        y = x.double()
        return (torch.nn.functional.gelu(y) * 3.00003 + y).float()
PY
cat >broken.py <<'PY'
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        raise RuntimeError("this reference always fails")

def get_inputs():
    return [torch.randn(4)]

def get_init_inputs():
    return []
PY
E=(--python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --no-cache --json --timeout 120)

expect "calibrate a problem file" 0 "x1 atol" -- "$BIN" calibrate gelu3.py --runs 5 --python "$PY" --test-cpu-unsafe
grep -q "1 of 1 problem(s) calibrated" "$T/out" && pass "it says what it did" || fail "no summary line"
CAL=$XDG_CACHE_HOME/mkevolve/calibration.json
[[ -f $CAL ]] && grep -q '"mkevolve-calibration"' "$CAL" && pass "the cache's calibration.json is written" \
  || fail "no calibration file at $CAL"

expect "the bug passes fp32's default tolerance" 0 '"status":"correct"' -- "$BIN" eval --problem gelu3.py \
  --kernel off.py "${E[@]}"
expect "the honest kernel passes its calibrated tolerance" 0 '"atol":"calibrated"' -- "$BIN" eval \
  --problem gelu3.py --kernel honest.py --tolerance calibrated "${E[@]}"
grep -q '"rtol":0' "$T/out" && pass "rtol 0 under calibration" || fail "the verdict's rtol is not 0"
expect "the bug fails its calibrated tolerance" 1 'calibrated on x1 inputs' -- "$BIN" eval \
  --problem gelu3.py --kernel off.py --tolerance calibrated "${E[@]}"

# A file that lacks the problem: the problem is calibrated first and added.
expect "--tolerance FILE calibrates what it lacks" 0 '"status":"correct"' -- "$BIN" eval --problem gelu3.py \
  --kernel honest.py --tolerance mine.json --calibration-runs 3 "${E[@]}"
grep -q '"runs": 3' mine.json && pass "mine.json holds the 3-run calibration" || fail "mine.json was not written"
expect "--tolerance FILE is then read" 1 'calibrated' -- "$BIN" eval --problem gelu3.py \
  --kernel off.py --tolerance mine.json "${E[@]}"
grep -q '"runs": 3' mine.json && pass "and not measured again (still 3 runs, not the default 20)" \
  || fail "mine.json was calibrated again"

# A run directory: its problem and every subproblem it has had. (A hand-made
# fixture of a run directory's layout: config.json, work/problem.py,
# work/subproblems/*.py.)
mkdir -p run/work/subproblems && echo '{}' >run/config.json
cp gelu3.py run/work/problem.py && cp gelu3.py run/work/subproblems/a-0123456789ab.py
sed 's/\* 3 + x/* 2 + x/' gelu3.py >run/work/subproblems/b-0123456789ab.py
expect "calibrate a run directory" 0 "3 of 3 problem\(s\) calibrated; .*run/calibration.json holds 2" -- \
  "$BIN" calibrate run --runs 3 --python "$PY" --test-cpu-unsafe

# Bad input.
expect "--tolerance calibrated with --atol" 2 "drop --atol/--rtol" -- "$BIN" eval --problem gelu3.py \
  --kernel honest.py --tolerance calibrated --atol 1e-3 "${E[@]}"
echo '{"problems": {}}' >notcal.json
expect "a file that is not a calibration file" 2 "notcal.json: not a calibration file" -- "$BIN" eval \
  --problem gelu3.py --kernel honest.py --tolerance notcal.json "${E[@]}"
expect "calibrate a missing file" 2 "nope.py: no such file" -- "$BIN" calibrate nope.py --python "$PY" --test-cpu-unsafe
expect "calibrate a directory that is not a run" 2 "not a run directory" -- "$BIN" calibrate run/work \
  --python "$PY" --test-cpu-unsafe
expect "calibrate a problem whose reference fails" 2 "broken.py: calibration failed while Model.forward" -- \
  "$BIN" calibrate broken.py --runs 2 --python "$PY" --test-cpu-unsafe
expect "--runs below 2" 2 "runs" -- "$BIN" calibrate gelu3.py --runs 1 --python "$PY" --test-cpu-unsafe

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all calibrate e2e checks passed"
