#!/usr/bin/env bash
# End-to-end test of memory admission, in the worker's CPU test mode (ctest
# passes the binary as $1): six honest torch-only candidates of a problem with a
# large input, --slots-per-gpu 6, on a machine whose memory is stated to the
# admission (MKEVOLVE_HOST_MEMORY_GB) rather than read: the same arithmetic as
# KernelBench's multi-GB problems on a 24 GB machine, at a scale two cores get
# through in about a minute (a 1.5 GiB input and the whole machine took 6
# minutes, run alone). Admission must keep them within the stated memory: all
# six are correct, later ones are admitted by the measured footprint and wait
# for room, and each evaluation's measured peak host memory stays within
# 3 x (input + output bytes) + 3 GB. Each evaluation runs 2 regular trials and
# the signed-input trial (--trials 2 --trials-dist none): the subject is memory.
# MKEVOLVE_TEST_LARGE_ROWS (default 4096: a 256 MiB input and output) and
# MKEVOLVE_TEST_LARGE_GB (default 5) scale it up: 24576 and 20 are the old test.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "skip: $PY has no torch"; exit 0
fi
ROWS=${MKEVOLVE_TEST_LARGE_ROWS:-4096}
STATED_GB=${MKEVOLVE_TEST_LARGE_GB:-5}
avail_kb=$(awk '/MemAvailable/ {print $2}' /proc/meminfo)
if (( avail_kb < (STATED_GB + 2) * 1024 * 1024 )); then
  echo "skip: only $((avail_kb / 1024 / 1024)) GiB available; the test states $STATED_GB GiB to the admission"
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
    # ROWS x 16384 float32 elements (4096: a 256 MiB input and a 256 MiB output)
    return [torch.rand(ROWS, 16384) * 2 - 1]


def get_init_inputs():
    return []
PY
sed -i "s/ROWS/$ROWS/" large/relu_big.py
: >large/pairs.txt
for i in 1 2 3 4 5 6; do
  body='return torch.relu(x)'
  (( i % 2 )) && body='return torch.clamp_min(x, 0.0)'
  printf 'import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        # honest candidate %d (a torch stand-in: CPU test mode)\n        %s\n' \
    "$i" "$body" >large/cand$i.py
  echo "relu_big.py cand$i.py" >>large/pairs.txt
done

start=$(date +%s)
MKEVOLVE_HOST_MEMORY_GB=$STATED_GB "$BIN" eval --batch large/pairs.txt --json --no-perf --trials 2 --trials-dist none --test-cpu-unsafe --slots-per-gpu 6 --python "$PY" \
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
# The stated memory bounds what ran at once: the reservations of the
# evaluations admitted side by side never add up to more than it.
if "$PY" - large/out.jsonl "$STATED_GB" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
adm = [r["checks"]["admission"] for r in rows]
cap = float(sys.argv[2]) * (1 << 30)
res = sorted((a.get("host_reserved_bytes", 0) for a in adm), reverse=True)
waited = sum(1 for a in adm if a.get("waited_s", 0) > 0)
fit = 0
total = 0.0
for x in sorted(res):
    if total + x > cap:
        break
    total += x
    fit += 1
print(f"  reservations {[round(x / 2**30, 2) for x in res]} GiB against {cap / 2**30:.1f} GiB: at most {fit} at once; "
      f"{waited} waited")
sys.exit(0 if fit < 6 and waited > 0 else 1)
PY
then pass "the stated memory held fewer than six at once, and some waited for room"
else fail "the stated memory did not bound the evaluations"; fi
if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all large-input e2e checks passed"
