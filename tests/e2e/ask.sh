#!/usr/bin/env bash
# End-to-end test of `mkevolve ask` against exec: and replay: providers.
# Usage: tests/e2e/ask.sh path/to/mkevolve
set -u
BIN=${1:?usage: ask.sh path/to/mkevolve}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
REPO=$(pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/mkevolve-ask-e2e.XXXXXX")
# The fake server below (a background job) is killed however the test ends.
trap 'left=$(jobs -p); [ -n "$left" ] && kill $left 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 143' TERM
cd "$T"   # no ./mkevolve.toml from the repository
export HOME="$T/home" XDG_CACHE_HOME="$T/cache"
mkdir -p "$HOME"
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# 1. Plain-text exec provider: reply on stdout, usage line on stderr, exit 0.
cat > llm.sh <<'EOF'
#!/bin/sh
cat > "$(dirname "$0")/last-request.json"
echo "pong from $MKEVOLVE_AGENT"
EOF
chmod +x llm.sh
out=$("$BIN" ask --llm "exec:$T/llm.sh" --system "be brief" --max-tokens 64 "ping" 2>err.txt); rc=$?
[ "$rc" = 0 ] || fail "exec ask exited $rc: $(cat err.txt)"
[ "$out" = "pong from ask" ] || fail "unexpected reply '$out'"
grep -q "tokens: in [0-9]*, out [0-9]*, cache read 0, cache write 0 (estimated)" err.txt || fail "no usage line: $(cat err.txt)"
grep -q '"max_tokens":64' last-request.json || fail "max_tokens not sent: $(cat last-request.json)"
grep -q '{"content":"be brief","role":"system"}' last-request.json || fail "system prompt not sent"

# 2. ask tests a setup: without --cache every call goes to the endpoint; with
# --cache the same prompt again comes from the cache (the command is not run).
rm -f last-request.json
"$BIN" ask --llm "exec:$T/llm.sh" -s "be brief" --max-tokens 64 "ping" >/dev/null 2>err.txt
[ -e last-request.json ] || fail "a second ask without --cache did not run the command: $(cat err.txt)"
grep -q '{"content":"be brief","role":"system"}' last-request.json || fail "-s did not send the system prompt"
"$BIN" ask --llm "exec:$T/llm.sh" --cache --system "be brief" --max-tokens 64 "ping" >/dev/null 2>&1
rm -f last-request.json
out=$("$BIN" ask --llm "exec:$T/llm.sh" --cache --system "be brief" --max-tokens 64 "ping" 2>err.txt); rc=$?
[ "$rc" = 0 ] && [ "$out" = "pong from ask" ] || fail "cached ask: rc=$rc out='$out'"
grep -q "served from the cache" err.txt || fail "second ask not cached: $(cat err.txt)"
[ ! -e last-request.json ] || fail "cached ask ran the command"
"$BIN" ask --llm "exec:$T/llm.sh" --no-cache --system "be brief" --max-tokens 64 "ping" >/dev/null 2>&1
[ -e last-request.json ] || fail "--no-cache did not run the command"

# 2b. The prompt from stdin: with no prompt argument and a pipe, or with '-'.
out=$(echo "piped prompt" | "$BIN" ask --llm "exec:$T/llm.sh" 2>err.txt); rc=$?
[ "$rc" = 0 ] && [ "$out" = "pong from ask" ] || fail "piped ask: rc=$rc out='$out' $(cat err.txt)"
grep -q "piped prompt" last-request.json || fail "the piped prompt was not sent: $(cat last-request.json)"
echo "dash prompt" | "$BIN" ask --llm "exec:$T/llm.sh" - >/dev/null 2>&1
grep -q "dash prompt" last-request.json || fail "'-' did not read stdin"
"$BIN" ask --llm "exec:$T/llm.sh" </dev/null >/dev/null 2>err.txt; rc=$?
[ "$rc" = 2 ] && grep -q "the prompt is empty" err.txt || fail "an empty stdin: rc=$rc $(cat err.txt)"

# 3. Chat-completion JSON with usage, --json output, and --record.
cat > json.sh <<'EOF'
#!/bin/sh
cat >/dev/null
echo '{"choices":[{"message":{"content":"json hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3}}'
EOF
chmod +x json.sh
out=$("$BIN" ask --llm "exec:$T/json.sh" --no-cache --record "$T/rec.jsonl" --json "hi" 2>err.txt); rc=$?
[ "$rc" = 0 ] || fail "json ask exited $rc: $(cat err.txt)"
echo "$out" | grep -q '"reply":"json hi"' || fail "json reply: $out"
echo "$out" | grep -q '"input":12' || fail "json usage: $out"
grep -q '"fingerprint"' rec.jsonl || fail "no recording written"

# 4. The recording replays without the command.
out=$("$BIN" ask --llm "replay:$T/rec.jsonl" "hi" 2>err.txt); rc=$?
[ "$rc" = 0 ] && [ "$out" = "json hi" ] || fail "replay: rc=$rc out='$out' $(cat err.txt)"
"$BIN" ask --llm "replay:$T/rec.jsonl" "something else" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 2 ] || fail "unmatched replay exited $rc"
grep -q "no recorded reply for agent=ask task=ask" err.txt || fail "unmatched replay message: $(cat err.txt)"

