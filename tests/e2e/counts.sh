#!/usr/bin/env bash
# Issue 13: every view of one run agrees on its counts, and output a script can
# trust. CPU only, with Debian's torch: the HAND-WRITTEN FIXTURE session
# (examples/sessions/mlp_small_cpu.jsonl, its "kernels" PyTorch stand-ins)
# replayed with the real worker in its CPU test mode.
#
# - --events-json: stdout holds only JSON lines, each durable event once (with
#   seq and ts); its llm_call lines, events.jsonl, summary.json, report.md and
#   report.html agree on the number of LLM calls, the kernel calls and tokens.
# - The plain status lines: the last iteration's line gives the calls logged
#   up to it; a "new best" line only for an iteration whose end-to-end check passed.
# - Resuming a finished run under --events-json prints JSON only on stdout.
# - The reports say TEST MODE and name the LLM; the manifest does not claim
#   "no PyTorch subkernels" for stand-ins.
# - Ctrl-C (SIGINT) while the decomposition call is in flight, then resume:
#   no false fallback is logged, the resume does not diverge from the log, and
#   the result equals an uninterrupted run's.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_torch

PROBLEM=$REPO/examples/sessions/mlp_small.py        # hand-written fixture problem
SESSION=$REPO/examples/sessions/mlp_small_cpu.jsonl  # hand-written fixture session
RUN=(--python "$PY" --test-cpu-unsafe --iterations 2 --calls-per-iter 4 --refine-every 3 --decompose-workers 1
     --trials 2 --perf-trials 2 --warmup 1 --timeout 120)

# ---- one run under --events-json ------------------------------------------------------
"$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out ej "${RUN[@]}" --events-json >ej.out 2>ej.err
rc=$?
if [[ $rc -ne 0 ]]; then fail "--events-json run: exit $rc"; sed 's/^/     | /' ej.err | tail -20; exit 1; fi
pass "--events-json run"

# The counts as each view states them, compared in one place.
if "$PY" - ej ej.out <<'PY'
import json, re, sys
d, out = sys.argv[1], sys.argv[2]
lines = [l for l in open(out).read().splitlines() if l.strip()]
stream = []
for i, l in enumerate(lines, 1):
    try:
        stream.append(json.loads(l))
    except ValueError:
        sys.exit(f"stdout line {i} is not JSON: {l[:120]!r}")
log = [json.loads(l) for l in open(d + "/events.jsonl")]
KERNEL = {"generate", "debug", "optimize", "postfuse"}
calls = [e for e in log if e["type"] == "llm_call"]
n, k = len(calls), sum(e["agent"] in KERNEL for e in calls)
tokens = sum(sum(e["usage"][f] for f in ("input", "output", "cache_read", "cache_write"))
             for e in calls if not e.get("cached"))
errs = []
def same(what, got, want):
    if got != want: errs.append(f"{what}: {got}, events.jsonl: {want}")
# --events-json: every durable event once, as logged.
durable = [e for e in stream if "seq" in e]
same("--events-json durable events", [e["seq"] for e in durable], [e["seq"] for e in log])
same("--events-json llm_call lines", sum(e["type"] == "llm_call" for e in stream), n)
same("--events-json llm_call lines without seq", sum(e["type"] == "llm_call" and "seq" not in e for e in stream), 0)
# summary.json
s = json.load(open(d + "/summary.json"))
same("summary.json calls", s["calls"], n)
same("summary.json tokens", s["tokens"]["total"], tokens)
# The last iteration event: the calls made up to it.
its = [i for i, e in enumerate(log) if e["type"] == "iteration"]
same("last iteration's calls_used", log[its[-1]]["calls_used"], sum(e["type"] == "llm_call" for e in log[:its[-1]]))
# report.md: "- LLM: N calls (K of M in the kernel budget; ...)"
md = open(d + "/report.md").read()
m = re.search(r"^- LLM: (\d+) calls \((\d+) of (\d+) in the kernel budget", md, re.M)
if not m: errs.append("report.md has no '- LLM: N calls (K of M in the kernel budget' line")
else:
    same("report.md calls", int(m.group(1)), n)
    same("report.md kernel calls", int(m.group(2)), k)
    if k > int(m.group(3)): errs.append(f"report.md: {k} kernel calls over a budget of {m.group(3)}")
