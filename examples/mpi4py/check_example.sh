#!/bin/sh
# ctest mpi.interposer.mpi4py_example.np2: train.py gives the same parameters
# (checksum) with and without libboostcomm_mpi.so preloaded, and the
# interposer really routed its allreduces (BOOSTCOMM_MPI_STATS report).
# usage: check_example.sh <libboostcomm_mpi.so> [python with mpi4py, default python3]
set -u
here=$(dirname "$0")
python=${2:-python3}
run() { mpirun --oversubscribe --bind-to none -np 2 "$@" "$python" "$here/train.py" --steps 2 2>&1; }
plain=$(run) || { echo "$plain"; exit 1; }
pre=$(run -x LD_PRELOAD="$1" -x BOOSTCOMM_MPI_STATS=1) || { echo "$pre"; exit 1; }
echo "$plain"
echo "$pre"
a=$(echo "$plain" | grep '^checksum')
b=$(echo "$pre" | grep '^checksum')
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "checksums differ: '$a' vs '$b'"; exit 1; }
echo "$pre" | grep -Eq 'boostcomm_mpi: allreduce +[1-9][0-9]* ' || { echo "no routed allreduce reported"; exit 1; }
echo "ok: identical checksum, allreduces routed"
