#!/usr/bin/env bash
# Installs a built boostcomm into a scratch prefix and builds this consumer
# against it twice, through find_package(boostcomm) and through pkg-config,
# then runs both on NP local ranks. `make install-check` calls this.
#
# Usage: examples/consumer/check.sh BUILD_DIR WORK_DIR [NP]
set -euo pipefail

if (($# < 2)); then
  echo "usage: $0 BUILD_DIR WORK_DIR [NP]" >&2
  exit 2
fi
repo_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build_dir=$(realpath "$1")
work_dir=$(realpath -m "$2")
np=${3:-2}
prefix=$work_dir/prefix

# Same environment as `make demo` (root, oversubscribe, CMA fallback).
source "$repo_dir/scripts/mpirun_local.sh"

rm -rf "$work_dir"
mkdir -p "$work_dir"
echo "install-check: installing into $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$work_dir/install.log"
# The installed CLI must find the installed library by itself (RPATH).
if [[ -x "$prefix/bin/boostcomm" ]]; then
  env -u LD_LIBRARY_PATH "$prefix/bin/boostcomm" --version
fi

echo "install-check: find_package(boostcomm) consumer"
cmake -S "$repo_dir/examples/consumer" -B "$work_dir/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$work_dir/cmake-configure.log"
cmake --build "$work_dir/cmake" -j 2
mpirun -np "$np" "$work_dir/cmake/consumer"

echo "install-check: pkg-config consumer"
pc_file=$(find "$prefix" -name boostcomm.pc -print -quit)
if [[ -z "$pc_file" ]]; then
  echo "install-check: no boostcomm.pc under $prefix" >&2
  exit 1
fi
PKG_CONFIG_PATH=$(dirname "$pc_file")
export PKG_CONFIG_PATH
pkg_flags=$(pkg-config --cflags --libs boostcomm)
pkg_libdir=$(pkg-config --variable=libdir boostcomm)
# The .pc must point into the prefix we installed to, not the configure-time one.
if [[ "$pkg_libdir" != "$prefix"/* ]]; then
  echo "install-check: boostcomm.pc libdir '$pkg_libdir' is outside $prefix" >&2
  exit 1
fi
echo "install-check: pkg-config --cflags --libs boostcomm -> $pkg_flags"
# shellcheck disable=SC2086  # pkg_flags is a list of flags
c++ -O2 "$repo_dir/examples/consumer/main.cc" $pkg_flags -Wl,-rpath,"$pkg_libdir" \
    -o "$work_dir/consumer-pkgconfig"
mpirun -np "$np" "$work_dir/consumer-pkgconfig"
echo "install-check: passed (CMake and pkg-config consumers)"
