#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Replay every fuzz target's seed corpus and saved regressions
# (fuzz/corpus/NAME, fuzz/regressions/NAME) through its replay build,
# which needs no clang (fuzz/README.md).  A target that finds a bug
# aborts with a message saying what, and the test fails.
set -eu
: "${top_srcdir:?}" "${top_builddir:?}"

for name in profile ctl-request dif-write client-read; do
  prog=$top_builddir/fuzz/fuzz-$name-replay
  corpus=$top_srcdir/fuzz/corpus/$name
  regressions=$top_srcdir/fuzz/regressions/$name
  if [ ! -x "$prog" ]; then
    echo "$0: $prog is not built" >&2
    exit 1
  fi
  # An empty corpus would make this test pass without testing anything.
  if [ -z "$(ls "$corpus" 2>/dev/null)" ]; then
    echo "$0: no seeds in $corpus" >&2
    exit 1
  fi
  set -- "$corpus"
  if [ -d "$regressions" ]; then
    set -- "$@" "$regressions"
  fi
  echo "== fuzz-$name"
  "$prog" "$@"
done
