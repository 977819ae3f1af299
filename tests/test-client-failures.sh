#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif's reports of failures that are not a changed
# buffer -- the device failing every write or read (nbdkit's error filter
# in front of the plugin) and the server dying with requests in flight --
# and of a write split into several commands, one of them rejected.
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

# A server that takes at most 4096 bytes per request: a longer write is
# split into commands, each rejected or stored on its own.
run_nbdkit -U - --exit-with-parent --filter=blocksize-policy "$PLUGIN" \
  size=1M ctl=none blocksize-maximum=4096 \
  --run "$(run_cmd "$F \"\$uri\" split-rejected 4096")" ||
  fail "split-rejected"

# A server we can kill.
serve_killable size=1M ctl=none
$F "nbd+unix:///?socket=$sock" lost "$pidfile" || fail "lost"
wait "$bg" || :
# Killed from a completion callback that then submits more.
serve_killable size=1M ctl=none
$F "nbd+unix:///?socket=$sock" lost-in-callback "$pidfile" "$sock" ||
  fail "lost-in-callback"
wait "$bg" || :

# Read replies in chunks shaped on purpose (tests/nbd-chunky-server.py,
# one client each): complete but out of order, half of the bytes, one
# block filled twice.  libstabledif has libnbd leave its read buffers
# alone, so it must judge the chunks itself.
chunky=${srcdir:-$(dirname "$0")}/nbd-chunky-server.py
for mode in split short overlap; do
  s=$tmpdir/chunky-$mode.sock
  python3 "$chunky" "$s" "$mode" & srv=$!
  for i in $(seq 100); do [ -S "$s" ] && break; sleep 0.1; done
  [ -S "$s" ] || fail "nbd-chunky-server.py $mode did not start"
  $F "nbd+unix:///dif?socket=$s" "chunks-$mode" || fail "chunks-$mode"
  wait "$srv" || fail "nbd-chunky-server.py $mode failed"
done
