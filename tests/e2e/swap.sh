#!/usr/bin/env bash
# End-to-end tests of `mkevolve swap DIR --subkernel NAME --with FILE|pytorch`
# on a fixture run (CPU test mode, replayed session): a swap to the PyTorch
# reference is verified, installed, logged and marked in the report; a broken
# replacement is refused and leaves the solution byte for byte as it was.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_torch

tree() { (cd "$1" && find . -type f -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum); }

PROBLEM=$REPO/examples/sessions/mlp_small.py
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl
EV=(--test-cpu-unsafe --python "$PY" --trials 2 --perf-trials 2 --warmup 1 --timeout 120)
expect "fixture run" 0 "solution:" -- "$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out r1 -q "${EV[@]}" \
  --iterations 2 --calls-per-iter 4 --refine-every 3 --decompose-workers 1

# Bad usage leaves everything as it was.
tree r1/solution >before
expect "swap of an unknown subkernel" 2 "no subkernel 'nope' \(it has: linear_gelu, linear\)" -- \
  "$BIN" swap r1 --subkernel nope --with pytorch "${EV[@]}"
expect "swap with a missing file" 2 "missing.py: cannot read" -- \
  "$BIN" swap r1 --subkernel linear --with missing.py "${EV[@]}"
expect "swap in a directory that is not a run" 2 "not a run directory" -- \
  "$BIN" swap "$T" --subkernel linear --with pytorch "${EV[@]}"

# A replacement that computes the wrong thing is refused; nothing changes.
cat >wrong.py <<'PY'
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        lin = nn.Linear(in_features, out_features)
        self.weight = lin.weight
        self.bias = lin.bias

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight.t()) * 1.5
PY
events_before=$(wc -l <r1/events.jsonl)
expect "a wrong replacement is refused" 1 "not swapped: the replacement fails its subproblem's check \(incorrect" -- \
  "$BIN" swap r1 --subkernel linear --with wrong.py "${EV[@]}"
tree r1/solution >after
cmp -s before after && pass "refused swap leaves the solution intact" || fail "refused swap changed the solution"
tail -1 r1/events.jsonl | grep -q '"type":"swap_rejected"' && pass "refusal logged as swap_rejected" \
  || fail "no swap_rejected event"
# One shape for swap_rejected, the search's and this command's (docs/RUN-DIRECTORY.md).
tail -1 r1/events.jsonl | "$PY" -c '
import json, sys
e = json.loads(sys.stdin.read())
r = e["replaced"]
assert len(r) == 1 and r[0]["name"] == "linear" and r[0]["with"].endswith("wrong.py"), e
assert e["result"]["status"] == "incorrect" and "tau" in e and "speedup_after" in e, e
' && pass "swap_rejected has the one documented shape" || fail "swap_rejected shape"
ls -a r1 | grep -qE '^\.(solution\.|swap-work-)' && fail "staging or work directory left behind" || pass "no staging directory left"

# To the PyTorch reference: verified, installed, recorded, marked.
expect "swap to pytorch" 0 "swapped linear -> pytorch .*contains PyTorch subkernels" -- \
  "$BIN" swap r1 --subkernel linear --with pytorch "${EV[@]}"
grep -q 'class ModelNew(Model)' r1/solution/subkernel_implementations/linear.py && pass "the reference is installed" \
  || fail "linear.py is not the reference"
"$PY" - r1 <<'PY' && pass "manifest and swap event record it" || fail "manifest / event"
import json, sys
d = sys.argv[1]
m = json.load(open(d + "/solution/manifest.json"))
lin = [s for s in m["subkernels"] if s["name"] == "linear"][0]
assert lin["pytorch"] is True and m["contains_pytorch_subkernels"] is True, m
assert lin["local"]["status"] == "correct" and m["e2e"]["status"] == "correct", m
assert m["swaps"][-1]["to"] == "pytorch", m
e = json.loads(open(d + "/events.jsonl").read().splitlines()[-1])
assert e["type"] == "swap" and e["name"] == "linear" and e["to"] == "pytorch", e
assert "speedup_before" in e and e["speedup_after"] is not None, e
PY
if solution_matches r1; then pass "swapped package still imports and matches"; else fail "swapped package"; fi
expect "report after the swap" 0 "" -- "$BIN" report r1 -q
grep -q "not pure Triton" r1/report.md && pass "report says it contains PyTorch subkernels" \
  || fail "report lacks the PyTorch banner"

# Back to a Triton-style kernel file (the fixture's own implementation).
cp "$(ls r1/candidates/linear/*/kernel.py | head -1)" good.py
expect "swap to a kernel file" 0 "swapped linear -> good.py in" -- \
  "$BIN" swap r1 --subkernel linear --with good.py "${EV[@]}"
"$PY" -c "
import json; m = json.load(open('r1/solution/manifest.json'))
assert m['contains_pytorch_subkernels'] is False and len(m['swaps']) == 2, m" \
  && pass "no PyTorch subkernel left after swapping back" || fail "manifest after swapping back"

ls -a r1 | grep -qE '^\.(solution\.|swap-work-)' && fail "a swap left a staging or work directory" \
  || pass "no staging or work directory left after the swaps"

# Resuming the finished, swapped run changes nothing: no replay, no rewrite of
# solution/ (which would undo the swaps), no diverged-log warning.
sum_before=$(cd r1 && find solution -type f -exec md5sum {} + | sort)
n_before=$(wc -l <r1/events.jsonl)
expect "resume a finished run" 0 "already finished \(result: ok\); solution in r1/solution; nothing to resume" -- \
  "$BIN" run --resume r1 "${EV[@]}"
grep -q "diverged" "$T/out" "$T/err" && fail "resume warned of a diverged log" || pass "no diverged-log warning"
[[ "$(cd r1 && find solution -type f -exec md5sum {} + | sort)" == "$sum_before" ]] \
  && pass "the swapped solution is untouched" || fail "resume rewrote the swapped solution"
[[ $(wc -l <r1/events.jsonl) -eq $n_before ]] && pass "resume logged nothing" || fail "resume added events"

if [[ $fails -ne 0 ]]; then echo "$fails swap check(s) failed"; exit 1; fi
echo "all swap checks passed"
