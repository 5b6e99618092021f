#!/usr/bin/env bash
# Builds MKEvolve and runs every test (C++ unit tests, the Python worker's CPU
# tests, end-to-end tests of the binary). Installs Debian packages if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'test: %s\n' "$*"; }
t0=$SECONDS
say "checking Debian's packages, the test tools too (a fresh machine installs about 260: about 3 minutes)"
./scripts/install-deps.sh --test
say "building build/mkevolve and the unit tests, -O2 without debug info (about 6 minutes on 2 cores the first time)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
say "running every test, the slowest first (about 8 minutes on 2 cores; ctest prints each as it ends)"
cd build
rc=0
ctest --output-on-failure -j"$(nproc)" "$@" || rc=$?
say "done in $(( (SECONDS - t0) / 60 )) min $(( (SECONDS - t0) % 60 )) s (exit $rc)"
exit $rc
