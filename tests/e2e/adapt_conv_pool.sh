#!/usr/bin/env bash
# The gpu-suite stage `adapt` (issue 17: a conv+pool network and its MaxPool /
# LPPool variants) checked on the CPU, so the GPU run never finds its script or
# its fixture broken. The LLM is examples/sessions/conv_pool_fixture.py, a
# HAND-WRITTEN FIXTURE, not an LLM.
#   1. Every Triton kernel the fixture replies with passes the static checks
#      (`mkevolve check`), and no two replies are the same file. (Their results
#      are checked on the CPU through a Triton emulator in
#      tests/python/test_conv_pool_fixture.py.)
#   2. Its decompositions of the three problems, at their real sizes, pass the
#      worker's verification, and the variants keep the two convolution files.
#   3. The stage itself, on the CPU (GPU_SUITE_ADAPT_CPU=1: the worker's test
#      mode with the fixture's torch-only stand-ins, and copies of the problems
#      at batch 2 and 16x16 images): each stand-in evaluated on its own, the base
#      run, both adaptations, and scripts/adapt_summary.py's checks (conv_relu
#      and pointwise_conv reused with 0 LLM calls, only the new pooling evolved
#      with the budget, the final checks passed).
# ctest passes the binary as $1.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
FIXTURE=$REPO/examples/sessions/conv_pool_fixture.py

reply() {  # agent task -> the kernel file's text on stdout
  MKEVOLVE_AGENT=$1 MKEVOLVE_TASK=$2 "$PY" "$FIXTURE" --state "$T/kstate" </dev/null |
    "$PY" -c 'import re, sys; m = re.search(r"```python file=kernel.py\n(.*?)```", sys.stdin.read(), re.S); print(m.group(1) if m else "", end="")'
}
mkdir -p k
for t in conv_relu pointwise_conv avg_pool max_pool lp_pool; do
  for i in 0 1 2 3; do reply generate "$t" >"k/$t.g$i.py"; done
  reply debug "$t" >"k/$t.d0.py"
  reply optimize "$t" >"k/$t.o0.py"
done
empty=$(find k -name '*.py' -empty | wc -l)
[[ $empty -eq 0 ]] && pass "every kernel request got a kernel file" || fail "$empty replies without a kernel file"
if "$BIN" check k/*.py --python "$PY" >"$T/out" 2>&1 && [[ ! -s "$T/out" ]]; then
  pass "every fixture kernel passes the static checks"
else
  fail "static checks on fixture kernels"; sed 's/^/     | /' "$T/out" | head -20
fi
dups=$(md5sum k/*.py | awk '{print $1}' | sort | uniq -d | wc -l)
[[ $dups -eq 0 ]] && pass "no two replies are the same file" || fail "$dups duplicate replies"
MKEVOLVE_AGENT=generate MKEVOLVE_TASK=conv_pool "$PY" "$FIXTURE" --state "$T/kstate" </dev/null |
  grep -q "nothing scripted" && pass "a whole-problem kernel request gets a reply without files" \
  || fail "whole-problem kernel reply"

if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "SKIP the stage's CPU path: $PY has no torch"
  [[ $fails -eq 0 ]] && echo "all adapt_conv_pool checks passed" || echo "$fails adapt_conv_pool check(s) failed"
  exit $((fails > 0))
fi

# Each decomposition, at the problems' real sizes, passes the worker's
# verification (the stage's CPU path below uses small copies).
for p in conv_pool conv_pool_maxpool conv_pool_lppool; do
  if "$BIN" decompose "$REPO/examples/sessions/$p.py" --llm "exec:$PY $FIXTURE --state $T/dstate" --out "d_$p" \
      --workers 1 --python "$PY" --test-cpu-unsafe >"$T/out" 2>&1 && grep -q "into 3 subproblems" "$T/out"; then
    pass "decompose $p: 3 subproblems verified"
  else
    fail "decompose $p"; sed 's/^/     | /' "$T/out" | tail -20
  fi
done
for f in conv_relu.py pointwise_conv.py; do
  cmp -s "d_conv_pool/subkernel_problems/$f" "d_conv_pool_maxpool/subkernel_problems/$f" \
    && cmp -s "d_conv_pool/subkernel_problems/$f" "d_conv_pool_lppool/subkernel_problems/$f" \
    && pass "the variants' $f is the base decomposition's" || fail "the variants' $f differs from the base's"
done

mkdir -p suite-out
(cd "$REPO" && OUT=$T/suite-out GPU_SUITE_STAGES=adapt GPU_SUITE_ADAPT_CPU=1 MKEVOLVE_BIN=$BIN MKEVOLVE_PYTHON=$PY \
  bash scripts/gpu-suite.sh) >"$T/suite.txt" 2>&1
rc=$?
if [[ $rc -eq 0 ]] && grep -qE "^stage adapt +PASS" suite-out/summary-suite.txt; then
  pass "gpu-suite stage adapt passes on the CPU"
else
  fail "gpu-suite stage adapt on the CPU: exit $rc"; sed 's/^/     | /' "$T/suite.txt" | tail -40
fi
if grep -q "^adapt: PASS (2 adaptations, 0 problems)" suite-out/adapt.txt \
   && grep -q "reuse conv_relu <- conv_relu of .*/conv_pool: same source, re-verified correct, 0 LLM calls here, 2 saved" \
     suite-out/adapt.txt \
   && grep -q "evolved max_pool: 4 kernel LLM calls (generate 4)" suite-out/adapt.txt \
   && grep -q "evolved lp_pool: 4 kernel LLM calls (generate 4)" suite-out/adapt.txt; then
  pass "the summary names what each adaptation reused, evolved and saved"
else
  fail "the stage's summary"; sed 's/^/     | /' suite-out/adapt.txt 2>/dev/null | head -40
fi
# The summary's checks can fail: the same runs judged against another budget.
mkdir -p runs && tar -xzf suite-out/logs-suite.tgz -C runs ./adapt 2>/dev/null
"$PY" "$REPO/scripts/adapt_summary.py" --budget 3 runs/adapt/conv_pool runs/adapt/conv_pool_maxpool >"$T/out" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -q "FAIL conv_pool_maxpool: 4 kernel calls for max_pool, expected the budget 3" "$T/out" \
  && pass "adapt_summary.py fails runs that spent another budget" \
  || { fail "adapt_summary.py with a wrong budget: exit $rc"; sed 's/^/     | /' "$T/out" | tail -5; }
grep -q "== run conv_pool: exit 0" suite-out/adapt.log && pass "each step's output is streamed into \$OUT/adapt.log" \
  || fail "adapt.log"

echo
[[ $fails -eq 0 ]] && echo "all adapt_conv_pool checks passed" || echo "$fails adapt_conv_pool check(s) failed"
exit $((fails > 0))
