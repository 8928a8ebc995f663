#!/usr/bin/env bash
# Creates (or brings up to date) the project's Python virtual environment:
# the interpreter `make` builds the Python module and the PyTorch backend for
# and runs the Python tests with. Packages from python/requirements.txt
# (torch pinned to the CPU build CI tests); pip runs only when that file
# changed since the last run, so `make test` stays cheap to repeat.
#
# Usage: scripts/make_venv.sh [VENV_DIR [TORCH_REQUIREMENT]]
#   VENV_DIR           default .venv
#   TORCH_REQUIREMENT  replaces the torch line of python/requirements.txt
#                      (`make torch-check`: torch==2.14.1)
#   BOOSTCOMM_BASE_PYTHON  the interpreter to create it from (default: python3 on PATH)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv=${1:-.venv}
requirements=python/requirements.txt
if [[ -n ${2:-} ]]; then
  mkdir -p "$venv"
  sed "s/^torch==.*/$2/" python/requirements.txt > "$venv/requirements.txt"
  requirements=$venv/requirements.txt
fi
base=${BOOSTCOMM_BASE_PYTHON:-python3}
stamp=$venv/.boostcomm-requirements

if [[ ! -x $venv/bin/python ]]; then
  echo "make_venv: creating $venv from $($base -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  "$base" -m venv "$venv"
  rm -f "$stamp"  # a new interpreter: whatever the stamp says, its packages are gone
fi
if [[ -f $stamp ]] && cmp -s "$stamp" "$requirements" && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "make_venv: $venv up to date ($(cd "$venv" && bin/python -c 'import torch; print("torch", torch.__version__)'))"
  exit 0
fi
log=$venv/pip-install.log
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >"$log" 2>&1; then
  grep -v "is ignored: it is neither a file nor a directory" "$log" | tail -20 >&2
  echo "make_venv: pip install -r $requirements failed (log: $log)" >&2
  exit 1
fi
"$venv/bin/python" -c 'import torch, numpy, mpi4py, pytest, matplotlib, pybind11' \
  || { echo "make_venv: $venv lacks packages of $requirements" >&2; exit 1; }
cp "$requirements" "$stamp"
echo "make_venv: $venv ready ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'))"
