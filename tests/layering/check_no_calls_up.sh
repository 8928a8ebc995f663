#!/bin/sh
# unit.layering.no_calls_up.<layer>: a layer not above api calls nothing that takes
# or belongs to a Communicator. The include probes cannot see this: the public
# headers (boostcomm/communicator.h) are in every layer's scope, so a lower
# layer could still drive a Communicator at run time (fusion and the tuner's
# timing did). The objects can: every symbol they define or need from outside
# is listed, demangled with its parameter types (a function taking a
# Communicator& defined here counts as much as a call).
# usage: check_no_calls_up.sh <layer> <object>...
set -u
layer=$1
shift
[ $# -gt 0 ] || { echo "layer $layer: no objects given"; exit 1; }
listing=$(nm -C "$@") || { echo "nm failed on the objects of layer $layer"; exit 1; }
# Control: the listing is the real one (every layer needs something from outside: the C++ runtime at least).
echo "$listing" | grep -q ' U .*std::' || { echo "layer $layer: no undefined std:: symbol in $# objects: listing unusable"; exit 1; }
bad=$(echo "$listing" | grep -E 'boostcomm::(Communicator|Work)([^A-Za-z0-9_]|$)' | sed 's/^[0-9a-f ]*[A-Za-z] //' | sort -u)
if [ -n "$bad" ]; then
  echo "layer $layer calls the Communicator from below api:"
  echo "$bad"
  exit 1
fi
echo "ok: layer $layer ($# objects) calls nothing of a Communicator"
