#!/usr/bin/env bash
# Installs the Debian packages (12 or 13) that boostcomm needs to build, test and run;
# Python packages go into a virtual environment (scripts/make_venv.sh).
#
# Idempotent and quiet when nothing is missing: dpkg-query decides which
# packages are absent, and only then does apt run (one `apt-get update`, one
# `apt-get install`). That keeps `make test` cheap to repeat and lets it work
# offline once everything is installed.
#
# Usage: scripts/install_deps.sh [--check] [PACKAGE...]
#   --check   only report missing packages; exit 1 if any are missing.
#   PACKAGE   more packages to install with the project's (.ci/run: ccache, ninja-build).
set -euo pipefail

# Debian 12 (bookworm) names, checked with apt-cache policy.
readonly kPackages=(
  build-essential
  cmake
  pkg-config
  libopenmpi-dev
  openmpi-bin      # mpirun; pulls openssh-client, which Open MPI's launcher expects
  libhwloc-dev
  libgloo-dev
  nlohmann-json3-dev
  libcli11-dev
  libgtest-dev
  libgmock-dev
  googletest
  libbenchmark-dev
  python3
  # Python module and PyTorch backend (python/): the interpreter's headers;
  # torch, pybind11, numpy, mpi4py, pytest and matplotlib come from PyPI
  # into the project's virtual environment (scripts/make_venv.sh).
  python3-dev
  python3-venv
)

check_only=0
extra=()
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "install_deps: unknown option '$arg' (try --help)" >&2; exit 2 ;;
    *) extra+=("$arg") ;;
  esac
done
packages=("${kPackages[@]}" "${extra[@]}")

if ! command -v dpkg-query >/dev/null 2>&1; then
  # Not Debian: do not guess another package manager's names.
  echo "install_deps: dpkg-query not found; this script knows Debian 12 only." >&2
  echo "install_deps: install the equivalents of: ${packages[*]}" >&2
  exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
  # db:Status-Status is "installed" only for a fully installed package (not
  # for "config-files" leftovers of a removed one).
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install_deps: missing: ${missing[*]}"
((check_only)) && exit 1

sudo_cmd=()
if ((EUID != 0)); then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install_deps: not root and no sudo; run as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi

# env(1) so the variable survives sudo's environment reset.
apt_env=(env DEBIAN_FRONTEND=noninteractive)
"${sudo_cmd[@]}" "${apt_env[@]}" apt-get update
"${sudo_cmd[@]}" "${apt_env[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
echo "install_deps: installed ${missing[*]}"
