#!/usr/bin/env bash
# stabledif: libstabledif's reports of failures that are not a changed
# buffer -- the device failing every write or read (nbdkit's error filter
# in front of the plugin) and the server dying with requests in flight.
# See test-client-failures.c.
. "${srcdir:-$(dirname "$0")}/functions.sh"

F=./test-client-failures

# The error filter fails the requests; the profile still comes through.
run_nbdkit -U - --exit-with-parent --filter=error "$PLUGIN" size=1M \
  ctl=none error-pwrite=EIO error-pwrite-rate=1 \
  --run "$(run_cmd "$F \"\$uri\" eio-write")" || fail "eio-write"
run_nbdkit -U - --exit-with-parent --filter=error "$PLUGIN" size=1M \
  ctl=none error-pread=EIO error-pread-rate=1 \
  --run "$(run_cmd "$F \"\$uri\" eio-read")" || fail "eio-read"

# A server we can kill: in the background, on our own socket.
sock=$tmpdir/sock
pidfile=$tmpdir/nbdkit.pid
run_nbdkit -f -U "$sock" -P "$pidfile" --exit-with-parent "$PLUGIN" \
  size=1M ctl=none &
bg=$!
stop_bg () { kill "$bg" 2>/dev/null || :; }
cleanup_hooks="$cleanup_hooks stop_bg"
for _ in $(seq 100); do
  [ -S "$sock" ] && [ -s "$pidfile" ] && break
  sleep 0.1
done
[ -S "$sock" ] && [ -s "$pidfile" ] || fail "nbdkit did not start"
$F "nbd+unix:///?socket=$sock" lost "$pidfile" || fail "lost"
wait "$bg" || :
