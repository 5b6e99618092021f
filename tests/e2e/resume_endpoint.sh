#!/usr/bin/env bash
# A resume goes to the LLM endpoint the run started with (issue 14, finding 1):
# the run directory records --base-url and the config file read (never a
# secret); `--resume DIR` uses them, and a resume that names another --llm,
# --base-url or --config is refused (exit 2) unless --allow-llm-change says the
# change is meant. Driven by the hand-written fixture session (replay:) in CPU
# test mode.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary
need_torch

PROBLEM=$REPO/examples/sessions/mlp_small.py
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl
SMALL=(--python "$PY" --test-cpu-unsafe -q --iterations 2 --calls-per-iter 4
       --refine-every 3 --decompose-workers 1 --trials 2 --perf-trials 2 --warmup 1 --timeout 120)
printf '[llm]\nmax_retries = 1\n' >mk.toml
"$BIN" run "$PROBLEM" --llm "replay:$SESSION" --base-url http://127.0.0.1:9/v1 --config mk.toml --out r "${SMALL[@]}" \
  >run.out 2>&1
code=$?
if [[ $code -le 1 ]]; then pass "fixture run (exit $code)"; else fail "fixture run: exit $code"; tail -20 run.out; fi
if "$PY" - r/config.json "$T/mk.toml" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
assert c.get("base_url") == "http://127.0.0.1:9/v1", c
assert c.get("config") == sys.argv[2], (c.get("config"), sys.argv[2])
PY
then pass "config.json records the endpoint and the config file"
else fail "config.json lacks the endpoint or the config file"; cat r/config.json; fi
expect "another --base-url is refused" 2 "started with --base-url 'http://127.0.0.1:9/v1'; this resume asks for --base-url 'http://127.0.0.1:10/v1'" -- \
  "$BIN" run --resume r --base-url http://127.0.0.1:10/v1 "${SMALL[@]}"
expect "another --llm is refused" 2 "started with --llm 'replay:.*'; this resume asks for --llm 'replay:other.jsonl'" -- \
  "$BIN" run --resume r --llm replay:other.jsonl "${SMALL[@]}"
printf '[llm]\nmax_retries = 2\n' >other.toml
expect "another --config is refused" 2 "started with --config '.*mk.toml'" -- \
  "$BIN" run --resume r --config other.toml "${SMALL[@]}"
expect "a plain resume uses what was recorded" "$code" "already finished" -- "$BIN" run --resume r "${SMALL[@]}"
expect "the same values again are accepted" "$code" "already finished" -- \
  "$BIN" run --resume r --base-url http://127.0.0.1:9/v1 --config mk.toml "${SMALL[@]}"
expect "--allow-llm-change accepts a change" "$code" "already finished" -- \
  "$BIN" run --resume r --base-url http://127.0.0.1:10/v1 --allow-llm-change "${SMALL[@]}"
# A meant change is recorded (issue 13): the resume event says what changed,
# and the report names it. An unfinished copy of the run (no summary.json)
# resumed with the same session under another file name, so another --llm.
cp -r r r2 && rm -f r2/summary.json
cp "$SESSION" same_session.jsonl
expect "--allow-llm-change resumes an unfinished run with another --llm" "$code" "" -- \
  "$BIN" run --resume r2 --llm "replay:$T/same_session.jsonl" --allow-llm-change "${SMALL[@]}"
if "$PY" - r2/events.jsonl "$SESSION" "$T/same_session.jsonl" <<'PY'
import json, sys
res = [json.loads(l) for l in open(sys.argv[1]) if '"type":"resume"' in l]
ch = res[-1].get("llm_changes")
assert ch == [{"flag": "--llm", "from": "replay:" + sys.argv[2], "to": "replay:" + sys.argv[3]}], res[-1]
PY
then pass "the resume event records the LLM change"
else fail "the resume event lacks llm_changes"; grep '"type":"resume"' r2/events.jsonl | tail -1; fi
grep -q "LLM changed on resume (--allow-llm-change): --llm 'replay:.*mlp_small_cpu.jsonl' -> 'replay:.*same_session.jsonl'" \
  r2/report.md && pass "the report names the change" || { fail "the report does not name the change"; grep -n "Model\|LLM" r2/report.md; }
if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all resume-endpoint e2e checks passed"
