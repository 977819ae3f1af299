#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Run libFuzzer targets for a while each ("make fuzz").
#
#   run-fuzz.sh SECONDS SRCDIR CRASHDIR TARGET...
#
# Each ./TARGET runs for SECONDS on a copy of SRCDIR/corpus/TARGET (the
# tree stays clean; new inputs go to the copy and are dropped), reading
# SRCDIR/regressions/TARGET too, with SRCDIR/TARGET.dict if there is one.
# A crashing input is saved in CRASHDIR and named in the output.  Exits 1
# if any target crashed, after running all of them.
set -u

if [ $# -lt 4 ]; then
  echo "usage: $0 SECONDS SRCDIR CRASHDIR TARGET..." >&2
  exit 2
fi
seconds=$1 srcdir=$2 crashdir=$3
shift 3

mkdir -p "$crashdir" || exit 2
work=$(mktemp -d "${TMPDIR:-/tmp}/stabledif-fuzz.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

failed=""
for t in "$@"; do
  name=${t#fuzz-}
  corpus=$work/$name
  mkdir -p "$corpus"
  if [ -d "$srcdir/corpus/$name" ]; then
    cp "$srcdir/corpus/$name"/* "$corpus"/ 2>/dev/null || :
  fi
  set -- "$corpus"
  if [ -d "$srcdir/regressions/$name" ]; then
    set -- "$@" "$srcdir/regressions/$name"
  fi
  dict=""
  if [ -f "$srcdir/$t.dict" ]; then
    dict="-dict=$srcdir/$t.dict"
  fi

  echo "fuzz: $t for ${seconds}s"
  ./"$t" -max_total_time="$seconds" -timeout=20 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$crashdir/$name-" \
    $dict "$@" >"$work/$name.log" 2>&1
  rc=$?
  grep -E '^stat::number_of_executed_units|^#[0-9]+ *DONE' \
    "$work/$name.log" || :
  if [ $rc -ne 0 ]; then
    tail -40 "$work/$name.log"
    echo "fuzz: $t FAILED (exit $rc); crashing input kept in:"
    ls -t "$crashdir/$name-"* 2>/dev/null | head -5 | sed 's/^/  /'
    echo "fuzz: reproduce with: ./$t FILE; once fixed, copy the file to" \
      "$srcdir/regressions/$name/"
    failed="$failed $t"
  fi
done

if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed"
  exit 1
fi
echo "fuzz: all targets ran ${seconds}s without a crash"
