#!/usr/bin/env bash
# Installs what MKEvolve needs, from Debian's packages only:
#   scripts/install-deps.sh          to build it and run it (scripts/demo.sh)
#   scripts/install-deps.sh --test   and to run every test (scripts/test.sh): pytest,
#                                    a headless browser (report.sh renders the HTML
#                                    report), Slurm and munge (slurm.sh runs a real cluster)
# Safe to run again: apt-get skips what is already there. Needs root (or sudo).
set -euo pipefail

# The build configures its unit tests too (GTest is found at configure time).
PKGS=(
  build-essential cmake ninja-build pkg-config git
  libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libcli11-dev libfmt-dev
  libtomlplusplus-dev libgtest-dev libgmock-dev
  python3 python3-torch python3-numpy
  libseccomp2
)
if [[ "${1:-}" == "--test" ]]; then
  PKGS+=(python3-pytest chromium slurm-wlm munge)
elif [[ -n "${1:-}" ]]; then
  echo "install-deps: unknown argument '$1' (use --test for the test tools)" >&2
  exit 2
fi
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
