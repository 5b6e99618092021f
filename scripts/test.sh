#!/usr/bin/env bash
# Builds MKEvolve and runs every test (C++ unit tests, the Python worker's CPU
# tests, end-to-end tests of the binary). Installs Debian packages if missing.
# Then checks that nothing the tests started is still running: a process left
# behind (a fake server, a worker, a daemon) has lost its parent and hangs off
# init. It fails the run under CI; elsewhere (other work may share the
# machine) it is a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'test: %s\n' "$*"; }
t0=$SECONDS
say "checking Debian's packages, the test tools too (a fresh machine installs about 260: about 3 minutes)"
./scripts/install-deps.sh --test
say "building build/mkevolve and the unit tests, -O2 without debug info (about 5 minutes on 2 cores the first time)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
say "running every test, the slowest first (about 6.5 minutes on 2 cores; ctest prints each as it ends)"
cd build
rc=0
start=$SECONDS
set +e
# Twice as many tests as cores: about half of a test's time is spent waiting
# (on a server, a deadline, a child), and 2 tests per core keep the cores busy
# (docs/PERFORMANCE.md).
ctest --output-on-failure -j"$(( 2 * $(nproc) ))" "$@"
rc=$?
set -e
sleep 1  # let processes that are on their way out finish
since=$(( SECONDS - start + 1 ))
left=$(ps -eo pid=,ppid=,etimes=,args= | awk -v since="$since" -v me="$$" \
  '$2 == 1 && $3 < since && $1 != me { $2 = ""; $3 = ""; print }')
if [[ -n $left ]]; then
  say "processes started during the tests are still running (orphaned):"
  echo "$left" | sed 's/^/  /'
  if [[ -n ${CI:-} && $rc -eq 0 ]]; then rc=1; fi
fi
say "done in $(( (SECONDS - t0) / 60 )) min $(( (SECONDS - t0) % 60 )) s (exit $rc)"
exit "$rc"
