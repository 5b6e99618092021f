#!/usr/bin/env bash
# End-to-end test of evaluation at KernelBench's real sizes, in the worker's
# CPU test mode (ctest passes the binary as $1): a problem with a 1.5 GiB input
# and a 1.5 GiB output, six honest torch-only candidates, --slots-per-gpu 6.
# Memory admission must keep them from exhausting the host (24 GB in CI), so
# all six are correct; each evaluation's measured peak host memory must stay
# within 3 x (input + output bytes) + 3 GB.
# The subject is memory, and one trial's tensors are all that is alive at a
# time, so each evaluation runs 2 regular trials and the signed-input trial
# (--trials 2 --trials-dist none): at the defaults (5 + 1 + 3 scaled trials)
# one evaluation of this problem takes about 300 s on 2 cores, and six of them
# ran past ctest's 40-minute limit in CI.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
[[ -x $BIN ]] || { echo "FAIL no mkevolve binary at $BIN (did the build fail?)"; exit 1; }
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip: $PY has no torch"; exit 0
fi
avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if (( avail_kb < 14 * 1024 * 1024 )); then
  echo "skip: only $((avail_kb / 1024 / 1024)) GiB available; one evaluation of this problem needs about 11"
  exit 0
fi

mkdir -p large
cat >large/relu_big.py <<'PY'
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    # 384 Mi float32 elements: a 1.5 GiB input and a 1.5 GiB output
    return [torch.rand(24576, 16384) * 2 - 1]


def get_init_inputs():
    return []
PY
: >large/pairs.txt
for i in 1 2 3 4 5 6; do
  body='return torch.relu(x)'
  (( i % 2 )) && body='return torch.clamp_min(x, 0.0)'
  printf 'import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        # honest candidate %d (a torch stand-in: CPU test mode)\n        %s\n' \
    "$i" "$body" >large/cand$i.py
  echo "relu_big.py cand$i.py" >>large/pairs.txt
done

start=$(date +%s)
"$BIN" eval --batch large/pairs.txt --json --no-perf --trials 2 --trials-dist none --test-cpu-unsafe --slots-per-gpu 6 --python "$PY" \
  >large/out.jsonl 2>large/err.txt
code=$?
echo "six evaluations took $(( $(date +%s) - start )) s (exit $code)"
"$PY" - large/out.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for r in rows:
    c = r.get("checks", {})
    fp, adm = c.get("footprint", {}), c.get("admission", {})
    print(f"  {r['kernel'].rsplit('/', 1)[-1]}: {r['status']} {r.get('kind', '')}; peak host "
          f"{fp.get('host_peak_bytes', 0) / 1e9:.2f} GB; admitted with {adm.get('footprint')}, "
          f"waited {adm.get('waited_s', 0):.1f} s" + (f"; {r.get('message', '')[:200]}" if r['status'] != 'correct' else ""))
PY
if [[ $code -eq 0 ]]; then pass "six large evaluations: exit 0"; else fail "six large evaluations: exit $code"; tail -20 large/err.txt; fi
n_ok=$(grep -c '"status":"correct"' large/out.jsonl)
if [[ $n_ok -eq 6 ]]; then pass "6 of 6 correct"; else fail "$n_ok of 6 correct"; fi
if "$PY" - large/out.jsonl <<'PY'
import json, sys
bad = 0
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    r = json.loads(line)
    fp = r.get("checks", {}).get("footprint", {})
    io = fp.get("input_bytes", 0) + fp.get("output_bytes", 0)
    limit = 3 * io + 3e9
    if not io or fp.get("host_peak_bytes", 1e30) > limit:
        print(f"  over the target: peak {fp.get('host_peak_bytes', 0) / 1e9:.2f} GB, limit {limit / 1e9:.2f} GB")
        bad += 1
sys.exit(1 if bad else 0)
PY
then pass "every evaluation's peak host memory <= 3 x (input + output) + 3 GB"
else fail "an evaluation's peak host memory exceeded 3 x (input + output) + 3 GB"; fi
if grep -q '"exclusive":false' large/out.jsonl && grep -q '"footprint":"measured"' large/out.jsonl; then
  pass "later evaluations were admitted by the measured footprint"
else
  fail "no evaluation was admitted by a measured footprint"
fi
if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all large-input e2e checks passed"
