# Shared by the e2e tests that stop a run and resume it (resume.sh,
# disk_full.sh). Sourced after common.bash, in $T. It records the
# hand-written fixture session examples/sessions/mlp_small_cpu.jsonl once
# (CPU test mode, a small budget) and serves it through an `exec:` provider,
# which goes through the response cache like a real endpoint and logs every
# request it receives to $MK_TEST_CALL_LOG, so a test sees which requests a
# resumed run sends.
#
# Sets PROBLEM, SESSION, SMALL (the run's flags) and ARGS (--llm exec:... plus
# SMALL); defines sent LOG, cache_entries DIR, py_files DIR and shape DIR.
PROBLEM=$REPO/examples/sessions/mlp_small.py
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl
SMALL=(--python "$PY" --test-cpu-unsafe -q --iterations 2 --calls-per-iter 4
       --refine-every 3 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120)
# Record the fixture session once, then serve it through exec: (one reply per agent, task and sample).
if ! "$BIN" run "$PROBLEM" --llm "replay:$SESSION" --record rec.jsonl --out rec "${SMALL[@]}" >rec.out 2>&1; then
  fail "recording run"; sed 's/^/     | /' rec.out | tail -20; exit 1
fi
cat >serve.py <<'PY'
import json, os, sys
rec, log = sys.argv[1], os.environ["MK_TEST_CALL_LOG"]
a, t, s = os.environ["MKEVOLVE_AGENT"], os.environ["MKEVOLVE_TASK"], int(os.environ["MKEVOLVE_SAMPLE"])
sys.stdin.read()
with open(log, "a") as f:
    f.write(f"{a} {t} {s}\n")
for line in open(rec):
    e = json.loads(line)
    if e["agent"] == a and e["task"] == t and e["sample"] == s:
        sys.stdout.write(e["response"]["text"])
        sys.exit(0)
sys.stderr.write(f"no recorded reply for {a} {t} {s}\n")
sys.exit(1)
PY
ARGS=(--llm "exec:$PY $T/serve.py $T/rec.jsonl" "${SMALL[@]}")

# Requests logged in LOG; replies stored in DIR's LLM cache.
sent() { [[ -f $1 ]] && wc -l <"$1" || echo 0; }
cache_entries() { [[ -d $1/cache/llm ]] && find "$1/cache/llm" -type f -not -name '*.tmp*' | wc -l || echo 0; }
py_files() { (cd "$1/solution" && find . -name '*.py' -print0 | sort -z | xargs -0 sha256sum); }

# What must not change: event types and decisions in order (no times, no seq/ts).
shape() {
  "$PY" - "$1" <<'PY'
import json, sys
keys = ("type", "agent", "task", "candidate", "iteration", "sample", "status", "kind", "reason", "change",
        "from", "into", "t", "name", "to", "ok", "correct", "result", "best_speedup_compile")
events = [json.loads(line) for line in open(sys.argv[1] + "/events.jsonl")]
# A run killed after its run_end (while writing the report) logs another one
# when resumed: only the last run_end is the result.
last_end = max((i for i, e in enumerate(events) if e["type"] == "run_end"), default=-1)
for i, e in enumerate(events):
    if e["type"] in ("resume", "preflight") or (e["type"] == "run_end" and i != last_end):
        continue
    print(json.dumps({k: e[k] for k in keys if k in e}, sort_keys=True))
PY
}
