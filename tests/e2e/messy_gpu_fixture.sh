#!/usr/bin/env bash
# The gpu-suite stage `messy`'s sessions, whole, on the CPU: `mkevolve run` on
# the three KernelBench problems of examples/sessions/messy_gpu_fixture.py (a
# HAND-WRITTEN FIXTURE LLM, not an LLM; --small: copies of the problems at small
# sizes, KernelBench's own files when a checkout is found, else stand-ins: see
# tests/python/fixtures/messy_problems.py), with the fixture's real Triton
# kernels run by a CPU emulator of Triton (tests/python/fixtures/fake_triton.py,
# installed as `triton` for the worker's Python only) in the worker's CPU test
# mode. scripts/messy_check.py then asserts what issue 33 asks of each run: the
# decomposition accepted with its measured error, the contiguous-only kernel's
# failure on the composition's view named in its verdict and mended by the
# debug reply that sees it, the crashing composition sent back to its beam and
# repaired, the final check passed. (Test mode runs no static checks, so the
# fallbacks' warnings are the GPU stage's to check; the emulator cannot tell
# whether Triton compiles the kernels.) ctest passes the binary as $1.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
export MKEVOLVE_HOME=$REPO

need_torch
if "$PY" -c 'import triton' 2>/dev/null; then echo "skip: $PY has a real Triton (this test emulates it)"; exit 0; fi

# The emulator as a `triton` package, seen by the worker's Python only.
mkdir -p emu/triton problems
cat >emu/triton/__init__.py <<EOF
"""A CPU emulator of Triton for tests/e2e/messy_gpu_fixture.sh (not Triton)."""
import sys
sys.path.insert(0, "$REPO/tests/python/fixtures")
import fake_triton as _f
_t, _tl = _f.modules(strided=True)
jit, cdiv, next_power_of_2 = _t.jit, _t.cdiv, _t.next_power_of_2
__version__ = "0.0+cpu-emulator"
sys.modules["triton.language"] = _tl
language = _tl
EOF
cat >emu/python <<EOF
#!/bin/sh
PYTHONPATH=$T/emu\${PYTHONPATH:+:\$PYTHONPATH} exec "$PY" "\$@"
EOF
chmod +x emu/python
if "$PY" "$REPO/tests/python/fixtures/messy_problems.py" problems >"$T/out" 2>&1; then
  pass "small copies of the problems ($(tr '\n' ' ' <"$T/out"))"
else fail "small copies of the problems"; sed 's/^/     | /' "$T/out"; exit 1; fi

SMALL=(--iterations 3 --refine-every 4 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120)
for spec in "99_Matmul_GELU_Softmax 2" "43_MinGPTCausalAttention 3" "31_VisionAttention 2"; do
  read -r name calls <<<"$spec"
  expect "run $name (emulated Triton)" 0 "final check: passed" -- "$BIN" run "problems/$name.py" --out "r-$name" \
    --llm "exec:$PY $REPO/examples/sessions/messy_gpu_fixture.py --small --state $T/state-$name" \
    --calls-per-iter "$calls" --python "$T/emu/python" --test-cpu-unsafe "${SMALL[@]}"
  if "$PY" "$REPO/scripts/messy_check.py" "r-$name" >"$T/check" 2>&1; then
    pass "$(tail -n 1 "$T/check")"
  else
    fail "messy_check $name"; sed 's/^/     | /' "$T/check"
  fi
done
if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all messy GPU fixture e2e checks passed (on the CPU, Triton emulated)"
