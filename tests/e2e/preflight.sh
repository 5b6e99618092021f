#!/usr/bin/env bash
# Pre-flight (issue 14, finding 2): a broken problem file is found before any
# LLM call is paid for. `mkevolve run` loads the problem and runs its reference
# once where it will be evaluated (CPU test mode here), and on failure exits 2
# naming the file and the fault; the LLM (an exec: command that counts its
# calls) is never asked. A sound problem still runs.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary
need_torch

cat >llm.sh <<'SH'
#!/bin/sh
cat >/dev/null
echo x >>"$(dirname "$0")/calls"
echo "I cannot help with that."
SH
chmod +x llm.sh
SMALL=(--python "$PY" --test-cpu-unsafe -q --iterations 1 --calls-per-iter 2 --decompose-workers 1 --trials 1
       --perf-trials 2 --warmup 1 --timeout 60 --llm "exec:$T/llm.sh")
head_src='import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, a):
        return a * 2
'
tail_src='
def get_inputs():
    return [torch.randn(4, 5)]

def get_init_inputs():
    return []
'
printf '%s\nraise RuntimeError("dataset missing")\n%s' "$head_src" "$tail_src" >imports_fail.py
printf '%s\n%s\ndef helper(:\n    pass\n' "$head_src" "$tail_src" >syntax.py
printf '%s\ndef get_inputs():\n    return "abc"\n\ndef get_init_inputs():\n    return []\n' "$head_src" >string_inputs.py
printf '%s\ndef get_inputs():\n    return [torch.randn(4, 5), torch.ones(3)]\n\ndef get_init_inputs():\n    return []\n' \
  "${head_src/a \* 2/a @ torch.ones(3, 3)}" >forward_fails.py
