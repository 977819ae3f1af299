#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: stress on file= storage.  The load of test-stress-memory.sh
# (8 connections writing overlapping ranges on both views, 2 checking
# readers, 4 fio jobs on the same 256 KiB of the data view, then a full
# scan with zero PI errors), then nbdkit is restarted on the same files
# and the whole disk is scanned again: what is on disk is just as
# consistent.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires "$FIO"
. "$srcdir/stress-functions.sh"

# stress PARAMS...: the load and scan of stress-functions.sh, then a
# restart and another scan.
stress () {
  stress_load 4 "$@"
  echo "restart, scan only"
  SERVE_LOG=$tmpdir/nbdkit.log SCAN_ONLY=1 run_nbdsh "$srcdir/test-stress.py" "$@" ||
    { tail -20 "$tmpdir/nbdkit.log" >&2; fail "scan after restart: $*"; }
}

for params in "format=T10-DIF-TYPE1-CRC interval=512" \
              "format=T10-DIF-TYPE3-CRC interval=4096"; do
  f="$tmpdir/disk"
  rm -f "$f" "$f.pi"
  echo "== file $params"
  # shellcheck disable=SC2086 # params is a list of words
  stress 4M $params file="$f"
done
