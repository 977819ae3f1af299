# SPDX-License-Identifier: BSD-3-Clause
# Sourced by test-stress-memory.sh and test-stress-file.sh (after
# functions.sh): the concurrent load both run.

# stress_load SEED PARAMS...: one nbdkit run with the plugin and PARAMS
# under the whole load -- 8 nbdsh connections writing overlapping ranges
# on both views, 2 checking readers (tests/test-stress.py), 4 fio jobs
# (iodepth 8) on the same 256 KiB of the data view -- then a full scan of
# both views.  nbdkit's log goes to $tmpdir/nbdkit.log.  Fails the test
# on any error.
stress_load () {
  local seed=$1 log="$tmpdir/nbdkit.log"
  shift
  cat "$tmpdir/prelude.py" "$srcdir/test-stress.py" > "$tmpdir/stress.py"
  : > "$log"
  if ! SERVE_LOG=$log WRITERS=8 OPS=150 SEED=$seed serve "$@" -- '
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
