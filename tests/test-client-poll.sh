#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: stabledif_poll, a caller's thread waiting for its completions
# by reading the replies itself (callbacks on that thread, timeouts with
# nothing in flight and with writes the server holds, other threads
# submitting and polling meanwhile, a connection lost while polling, the
# pollers' lease on the replies and what ends it, a completion between
# the poll's look and its take of the connection).
# See test-client-poll.c.
. "${srcdir:-$(dirname "$0")}/functions.sh"

F=./test-client-poll

for mode in basic mixed lease; do
  run_nbdkit -U - --exit-with-parent "$PLUGIN" size=1M ctl=none \
    --run "$(run_cmd "$F \"\$uri\" $mode")" || fail "$mode"
done
run_nbdkit -U - --exit-with-parent --filter=delay "$PLUGIN" size=1M \
  ctl=none wdelay=2 \
  --run "$(run_cmd "$F \"\$uri\" stalled")" || fail stalled
run_nbdkit -U - --exit-with-parent --filter=delay "$PLUGIN" size=1M \
  ctl=none wdelay=1 \
  --run "$(run_cmd "$F \"\$uri\" lost")" || fail lost
run_nbdkit -U - --exit-with-parent --filter=delay "$PLUGIN" size=1M \
  ctl=none wdelay=1 \
  --run "$(run_cmd "$F \"\$uri\" pretake")" || fail pretake
