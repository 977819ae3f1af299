#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif's I/O thread when its poll fails or its socket
# is closed under it (writes in flight, held by nbdkit's delay filter, and
# queued: all fail, nothing hangs), under a flood of submissions from
# other threads (replies still read, the queue sent in batches with the
# replies read in between), and its counters snapshots taken
# while requests complete (never torn); a caller's thread that sends its
# own requests while the I/O thread sleeps (callbacks still on the I/O
# thread, a lost connection failing them all).  See test-client-io.c.
. "${srcdir:-$(dirname "$0")}/functions.sh"

F=./test-client-io

for mode in poll-fails socket-closed; do
  run_nbdkit -U - --exit-with-parent --filter=delay "$PLUGIN" size=1M \
    ctl=none wdelay=1 \
    --run "$(run_cmd "$F \"\$uri\" $mode")" || fail "$mode"
done
for mode in flood batch counters drive drive-lost; do
  run_nbdkit -U - --exit-with-parent "$PLUGIN" size=1M ctl=none \
    --run "$(run_cmd "$F \"\$uri\" $mode")" || fail "$mode"
done
