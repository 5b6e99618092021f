#!/usr/bin/env bash
# Pre-flight (issue 14, finding 2): a broken problem file is found before any
# LLM call is paid for. `mkevolve run` loads the problem and runs its reference
# once where it will be evaluated (CPU test mode here), and on failure exits 2
# naming the file and the fault; the LLM (an exec: command that counts its
# calls) is never asked. A sound problem still runs.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
[[ -x $BIN ]] || { echo "FAIL no mkevolve binary at $BIN (did the build fail?)"; exit 1; }
if ! "$PY" -c 'import torch' 2>/dev/null; then echo "skip: $PY has no torch"; exit 0; fi

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
  if "$PY" - "r_$name" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
assert s["status"] == "failed" and "no LLM" not in s.get("error", "") and s.get("error"), s
ev = [json.loads(l) for l in open(f"{d}/events.jsonl")]
pf = [e for e in ev if e.get("type") == "preflight"]
assert len(pf) == 1 and pf[0]["what"] == "problem" and pf[0]["ok"] is False and pf[0]["message"], pf
assert not [e for e in ev if e.get("type") == "llm_call"], "an llm_call event"
PY
  then pass "$name: summary failed, one preflight record, no llm_call"; else fail "$name: summary or events"; fi
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
if "$PY" - dead <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/summary.json"))
assert s["status"] == "failed" and "127.0.0.1:9" in s["error"], s
ev = [json.loads(l) for l in open(f"{d}/events.jsonl")]
pf = [e for e in ev if e.get("type") == "preflight" and e["what"] == "endpoint"]
assert len(pf) == 1 and not pf[0]["ok"], pf
assert not [e for e in ev if e.get("type") in ("llm_call", "topology")], [e["type"] for e in ev]
PY
then pass "unreachable: summary failed, one endpoint preflight record, no call, no false fallback"
else fail "unreachable: summary or events"; fi

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
if grep -q "^GET /v1/models" srv.log && grep -q "^POST /v1/chat/completions" srv.log; then
  pass "a server without /models is probed once and then used"
else fail "a server without /models"; cat srv.log nm.out | tail -20; fi
kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null

if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all preflight e2e checks passed"
