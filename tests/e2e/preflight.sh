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
if [[ $fails -ne 0 ]]; then echo "$fails e2e check(s) failed"; exit 1; fi
echo "all preflight e2e checks passed"
