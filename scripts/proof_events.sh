#!/usr/bin/env bash
# Proof that a restructuring changed no event a scripted run logs (nor its
# solution's manifest.json): the CPU
# test-mode fixture runs (HAND-WRITTEN FIXTURE sessions, not an LLM's) are run
# by two binaries, and their events.jsonl compared after taking out what
# differs between any two runs of the same binary: the timestamps, and every
# measured number (times, speedups: any non-integer number, and latency_ms),
# in strings too; and whether a verdict came from the cache (a race between
# identical candidates), and the estimated input token counts (the fixture's
# prompts quote measured times). Each run starts with an empty cache of its own.
#
#   scripts/proof_events.sh BEFORE_BIN AFTER_BIN [PYTHON]
#
# The lines --events-json printed are compared too (sorted: the live progress
# events of parallel work come in any order).
#
# Exit status 0 when every log is the same, 1 when any differs.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
before="$1" after="$2" py="${3:-python3}"
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
normalize() {
  "$py" - "$1" <<'PY'
import json, re, sys
# "cached" and the slot/eval/baseline times it hides: which of two identical
# candidates evaluated at once meets the other's cached verdict is a race.
DROP = {"ts", "latency_ms", "cached", "queued_s", "eval_s", "baseline_s"}
# A fixture session's token counts are estimates from the prompts' length, and
# a prompt quotes measured times ("median 0.0620 ms"): they may differ by a few.
ESTIMATED = {"input", "tokens"}
NUM = re.compile(r"\d+\.\d+(e[-+]?\d+)?")
def norm(x, key=""):
    if isinstance(x, dict):
        return {k: "<estimated>" if k in ESTIMATED and isinstance(v, int) else norm(v, k)
                for k, v in x.items() if k not in DROP}
    if isinstance(x, list):
        return [norm(v) for v in x]
    if isinstance(x, float):
        return "<measured>"
    if isinstance(x, str):
        return NUM.sub("<n>", x)
    return x
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        print(json.dumps(norm(json.loads(line)), sort_keys=True))
PY
}
run() {  # BIN OUT PROBLEM SESSION (each run with an empty verdict cache of its own)
  # --events-json's lines are kept too: every logged event and the live progress ones.
  XDG_CACHE_HOME="$2.cache" "$1" run "$3" --llm "replay:$4" --python "$py" --test-cpu-unsafe --out "$2" --iterations 2 \
    --calls-per-iter 4 --refine-every 3 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 \
    --timeout 120 --events-json >"$2.stdout" 2>/dev/null || true
}
differ=0 n=0
for pair in "examples/sessions/mlp_small.py examples/sessions/mlp_small_cpu.jsonl" \
            "examples/sessions/messy.py examples/sessions/messy_cpu.jsonl"; do
  set -- $pair
  name=$(basename "$1" .py)
  for side in before after; do
    bin=$before; [[ $side == after ]] && bin=$after
    run "$bin" "$work/$name.$side" "$1" "$2"
    normalize "$work/$name.$side/events.jsonl" > "$work/$name.$side.norm"
    # The solution's manifest, as one more record (when the run wrote one).
    if [[ -f $work/$name.$side/solution/manifest.json ]]; then
      "$py" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' \
        "$work/$name.$side/solution/manifest.json" > "$work/$name.$side.man.jsonl"
      normalize "$work/$name.$side.man.jsonl" >> "$work/$name.$side.norm"
    fi
  done
  # The --events-json lines, sorted: live progress events of parallel work race.
  for side in before after; do
    grep '^{' "$work/$name.$side.stdout" > "$work/$name.$side.ej" || true
    normalize "$work/$name.$side.ej" | sort > "$work/$name.$side.ej.norm"
  done
  ej_same=1
  if ! diff -q "$work/$name.before.ej.norm" "$work/$name.after.ej.norm" >/dev/null; then
    ej_same=0
    echo "$name: --events-json lines DIFFER"
    diff "$work/$name.before.ej.norm" "$work/$name.after.ej.norm" | head -10
  else
    echo "$name: $(wc -l < "$work/$name.after.ej.norm") --events-json lines, the same"
  fi
  n=$((n + 1))
  lines=$(wc -l < "$work/$name.after.norm")
  if diff "$work/$name.before.norm" "$work/$name.after.norm" > "$work/$name.diff"; then
    echo "$name: $lines events, the same"
    [[ $ej_same -eq 1 ]] || differ=$((differ + 1))
  else
    differ=$((differ + 1))
    echo "$name: DIFFERS"
    "$py" - "$work/$name.before.norm" "$work/$name.after.norm" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
def walk(x, y, path):
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            walk(x.get(k, "<absent>"), y.get(k, "<absent>"), path + "." + k)
    elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (u, v) in enumerate(zip(x, y)):
            walk(u, v, path + "[%d]" % i)
    elif x != y:
        print("  %s: %s -> %s" % (path, json.dumps(x)[:160], json.dumps(y)[:160]))
if len(a) != len(b):
    print("  %d events before, %d after" % (len(a), len(b)))
for i, (x, y) in enumerate(zip(a, b)):
    walk(x, y, "event %d (%s)" % (i + 1, x.get("type")))
PY
  fi
done
echo "proof_events: $n fixture runs: $((n - differ)) the same, $differ differ"
[[ $differ -eq 0 ]]