# report.html's LLM card.
html = open(d + "/report.html").read()
m = re.search(r"(\d+) calls \u00b7 (\d+) of (\d+) in the kernel budget", html)
if not m: errs.append("report.html's LLM card lacks 'N calls \u00b7 K of M in the kernel budget'")
else:
    same("report.html calls", int(m.group(1)), n)
    same("report.html kernel calls", int(m.group(2)), k)
if errs: sys.exit("\n".join(errs))
print(f"     {n} LLM calls ({k} kernel calls), {tokens} tokens in every view")
PY
then pass "counts agree: --events-json, events.jsonl, summary.json, report.md, report.html"
else fail "counts disagree"; fi

grep -q 'TEST MODE' ej/report.md && grep -q 'TEST MODE' ej/report.html && pass "reports say TEST MODE" ||
  fail "a report of a CPU test-mode run lacks TEST MODE"
grep -qE '^- Model: .*replay:' ej/report.md && pass "report.md names the LLM" || fail "report.md does not name the LLM"
if "$PY" -c 'import json,sys; m=json.load(open("ej/solution/manifest.json")); sys.exit(0 if m.get("test_mode") is True and m.get("contains_pytorch_subkernels") is None else 1)'
then pass "manifest: test_mode, contains_pytorch_subkernels unknown (null)"
else fail "manifest claims to know whether the stand-ins are PyTorch"; fi

# A finished run resumed under --events-json: JSON only on stdout.
"$BIN" run --resume ej --python "$PY" --events-json >ej2.out 2>ej2.err
rc=$?
if [[ $rc -eq 0 ]] && "$PY" -c '
import json, sys
ls = [l for l in open("ej2.out").read().splitlines() if l.strip()]
ev = [json.loads(l) for l in ls]
sys.exit(0 if ev and ev[-1]["type"] == "run_end" else 1)' 2>/dev/null
then pass "resume of a finished run under --events-json: JSON only on stdout"
else fail "resume of a finished run under --events-json (exit $rc)"; sed 's/^/     | /' ej2.out | head -5; fi

# ---- the same run, plain status lines -----------------------------------------------------
"$BIN" run "$PROBLEM" --llm "replay:$SESSION" --out pl "${RUN[@]}" >pl.out 2>pl.err
rc=$?
if [[ $rc -ne 0 ]]; then fail "plain run: exit $rc"; sed 's/^/     | /' pl.err | tail -20
else
  if "$PY" - pl pl.out pl.err <<'PY'
import json, re, sys
d = sys.argv[1]
text = open(sys.argv[2]).read() + open(sys.argv[3]).read()
log = [json.loads(l) for l in open(d + "/events.jsonl")]
its = [(i, e) for i, e in enumerate(log) if e["type"] == "iteration"]
done = re.findall(r"t=(\d+)/\d+ done: .*; (\d+) LLM calls, ", text)
errs = []
if len(done) != len(its): errs.append(f"{len(done)} 'done' lines for {len(its)} iterations")
for (t, shown), (i, e) in zip(done, its):
    logged = sum(x["type"] == "llm_call" for x in log[:i])
    if int(shown) != logged: errs.append(f"t={t}: the status line says {shown} LLM calls, the log holds {logged}")
bests = [int(t) for t in re.findall(r"new best: .* at t=(\d+)", text)]
bests += [int(t) for t in re.findall(r"new best at t=(\d+): correct end to end", text)]
ok = {e["t"] for _, e in its if e["e2e"]["status"] == "correct"}
for t in bests:
    if t not in ok: errs.append(f"'new best' at t={t}, whose end-to-end check did not pass")
if "new best: \u2014" in text: errs.append("a 'new best' whose speedup is shown as a dash, not said to be unknown")
if not bests: errs.append("no 'new best' line, though the run found a correct solution")
if errs: sys.exit("\n".join(errs))
PY
  then pass "status lines: calls as logged; 'new best' only for a passed iteration"
  else fail "status lines disagree with the log"; fi
