#!/bin/sh
# Runs a command and checks its exit status and that its output (stdout and
# stderr together) matches every pattern (grep -E).
# usage: expect_output.sh <ok|fail> <pattern>... -- <command>...
set -u
want=$1
shift
patterns=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  patterns="$patterns
$1"
  shift
done
shift
out=$("$@" 2>&1)
rc=$?
echo "$out"
if [ "$want" = ok ] && [ "$rc" -ne 0 ]; then echo "expect_output: exit status $rc, expected 0"; exit 1; fi
if [ "$want" = fail ] && [ "$rc" -eq 0 ]; then echo "expect_output: exit status 0, expected a failure"; exit 1; fi
echo "$patterns" | while IFS= read -r pattern; do
  [ -z "$pattern" ] && continue
  if ! echo "$out" | grep -Eq -- "$pattern"; then echo "expect_output: no line matches '$pattern'"; exit 1; fi
done || exit 1
echo "expect_output: ok"
