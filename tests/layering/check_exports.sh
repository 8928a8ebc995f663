#!/bin/sh
# unit.layering.no_test_symbols: libboostcomm.so exports none of the test-only
# code (the in-process transport and groups live in bc_testing, tests/testing/).
# usage: check_exports.sh <libboostcomm.so>
set -u
lib=$1
symbols=$(nm -D --defined-only -C "$lib") || { echo "nm failed on $lib"; exit 1; }
# Control: the listing is the real one (a public entry point is there).
echo "$symbols" | grep -q 'boostcomm::Communicator::allreduce' || {
  echo "no boostcomm::Communicator::allreduce in the exports of $lib: nm listing unusable"; exit 1; }
bad=$(echo "$symbols" | grep -Ei 'inproc|InProcess|boostcomm::testing')
if [ -n "$bad" ]; then
  echo "test-only symbols exported by $lib:"
  echo "$bad"
  exit 1
fi
echo "ok: $(echo "$symbols" | wc -l) exported symbols, none test-only"
