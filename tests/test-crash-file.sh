#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: file= storage after the server process is killed.
#
# What this proves is limited to a process kill: the page cache
# survives SIGKILL, so every write the kernel accepted is still there
# afterwards, synced or not, and this test cannot tell whether flush and
# FUA reach the disk.  test-server's "durability" cases check that (the
# fdatasync and RWF_DSYNC calls on PATH and PATH.pi, test-sync-wrap.h);
# surviving power loss is not tested.
#
# nbdkit serves a file-backed disk in the background (Unix socket,
# pidfile); a write load (tests/test-crash.py: 4 threads, both views,
# FUA, zero, flushes on alternating connections) runs against it and
# logs what it issued, what was acknowledged and what was flushed; once
# a few flushes went through, nbdkit is killed with SIGKILL at a random
# moment.  It is restarted on the same files and the checker reads the
# whole disk: no PI error anywhere (every block of the data view reads),
# every write flushed, or FUA and acknowledged, present, and
# all-ones PI over non-zero data only where a write was in flight.
# Five rounds, each on the disk the previous one left.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

ROUNDS=${CRASH_ROUNDS:-5}
f="$tmpdir/disk"
sock="$tmpdir/nbd.sock"
pidfile="$tmpdir/nbdkit.pid"
log="$tmpdir/nbdkit.log"
# ctl=none: a killed server would leave its control socket behind.
params=(4M format=T10-DIF-TYPE1-CRC ctl=none file="$f")
cat "$tmpdir/prelude.py" "$srcdir/test-crash.py" > "$tmpdir/crash.py"
server_job=""
idle_tasks=1

# The background nbdkit must not outlive the test.
stop_server () {
  if [ -n "$server_job" ]; then
    if [ -s "$pidfile" ]; then kill -9 "$(cat "$pidfile")" 2>/dev/null || :; fi
    wait "$server_job" 2>/dev/null || :
    server_job=""
  fi
}
cleanup_hooks="$cleanup_hooks stop_server"

start_server () {
  rm -f "$sock" "$pidfile"
  run_nbdkit -f -U "$sock" -P "$pidfile" --exit-with-parent \
    "$PLUGIN" "${params[@]}" 2>>"$log" &
  server_job=$!
  for _ in $(seq 100); do
    if [ -s "$pidfile" ] && [ -S "$sock" ]; then
      idle_tasks=$(ls "/proc/$(cat "$pidfile")/task" | wc -l)
      return 0
    fi
    kill -0 "$server_job" 2>/dev/null || break
    sleep 0.1
  done
  tail -5 "$log" >&2
  fail "nbdkit did not start"
}

# Wait (bounded) until nbdkit has as many threads as when it had no
# client: the last client's connection thread has finished.  nbdkit 1.32
# told to quit while one is still finishing loses that connection's
# context (see valgrind.supp), which LeakSanitizer reports at exit.
wait_connections_gone () {
  local pid
  pid=$(cat "$pidfile")
  for _ in $(seq 100); do
    [ "$(ls "/proc/$pid/task" 2>/dev/null | wc -l)" -le "$idle_tasks" ] &&
      return 0
    sleep 0.1
  done
}

# crash_py MODE ROUND: run test-crash.py against the server.
crash_py () {
  MODE=$1 ROUND=$2 LOGDIR="$tmpdir/logs" SNAP="$tmpdir/snap" sock="$sock" \
    "$NBDSH" -n -c "exec(open('$tmpdir/crash.py').read())"
}

flushes () {
  cat "$tmpdir"/logs/t*.log 2>/dev/null | grep -c '^F' || :
}

mkdir "$tmpdir/logs"
start_server
for round in $(seq "$ROUNDS"); do
  rm -f "$tmpdir"/logs/*
  crash_py write "$round" &
  writer=$!
  # Let at least 8 flushes through, then kill at a random moment.
  for _ in $(seq 200); do
    [ "$(flushes)" -ge 8 ] && break
    kill -0 "$writer" 2>/dev/null || break
    sleep 0.05
  done
  [ "$(flushes)" -ge 8 ] || fail "round $round: the load did not get going"
  sleep "0.$(( RANDOM % 5 ))$(( RANDOM % 10 ))"
  kill -0 "$writer" 2>/dev/null || fail "round $round: the load ended early"
  kill -9 "$(cat "$pidfile")"
  wait "$server_job" 2>/dev/null || :
  server_job=""
  wait "$writer" || fail "round $round: the writer failed"
  echo "round $round: killed nbdkit after $(flushes) flushes," \
       "$(cat "$tmpdir"/logs/t*.log | grep -c '^A') acknowledged requests"

  start_server
  crash_py check "$round" || { tail -20 "$log" >&2; fail "round $round"; }
done

# A clean stop at the end leaves the files openable once more.
wait_connections_gone
kill -TERM "$(cat "$pidfile")"
r=0
wait "$server_job" || r=$?
server_job=""
if [ "$r" != 0 ]; then
  tail -30 "$log" >&2
  fail "nbdkit did not stop cleanly (exit status $r)"
fi
serve "${params[@]}" -- "$NBDCOPY"' "$uri" null:' ||
  fail "the disk does not read after a clean stop"
echo "ok: $ROUNDS crashes, every durable write present, no PI errors"