for case in "imports_fail dataset missing" "syntax SyntaxError" "string_inputs get_inputs\(\) returned a str" \
            "forward_fails running Model.forward once"; do
  name=${case%% *}
  want=${case#* }
  rm -f calls
  expect "$name: exit 2 before any LLM call" 2 "$T/$name.py: .*$want" -- "$BIN" run "$name.py" --out "r_$name" "${SMALL[@]}"
  if [[ ! -e calls ]]; then pass "$name: the LLM was never called"; else fail "$name: the LLM was called $(wc -l <calls) times"; fi
  # A start that failed leaves no run behind: the same command, once the file
  # is fixed, works (not "already exists and is not empty").
  [[ ! -e r_$name ]] && pass "$name: no half-made run directory left" || { fail "$name: r_$name left behind"; ls r_$name; }
  expect "$name: the same command again says the same" 2 "$T/$name.py: .*$want" -- \
    "$BIN" run "$name.py" --out "r_$name" "${SMALL[@]}"
done
# A sound problem passes the check, and the run goes on to the LLM.
rm -f calls
"$BIN" run "$REPO/examples/sessions/mlp_small.py" --out ok "${SMALL[@]}" >ok.out 2>&1
if [[ -s calls ]]; then pass "a sound problem reaches the LLM"; else fail "a sound problem never reached the LLM"; cat ok.out; fi
if "$PY" -c 'import json,sys; sys.exit(0 if any(e.get("type") == "preflight" and e["ok"] for e in map(json.loads, open("ok/events.jsonl"))) else 1)'
then pass "its preflight record says ok"; else fail "no ok preflight record"; grep preflight ok/events.jsonl; fi

# A misspelt or incomplete --llm is bad input (exit 2, the spec named), not a
# "missing" LLM (exit 3): the CLI decides by the error's kind, not its text.
expect "misspelt provider: exit 2" 2 "unknown LLM provider 'opnai'.*did you mean 'openai:m'" -- \
  "$BIN" run "$REPO/examples/sessions/mlp_small.py" --out bad_spec --llm opnai:m --python "$PY" --test-cpu-unsafe -q
if grep -q "missing:" "$T/err"; then fail "a misspelt provider reported as missing"; else
  pass "a misspelt provider is not reported as missing"; fi
expect "provider without a model: exit 2" 2 "LLM provider 'openai:' names no model" -- \
  "$BIN" run "$REPO/examples/sessions/mlp_small.py" --out bad_spec2 --llm openai: --python "$PY" --test-cpu-unsafe -q

# Finding 3: the endpoint is probed (GET .../models, free) before the first
# paid call. Unreachable: exit 3 at once, naming the URL. A refused key: exit
# 3, naming the key to check. A server without /models still runs.
OK_PROBLEM=$REPO/examples/sessions/mlp_small.py
NET=(--python "$PY" --test-cpu-unsafe -q --iterations 1 --calls-per-iter 2 --decompose-workers 1 --trials 1
     --perf-trials 2 --warmup 1 --timeout 60)
start=$(date +%s)
expect "unreachable endpoint: exit 3" 3 "cannot reach openai at http://127.0.0.1:9/v1/models" -- \
  "$BIN" run "$OK_PROBLEM" --out dead --llm openai:m --base-url http://127.0.0.1:9/v1 "${NET[@]}"
secs=$(( $(date +%s) - start ))
if grep -q "no correct kernel" "$T/out" "$T/err"; then fail "unreachable endpoint reported as 'no correct kernel'"; else
  pass "unreachable endpoint is not 'no correct kernel' (${secs} s)"; fi
[[ ! -e dead ]] && pass "unreachable: no half-made run directory left" || { fail "unreachable: dead/ left behind"; ls dead; }
# The same command again (issue: it said "already exists and is not empty").
expect "unreachable, the same command again: the same exit 3" 3 "cannot reach openai at http://127.0.0.1:9/v1/models" -- \
  "$BIN" run "$OK_PROBLEM" --out dead --llm openai:m --base-url http://127.0.0.1:9/v1 "${NET[@]}"
grep -q "already exists" "$T/err" && fail "the retry was refused: $(cat "$T/err")" || pass "the retry is not refused"
# A directory an older mkevolve left after such a failed start (config.json,
# only pre-flight records) is taken over; one holding a run offers --resume;
# one holding someone else's files offers nothing of the kind.
mkdir -p old_failed/cache/llm && echo '{}' >old_failed/config.json
echo '{"type":"preflight","what":"endpoint","ok":false,"seconds":0.1,"message":"x","seq":0}' >old_failed/events.jsonl
expect "a failed start's directory is taken over" 3 "old_failed: taking it over: it holds only a start that failed" -- \
  "$BIN" run "$OK_PROBLEM" --out old_failed --llm openai:m --base-url http://127.0.0.1:9/v1 "${NET[@]}"
mkdir -p mine && echo "my notes" >mine/notes.txt
expect "a directory of someone else's files is refused" 2 "mine already exists and is not empty, and holds no run" -- \
  "$BIN" run "$OK_PROBLEM" --out mine --llm openai:m "${NET[@]}"
grep -q -- "--resume" "$T/err" && fail "--resume offered for a directory without a run" || pass "no --resume for a non-run"
[[ -f mine/notes.txt ]] && pass "someone else's files are kept" || fail "mine/notes.txt was removed"

cat >fake_openai.py <<'PY'
import json, sys, http.server
models_status = int(sys.argv[2])
log = sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def _send(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        open(log, "a").write("GET " + self.path + "\n")
        self._send(models_status, {"data": []} if models_status == 200 else {"error": {"message": "no"}})
    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        self.rfile.read(n)
        open(log, "a").write("POST " + self.path + "\n")
        self._send(200, {"choices": [{"message": {"content": "I cannot help with that."}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.serve_forever()
PY
serve() {  # serve MODELS_STATUS: starts the fake server, sets PORT and SRV
  rm -f port srv.log
  "$PY" fake_openai.py port "$1" srv.log &
  SRV=$!
  for _ in $(seq 100); do [[ -s port ]] && break; sleep 0.05; done
  PORT=$(cat port)
}
serve 401
expect "a refused key: exit 3" 3 "401.*OPENAI_API_KEY" -- \
  "$BIN" run "$OK_PROBLEM" --out refused --llm openai:m --base-url "http://127.0.0.1:$PORT/v1" "${NET[@]}"
if ! grep -q "^POST" srv.log; then pass "a refused key: no completion was requested"; else
  fail "a refused key: completions were requested"; cat srv.log; fi
kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null
serve 404
"$BIN" run "$OK_PROBLEM" --out nomodels --llm openai:m --base-url "http://127.0.0.1:$PORT/v1" "${NET[@]}" >nm.out 2>&1
nm_rc=$?
if grep -q "^GET /v1/models" srv.log && grep -q "^POST /v1/chat/completions" srv.log; then
  pass "a server without /models is probed once and then used"
else fail "a server without /models"; cat srv.log nm.out | tail -20; fi
kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null

# A resume probes the endpoint as a fresh run does (issue: it warned "resuming
# anyway: cached replies need no endpoint", then retried every call for
# minutes and logged the network failure as "no decomposition passed
# verification"). The run died after its first LLM call; the endpoint is
# down now: exit 3 at once, and nothing is charged to the method.
cp -r nomodels crashed && rm -f crashed/summary.json
"$PY" - crashed/events.jsonl <<'PY'
import sys
lines = open(sys.argv[1]).read().splitlines(True)
first = next(i for i, l in enumerate(lines) if '"type":"llm_call"' in l)
open(sys.argv[1], "w").writelines(lines[:first + 1])
PY
before=$(wc -l <crashed/events.jsonl)
start=$(date +%s)
expect "a resume with the endpoint down: exit 3" 3 "cannot reach openai at http://127.0.0.1:$PORT/v1/models" -- \
  "$BIN" run --resume crashed --python "$PY"
secs=$(( $(date +%s) - start ))
[[ $secs -le 20 ]] && pass "it says so at once (${secs} s)" || fail "the resume took ${secs} s to give up"
grep -qE "resuming anyway|no correct kernel" "$T/out" "$T/err" && fail "the dead endpoint was charged as an outcome: $(cat "$T/out" "$T/err")" \
  || pass "no 'resuming anyway', no 'no correct kernel'"
grep -q "continue with: mkevolve run --resume" "$T/err" && pass "it says how to continue" || fail "no resume command: $(cat "$T/err")"
if "$PY" - crashed "$before" <<'PY'
import json, sys
d, before = sys.argv[1], int(sys.argv[2])
ev = [json.loads(l) for l in open(f"{d}/events.jsonl")][before:]
types = [e["type"] for e in ev]
assert "llm_call" not in types and "topology" not in types and "run_end" not in types, types
assert any(e["type"] == "preflight" and e["what"] == "endpoint" and not e["ok"] for e in ev), types
s = json.load(open(f"{d}/summary.json"))
assert s["status"] == "interrupted" and "cannot reach" in s["error"], s
PY
then pass "the log gains no call, no fallback topology, no run_end; the summary says interrupted"
else fail "the resume charged an outcome"; tail -5 crashed/events.jsonl; fi
# A run whose search had finished (only its summary is missing) needs no
# endpoint: every reply it asks again is cached. It resumes, with a warning.
cp -r nomodels ended && rm -f ended/summary.json
expect "a finished search resumes with the endpoint down" "$nm_rc" "resuming anyway: the search had finished" -- \
  "$BIN" run --resume ended --python "$PY"
[[ -f ended/summary.json ]] && pass "and writes its summary" || fail "ended/summary.json missing"

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all preflight e2e checks passed"
