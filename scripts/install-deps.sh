#!/usr/bin/env bash
# Installs everything MKEvolve needs to build and test, from Debian's packages only.
# Safe to run again: apt-get skips what is already there. Needs root (or sudo).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libtomlplusplus-dev libgtest-dev libgmock-dev libcpp-httplib-dev
  python3 python3-pytest python3-torch python3-numpy
  chromium slurm-wlm munge
)
if [[ "${MKEVOLVE_DEPS_EXTRA:-}" != "" ]]; then
  # shellcheck disable=SC2206
  PKGS+=(${MKEVOLVE_DEPS_EXTRA})
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PKGS[@]} packages already installed"
  exit 0
fi
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
