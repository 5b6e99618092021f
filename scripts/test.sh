#!/usr/bin/env bash
# Builds MKEvolve and runs every test (C++ unit tests, the Python worker's CPU
# tests, end-to-end tests of the binary). Installs Debian packages if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh --test
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
