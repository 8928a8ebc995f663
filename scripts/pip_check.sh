#!/usr/bin/env bash
# `pip install .` as a user runs it, checked: a fresh virtual environment with
# torch pinned (the CPU build, from python/requirements.txt), then boostcomm
# from this source tree with pip's build isolation, then, with no PYTHONPATH:
# the package, the torch backend and the `boostcomm` command import and run,
# and a 2-rank torchrun job allreduces on init_process_group("boostcomm").
# `make install-check` calls this (CI).
#
# Usage: scripts/pip_check.sh [WORK_DIR [CMAKE_DIR]]   (default build/pip-check)
#   The wheel's CMake tree stays in CMAKE_DIR (default WORK_DIR/cmake), so a
#   rerun is incremental. .ci/run puts it beside build/ (build-pip-check), at
#   the same depth, so that ccache can hand it make build's objects.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(realpath -m "${1:-$repo/build/pip-check}")
venv=$work/venv
cmake_dir=$(realpath -m "${2:-$work/cmake}")
base=${BOOSTCOMM_BASE_PYTHON:-python3}
start_s=$SECONDS

rm -rf "$venv"
mkdir -p "$work"
"$base" -m venv "$venv"
torch_pin=$(grep -E '^torch==' "$repo/python/requirements.txt")
echo "pip-check: $torch_pin into a fresh environment ($venv)"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$torch_pin" numpy >"$work/pip-torch.log" 2>&1 \
  || { tail -20 "$work/pip-torch.log"; echo "pip-check: pip install $torch_pin failed" >&2; exit 1; }
echo "pip-check: pip install $repo"
"$venv/bin/pip" install --disable-pip-version-check -C build-dir="$cmake_dir" "$repo" >"$work/pip.log" 2>&1 \
  || { tail -40 "$work/pip.log"; echo "pip-check: pip install failed (log: $work/pip.log)" >&2; exit 1; }

cd "$work"  # nothing of the source tree on the path
env -u PYTHONPATH "$venv/bin/python" - <<'PY'
import importlib.util, os
import torch
import boostcomm, boostcomm.torch
import ascend_boost_comm  # the founding document's name for the package
for name in ("boostcomm", "boostcomm._boostcomm", "boostcomm._boostcomm_torch", "ascend_boost_comm"):
    where = importlib.util.find_spec(name).origin
    assert "site-packages" in where, f"{name} imported from {where}"
print("pip-check: boostcomm", boostcomm.__file__, "torch", torch.__version__)
PY
env -u PYTHONPATH "$venv/bin/boostcomm" --version
cat >"$work/allreduce.py" <<'PY'
import os
import torch, torch.distributed as dist
import boostcomm.torch  # registers the backend
dist.init_process_group("boostcomm")
t = torch.full((5,), float(dist.get_rank() + 1))
dist.all_reduce(t)
assert torch.equal(t, torch.full((5,), 3.0)), t
# One write(2) of the whole line: the two ranks share torchrun's output pipe,
# and print()'s text and newline could interleave with the other rank's line.
os.write(1, f"pip-check: rank {dist.get_rank()} allreduce ok on {dist.get_backend()}\n".encode())
dist.destroy_process_group()
PY
out=$(env -u PYTHONPATH "$venv/bin/torchrun" --standalone --nproc-per-node 2 "$work/allreduce.py" 2>&1) \
  || { echo "$out"; echo "pip-check: the torchrun job failed" >&2; exit 1; }
grep "pip-check" <<<"$out"
[[ $(grep -o "rank [01] allreduce ok" <<<"$out" | sort -u | wc -l) == 2 ]] || { echo "$out"; echo "pip-check: not every rank reported" >&2; exit 1; }
echo "pip-check: ok in $((SECONDS - start_s)) s"
