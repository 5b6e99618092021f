#!/usr/bin/env bash
# The GPU runs' fixture LLM (examples/sessions/gpu_fixture.py, HAND-WRITTEN, not
# an LLM) checked on the CPU, so the GPU suite never finds it broken: through the
# real `exec:` provider, each of its decompositions passes the worker's
# decomposition verification (CPU test mode), every kernel it writes passes the
# static checks, its deliberately broken first replies are the ones announced,
# and no two replies are the same file. ctest passes the binary as $1.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
FIXTURE=$REPO/examples/sessions/gpu_fixture.py
export MKEVOLVE_HOME=$REPO

if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $PY has no torch (needed for the decomposition check)"
  exit 0
fi

declare -A SUBS=([01_relu]="relu" [06_mlp3]="linear_gelu linear" [07_attention_block]="qkv_heads causal_attention linear_out")
# The three decompositions go side by side (each its own worker and state):
# the test's time is theirs, on the CPU.
declare -A PIDS=()
for p in 01_relu 06_mlp3 07_attention_block; do
  "$BIN" decompose "$REPO/examples/problems/$p.py" --llm "exec:$PY $FIXTURE --state $T/state-$p" \
    --out "d_$p" --workers 1 --python "$PY" --test-cpu-unsafe >"$T/out-$p" 2>&1 &
  PIDS[$p]=$!
done
for p in 01_relu 06_mlp3 07_attention_block; do
  n=$(wc -w <<<"${SUBS[$p]}")
  if wait "${PIDS[$p]}" && grep -q "into $n subproblems" "$T/out-$p"; then
    pass "decompose $p: $n subproblems verified"
  else
    fail "decompose $p"; sed 's/^/     | /' "$T/out-$p" | tail -20
  fi
done

# Kernel replies: the first generate reply, a second one, a debug one, per subproblem.
reply() {  # agent task -> the kernel file's text on stdout
  MKEVOLVE_AGENT=$1 MKEVOLVE_TASK=$2 "$PY" "$FIXTURE" --state "$T/kstate" </dev/null |
    "$PY" -c 'import re, sys; m = re.search(r"```python file=kernel.py\n(.*?)```", sys.stdin.read(), re.S); print(m.group(1) if m else "", end="")'
}
mkdir -p k
for t in relu linear_gelu linear qkv_heads causal_attention linear_out 07_attention_block; do
  reply generate "$t" >"k/$t.g0.py"
  reply generate "$t" >"k/$t.g1.py"
  reply debug "$t" >"k/$t.d0.py"
done
if "$BIN" check k/*.py --python "$PY" >"$T/out" 2>&1 && [[ ! -s "$T/out" ]]; then
  pass "every fixture kernel passes the static checks"
else
  fail "static checks on fixture kernels"; sed 's/^/     | /' "$T/out" | head -20
fi
grep -q 'GELU=False' k/linear_gelu.g0.py && grep -q 'GELU=True' k/linear_gelu.g1.py \
  && pass "linear_gelu: the first generate reply is the broken one" || fail "linear_gelu bug placement"
grep -q 'offs_n\[None, :\] < offs_m' k/causal_attention.g0.py && grep -q 'offs_n\[None, :\] <= offs_m' k/causal_attention.d0.py \
  && pass "causal_attention: the first generate reply has the off-by-one mask" || fail "causal_attention bug placement"
dups=$(md5sum k/*.py | awk '{print $1}' | sort | uniq -d | wc -l)
[[ $dups -eq 0 ]] && pass "no two replies are the same file" || fail "$dups duplicate replies"

MKEVOLVE_AGENT=split MKEVOLVE_TASK=qkv_heads "$PY" "$FIXTURE" --state "$T/kstate" </dev/null | grep -q "nothing scripted" \
  && pass "unscripted agents get a reply without files" || fail "unscripted agent reply"

echo
[[ $fails -eq 0 ]] && echo "all gpu_fixture checks passed" || echo "$fails gpu_fixture check(s) failed"
exit $((fails > 0))