fi

# ---- Ctrl-C during the decomposition, then resume -----------------------------------------
# An exec: provider answers from a recording of the fixture session; its
# decompose reply waits for a flag file, so the SIGINT lands inside that call.
source "$REPO/tests/e2e/lib/exec_session.bash"
cat >slow.py <<'PY'
import os, runpy, sys, time
if os.environ["MKEVOLVE_AGENT"] == "decompose" and os.environ.get("MK_TEST_HOLD"):
    open(os.environ["MK_TEST_HOLD"] + ".in", "w").close()
    while not os.path.exists(os.environ["MK_TEST_HOLD"] + ".go"):
        time.sleep(0.05)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
SLOW=(--llm "exec:$PY $T/slow.py $T/serve.py $T/rec.jsonl" "${SMALL[@]}")
MK_TEST_CALL_LOG=$T/base.calls "$BIN" run "$PROBLEM" --out base "${SLOW[@]}" >base.out 2>&1 ||
  { fail "uninterrupted run"; sed 's/^/     | /' base.out | tail -20; }
MK_TEST_HOLD=$T/hold MK_TEST_CALL_LOG=$T/ci.calls "$BIN" run "$PROBLEM" --out ci "${SLOW[@]}" >ci.out 2>&1 &
pid=$!
for _ in $(seq 1 600); do [[ -e hold.in ]] && break; sleep 0.05; done
if [[ ! -e hold.in ]]; then fail "the decomposition call never started"; kill -9 "$pid"; wait "$pid"
else
  kill -INT "$pid"
  sleep 0.5
  touch hold.go
  wait "$pid"
  rc=$?
  [[ $rc -eq 130 ]] && pass "Ctrl-C during the decomposition: exit 130" || { fail "Ctrl-C: exit $rc"; tail -5 ci.out; }
  if grep -q '"change":"fallback"' ci/events.jsonl; then fail "Ctrl-C logged a fallback decomposition"
  else pass "no fallback decomposition logged for an interrupted call"; fi
  MK_TEST_CALL_LOG=$T/ci.resume.calls "$BIN" run --resume ci --python "$PY" >ci.resume.out 2>&1
  rc=$?
  [[ $rc -eq 0 ]] && pass "resume after Ctrl-C" || { fail "resume after Ctrl-C: exit $rc"; tail -10 ci.resume.out; }
  if grep -q 'diverged' ci.resume.out; then fail "the resume diverged from its log"; grep diverged ci.resume.out
  else pass "the resume follows its log"; fi
  if cmp -s <(shape base) <(shape ci); then pass "same events and decisions as the uninterrupted run"
  else fail "events differ from the uninterrupted run"; diff <(shape base) <(shape ci) | head -10; fi
  [[ "$(py_files base)" == "$(py_files ci)" ]] && pass "same solution files" || fail "solution files differ"
  # The resumed run's views count what its log holds (each call once, the
  # tokens billed before and after the resume), never the resumed process's tally.
  if "$PY" - ci <<'PY'
import json, re, sys
d = sys.argv[1]
calls = [json.loads(l) for l in open(d + "/events.jsonl")]
calls = [e for e in calls if e["type"] == "llm_call"]
n = len(calls)
tokens = sum(sum(e["usage"][f] for f in ("input", "output", "cache_read", "cache_write"))
             for e in calls if not e.get("cached"))
s = json.load(open(d + "/summary.json"))
m = re.search(r"^- LLM: (\d+) calls", open(d + "/report.md").read(), re.M)
got = (s["calls"], s["tokens"]["total"], int(m.group(1)) if m else None)
sys.exit(0 if got == (n, tokens, n) else f"summary.json calls, tokens, report.md calls: {got}; the log: {n}, {tokens}")
PY
  then pass "after the resume: summary.json and report.md count the log's calls and tokens"
  else fail "after the resume, the counts disagree with the log"; fi
fi

if [[ $fails -ne 0 ]]; then echo "$fails counts check(s) failed"; exit 1; fi
echo "all counts checks passed"
