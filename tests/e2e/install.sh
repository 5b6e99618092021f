#!/usr/bin/env bash
# Install and first contact (issue 14, findings 5-7): `cmake --install` gives a
# bin/mkevolve that finds its worker, prompts and examples beside itself (not
# in the source tree), says where it found them, and evaluates from there; a
# wrong MKEVOLVE_HOME is a clear error, not a Python traceback; -V, version
# and `help CMD` work; a misspelt config key is a warning naming file:line and
# the key it resembles; $MKEVOLVE_LLM picks the LLM when --llm is absent.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
need_binary
BUILD=$(dirname "$BIN")
[[ -f $BUILD/cmake_install.cmake ]] || { echo "skip: $BUILD is not a CMake build folder"; exit 0; }

PREFIX=$T/prefix
if ! cmake --install "$BUILD" --prefix "$PREFIX" >install.log 2>&1; then
  fail "cmake --install"; sed 's/^/     | /' install.log | tail -20; exit 1
fi
IBIN=$PREFIX/bin/mkevolve
SHARE=$PREFIX/share/mkevolve
for f in "$IBIN" "$SHARE/worker/mkevolve_worker/__main__.py" "$SHARE/prompts/generate.md" \
         "$SHARE/examples/problems/01_relu.py"; do
  [[ -e $f ]] && pass "installed ${f#"$PREFIX"/}" || fail "not installed: ${f#"$PREFIX"/}"
done

# The installed binary is stripped (the build's own keeps its debug information).
size_mb=$(( $(stat -c %s "$IBIN") / 1048576 ))
if readelf -S "$IBIN" 2>/dev/null | grep -q '\.debug_info'; then fail "the installed binary has debug information (${size_mb} MB)"
else pass "the installed binary is stripped (${size_mb} MB)"; fi

expect "--version names the installed files" 0 "files: $SHARE\$" -- env -u MKEVOLVE_HOME "$IBIN" --version
expect "-V" 0 "^mkevolve [0-9]" -- "$IBIN" -V
expect "version" 0 "^mkevolve [0-9]" -- "$IBIN" version
expect "help run is run --help" 0 "--resume" -- "$IBIN" help run
expect "help of an unknown command" 2 "unknown command 'rnu', did you mean 'run'" -- "$IBIN" help rnu

# The installed copy evaluates from its own share/ (test mode, a torch candidate).
if "$PY" -c 'import torch' 2>/dev/null; then
  cat >cand.py <<'PY'
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)
PY
  expect "the installed binary evaluates" 0 "correct" -- env -u MKEVOLVE_HOME "$IBIN" eval \
    --problem "$SHARE/examples/problems/01_relu.py" --kernel cand.py --python "$PY" --test-cpu-unsafe \
    --allow-pytorch --no-perf --trials 1 --no-cache
  expect "a wrong MKEVOLVE_HOME says where it looked" 3 "MKEVOLVE_HOME is $T/nowhere" -- \
    env MKEVOLVE_HOME="$T/nowhere" "$IBIN" eval --problem "$SHARE/examples/problems/01_relu.py" --kernel cand.py \
    --python "$PY" --test-cpu-unsafe --allow-pytorch --no-perf --trials 1 --no-cache
  if grep -q "Traceback" "$T/err"; then fail "a Python traceback for a wrong MKEVOLVE_HOME"; fi

  # A misspelt key: a warning with the file, the line and the near miss; the run goes on.
  printf '[llm]\nprovder = "openai:x"\nconcurrency = 2\n' >mkevolve.toml
  expect "a misspelt config key is named" 0 "mkevolve.toml:2: unknown key 'llm.provder' \(ignored\); did you mean 'llm.provider'\?" -- \
    "$IBIN" eval --problem "$SHARE/examples/problems/01_relu.py" --kernel cand.py --python "$PY" --test-cpu-unsafe \
    --allow-pytorch --no-perf --trials 1 --no-cache
  rm mkevolve.toml
else
  echo "skip: $PY has no torch (the installed evaluation)"
fi

# CLI11's errors read like the others: the command's name, no raw numeric limits.
expect "a bad number is one plain line" 2 "^mkevolve ask: --timeout: Value -5 must be a number of at least 0" -- \
  "$IBIN" ask --llm exec:true --timeout -5 hi
if grep -q "17976931348623" "$T/err"; then fail "CLI11's raw limit is shown"; else pass "no raw limit shown"; fi

# $MKEVOLVE_LLM when --llm is absent; --llm wins over it.
cat >llm.sh <<'SH'
#!/bin/sh
cat >/dev/null
echo "pong from $(basename "$0")"
SH
cp llm.sh other.sh
chmod +x llm.sh other.sh
expect "\$MKEVOLVE_LLM picks the LLM" 0 "^pong from llm.sh" -- env MKEVOLVE_LLM="exec:$T/llm.sh" "$IBIN" ask --no-cache ping
expect "--llm wins over \$MKEVOLVE_LLM" 0 "^pong from other.sh" -- \
  env MKEVOLVE_LLM="exec:$T/llm.sh" "$IBIN" ask --llm "exec:$T/other.sh" --no-cache ping

[[ $fails -eq 0 ]] && echo "all install checks passed" || { echo "$fails failed"; exit 1; }
