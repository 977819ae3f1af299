#!/usr/bin/env bash
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

# stress PARAMS...: one nbdkit run with the whole load, then the scan.
stress () {
  local log="$tmpdir/nbdkit.log"
  cat "$tmpdir/prelude.py" "$srcdir/test-stress.py" > "$tmpdir/stress.py"
  : > "$log"
  if ! SERVE_LOG=$log WRITERS=8 OPS=150 SEED=3 serve "$@" -- '
      set -e
      '"$FIO"' --name=stress --ioengine=nbd --uri="$uri" --rw=randwrite \
        --bsrange=512-8k --offset=0 --size=256k --numjobs=4 --iodepth=8 \
        --time_based --runtime=2 --output-format=terse \
        > "'"$tmpdir/fio.out"'" 2>&1 &
      fio=$!
      export sock="$unixsocket"
      '"$NBDSH"' -n -c "exec(open(\"'"$tmpdir/stress.py"'\").read())"
      wait $fio || { cat "'"$tmpdir/fio.out"'"; echo "fio failed"; exit 1; }
      echo "fio done; scan again"
      SCAN_ONLY=1 '"$NBDSH"' -n -c "exec(open(\"'"$tmpdir/stress.py"'\").read())"'
  then
    grep -v "write rejected" "$log" | tail -20 >&2
    fail "stress $*"
  fi
}

for params in "format=T10-DIF-TYPE1-CRC interval=512" \
              "format=T10-DIF-TYPE3-CRC interval=4096"; do
  echo "== memory $params"
  # shellcheck disable=SC2086 # params is a list of words
  stress 4M $params
done
