#!/usr/bin/env bash
# Builds MKEvolve and runs every test (C++ unit tests, the Python worker's CPU
# tests, end-to-end tests of the binary). Installs Debian packages if missing.
# Then checks that nothing the tests started is still running: a process left
# behind (a fake server, a worker, a daemon) has lost its parent and hangs off
# init. It fails the run under CI; elsewhere (other work may share the
# machine) it is a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
cd build
start=$(date +%s)
set +e
ctest --output-on-failure -j"$(nproc)" "$@"
rc=$?
set -e
sleep 1  # let processes that are on their way out finish
since=$(( $(date +%s) - start + 1 ))
left=$(ps -eo pid=,ppid=,etimes=,args= | awk -v since="$since" -v me="$$" \
  '$2 == 1 && $3 < since && $1 != me { $2 = ""; $3 = ""; print }')
if [[ -n $left ]]; then
  echo "test.sh: processes started during the tests are still running (orphaned):"
  echo "$left" | sed 's/^/  /'
  if [[ -n ${CI:-} && $rc -eq 0 ]]; then rc=1; fi
fi
exit "$rc"