# 5. A failing command: exit status and stderr tail.
printf '#!/bin/sh\ncat >/dev/null\necho "quota exhausted" >&2\nexit 4\n' > bad.sh
chmod +x bad.sh
"$BIN" ask --llm "exec:$T/bad.sh" --no-cache --retries 0 "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 1 ] || fail "failing command exited $rc"
grep -q "exit 4; stderr: quota exhausted" err.txt || fail "no stderr tail: $(cat err.txt)"

# 6. Bad input: exit 2 with one clear line.
"$BIN" ask --llm "opnai:gpt-4o" "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 2 ] || fail "unknown provider exited $rc"
grep -q "unknown LLM provider 'opnai'.*did you mean 'openai:gpt-4o'" err.txt || fail "unknown provider message: $(cat err.txt)"
[ "$(wc -l < err.txt)" = 1 ] || fail "unknown provider message is not one line"
"$BIN" ask --llm "openai:" "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 2 ] && grep -q "names no model" err.txt || fail "missing model: rc=$rc $(cat err.txt)"
# No LLM anywhere: "missing" (exit 3), in the words `run` uses.
env -u MKEVOLVE_LLM -u ANTHROPIC_API_KEY -u OPENAI_API_KEY "$BIN" ask "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 3 ] && grep -q "no LLM: pass --llm SPEC.*ANTHROPIC_API_KEY or OPENAI_API_KEY" err.txt ||
  fail "no provider: rc=$rc $(cat err.txt)"
env -u MKEVOLVE_LLM -u ANTHROPIC_API_KEY -u OPENAI_API_KEY "$BIN" run "$REPO/examples/sessions/mlp_small.py" \
  --out "$T/r_nollm" --test-cpu-unsafe >/dev/null 2>err_run.txt
grep -qF "$(sed -n 's/^mkevolve ask: //p' err.txt | head -1)" err_run.txt ||
  fail "ask and run word a missing LLM differently: $(cat err.txt) / $(cat err_run.txt)"
# An API key alone picks its provider's default model, and says so (the README's promise).
env -u MKEVOLVE_LLM -u ANTHROPIC_API_KEY OPENAI_API_KEY=sk-test-000000000000 OPENAI_BASE_URL=http://127.0.0.1:9/v1 \
  "$BIN" ask "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 3 ] && grep -q "LLM: openai:gpt-5 (OPENAI_API_KEY is set; choose another with --llm)" err.txt ||
  fail "a key alone: rc=$rc $(cat err.txt)"
"$BIN" ask --llm "exec:true" --config "$T/missing.toml" "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 2 ] && grep -q "missing.toml" err.txt || fail "missing config: rc=$rc $(cat err.txt)"

# 7. An unreachable endpoint: exit 3 and what to check.
"$BIN" ask --llm openai:m --base-url http://127.0.0.1:9/v1 --retries 0 --no-cache "x" >/dev/null 2>err.txt; rc=$?
[ "$rc" = 3 ] && grep -q "cannot reach openai" err.txt || fail "unreachable: rc=$rc $(cat err.txt)"
# A closed port is final at once (issue: 7 attempts took 43 s to say so): the
# default retries are not spent on it, and no retry is announced.
start=$(date +%s)
"$BIN" ask --llm openai:m --base-url http://127.0.0.1:9/v1 "x" >/dev/null 2>err.txt; rc=$?
secs=$(( $(date +%s) - start ))
[ "$rc" = 3 ] && [ "$secs" -le 5 ] && ! grep -q "retrying" err.txt ||
  fail "a closed port is not final at once: rc=$rc, ${secs} s: $(cat err.txt)"
# A server that answers 503 is worth waiting for: each wait before a retry is
# said on stderr (no seconds of silence).
cat > srv503.py <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        b = b'{"error": {"message": "overloaded"}}'
        self.send_response(503)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
srv.timeout = 30
for _ in range(10):  # bounded: a handful of requests, then it stops by itself
    srv.handle_request()
PY
PY_BIN=${MKEVOLVE_TEST_PYTHON:-/usr/bin/python3}
"$PY_BIN" srv503.py port503 & SRV=$!
for _ in $(seq 100); do [ -s port503 ] && break; sleep 0.05; done
printf '[llm]\ninitial_backoff_s = 0.1\nmax_backoff_s = 0.2\n' > fast.toml
"$BIN" ask --llm openai:m --base-url "http://127.0.0.1:$(cat port503)/v1" --config fast.toml --retries 1 "x" \
  >/dev/null 2>err.txt; rc=$?
kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null
[ "$rc" = 1 ] && grep -qE "attempt 1 of 2 failed \(503 from openai.*\); retrying in [0-9.]+ s" err.txt ||
  fail "retry notice: rc=$rc $(cat err.txt)"

# 8. The provider and prices from a config file; an alias.
cat > mkevolve.toml <<EOF
[llm]
provider = "mine"
[llm.providers.mine]
spec = "exec:$T/json.sh"
[llm.prices."exec:$T/json.sh"]
input = 1000000.0
output = 2000000.0
EOF
out=$("$BIN" ask --no-cache "hi" 2>err.txt); rc=$?
[ "$rc" = 0 ] && [ "$out" = "json hi" ] || fail "config provider: rc=$rc out='$out' $(cat err.txt)"
grep -q 'cost \$18.000000' err.txt || fail "no cost in usage line: $(cat err.txt)"

if [ "$fails" -gt 0 ]; then
  echo "ask.sh: $fails failure(s)" >&2
  exit 1
fi
echo "ask.sh: all checks passed"
