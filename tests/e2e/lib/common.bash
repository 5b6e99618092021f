# Shared set-up for the end-to-end tests tests/e2e/*.sh. Sourced, never run
# (ctest runs only the *.sh files directly in tests/e2e/). First thing after
# `set -uo pipefail`:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash" "$@"
#
# It sets BIN (the binary ctest passes as $1, made absolute), PY (the worker's
# Python: $MKEVOLVE_TEST_PYTHON, else /usr/bin/python3), REPO (the repository
# root: ctest's working directory) and T (a temporary directory removed on exit
# unless MKEVOLVE_TEST_KEEP is set; it becomes the working directory and holds
# HOME and XDG_CACHE_HOME), and it
# defines pass, fail (counting failures in $fails) and expect.
BIN=${1:?usage: $(basename "$0") path/to/mkevolve}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
PY=${MKEVOLVE_TEST_PYTHON:-/usr/bin/python3}
REPO=$(pwd)
T=$(mktemp -d)
# MKEVOLVE_TEST_KEEP=1 keeps the directory for a post-mortem (its path is printed).
# Whatever the test started in the background (a fake server, a run it means
# to interrupt) and that still runs is killed on exit, however the test ends
# (a failed check, a ctest timeout's SIGTERM): `jobs -p` lists only this
# shell's own unfinished jobs, so no other process is touched.
on_exit() {
  local left
  left=$(jobs -p)
  if [[ -n $left ]]; then
    kill $left 2>/dev/null
    wait $left 2>/dev/null
  fi
  if [[ -n ${MKEVOLVE_TEST_KEEP:-} ]]; then echo "keeping $T"; else rm -rf "$T"; fi
}
trap on_exit EXIT
trap 'exit 143' TERM
export HOME=$T/home XDG_CACHE_HOME=$T/cache
mkdir -p "$HOME"
cd "$T" || exit 1
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }

# expect NAME STATUS PATTERN -- command...: the exit status, and a pattern
# (extended regex; empty: none) that stdout or stderr must contain.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  if [[ $got -ne $want ]]; then
    fail "$name: exit $got, wanted $want"; sed 's/^/     | /' "$T/out" "$T/err" | head -40; return
  fi
  if [[ -n $pattern ]] && ! grep -qE -- "$pattern" "$T/out" "$T/err"; then
    fail "$name: output lacks /$pattern/"; sed 's/^/     | /' "$T/out" "$T/err" | head -40; return
  fi
  pass "$name"
}

# solution_matches DIR: the package DIR/solution imports as a package (its
# decomposed_solution's ModelNew), and on DIR/problem.py's inputs it gives
# the original Model's outputs (same seed, same init inputs).
solution_matches() {
  (cd "$1" && "$PY" - <<'PY'
import importlib.util, torch
from solution.decomposed_solution import ModelNew
spec = importlib.util.spec_from_file_location("p", "problem.py")
p = importlib.util.module_from_spec(spec); spec.loader.exec_module(p)
torch.manual_seed(0); a = p.Model(*p.get_init_inputs())
torch.manual_seed(0); b = ModelNew(*p.get_init_inputs())
x = p.get_inputs()
assert torch.allclose(a(*x), b(*x), atol=1e-5, rtol=1e-5)
PY
  )
}

# The binary under test must exist (a failed build is a failure, not a skip).
need_binary() {
  [[ -x $BIN ]] || { echo "FAIL no mkevolve binary at $BIN (did the build fail?)"; exit 1; }
}

# The worker's interpreter must have torch; without it the test is skipped.
need_torch() {
  if ! "$PY" -c 'import torch' 2>/dev/null; then echo "skip: $PY has no torch"; exit 0; fi
}
