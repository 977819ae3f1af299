#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: stress on memory storage.  8 connections (4 on the data
# view, 4 on the dif view) write overlapping ranges at once -- whole and
# partial intervals, FUA, zero, trim, flush, dif writes with a bad guard
# that must be rejected whole -- while 2 more read and check both views,
# and 4 fio jobs (iodepth 8) hammer the same 256 KiB of the data view;
# then a full scan finds zero PI errors and no data of a rejected write
# (tests/test-stress.py).
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires "$FIO"
. "$srcdir/stress-functions.sh"

# stress PARAMS...: the load and scan of stress-functions.sh.
stress () {
  stress_load 3 "$@"
}

for params in "format=T10-DIF-TYPE1-CRC interval=512" \
              "format=T10-DIF-TYPE3-CRC interval=4096"; do
  echo "== memory $params"
  # shellcheck disable=SC2086 # params is a list of words
  stress 4M $params
done
