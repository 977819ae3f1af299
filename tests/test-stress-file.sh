#!/usr/bin/env bash
# stabledif: stress on file= storage.  The load of test-stress-memory.sh
# (8 connections writing overlapping ranges on both views, 2 checking
# readers, 4 fio jobs on the same 256 KiB of the data view, then a full
# scan with zero PI errors), then nbdkit is restarted on the same files
# and the whole disk is scanned again: what is on disk is just as
# consistent.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires "$FIO"

# stress PARAMS...: one nbdkit run with the whole load, then the scan,
# then a restart and another scan.
stress () {
  local log="$tmpdir/nbdkit.log"
  cat "$tmpdir/prelude.py" "$srcdir/test-stress.py" > "$tmpdir/stress.py"
  : > "$log"
  if ! SERVE_LOG=$log WRITERS=8 OPS=150 SEED=4 serve "$@" -- '
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
  echo "restart, scan only"
  SERVE_LOG=$log SCAN_ONLY=1 run_nbdsh "$srcdir/test-stress.py" "$@" ||
    { tail -20 "$log" >&2; fail "scan after restart: $*"; }
}

for params in "format=T10-DIF-TYPE1-CRC interval=512" \
              "format=T10-DIF-TYPE3-CRC interval=4096"; do
  f="$tmpdir/disk"
  rm -f "$f" "$f.pi"
  echo "== file $params"
  # shellcheck disable=SC2086 # params is a list of words
  stress 4M $params file="$f"
done
