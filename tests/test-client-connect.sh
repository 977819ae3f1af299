#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: stabledif_connect_uri against real servers -- the plugin's
# dif view (with and without an export name in the URI), its data view,
# and servers that are not stabledif devices or describe themselves
# badly (nbdkit's memory plugin, with the exportname filter supplying a
# description) -- and the policy rules applied at connect.
. "${srcdir:-$(dirname "$0")}/functions.sh"

# The expected message fragment travels in $MSG (no quoting trouble).
C='./test-client-connect'
export MSG=""

# Run the connect program against "nbdkit ARGS..." (not our plugin, so
# nbdkit runs without the sanitizer preload of run_nbdkit).
other () {
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  timeout "$STABLEDIF_TEST_TIMEOUT" "$NBDKIT" -U - --exit-with-parent \
    "${args[@]}" --run "$*"
}

# The plugin's dif view.  No export in the URI: the library uses "dif".
serve size=1M ctl=none -- $C --effective wait '$uri' ok
serve size=1M ctl=none -- $C '"nbd+unix:///dif?socket=$unixsocket"' ok
# The data view is refused, saying what to do.
MSG='export "data" is the data view of the disk, not the dif view'
serve size=1M ctl=none -- \
  $C '"nbd+unix:///data?socket=$unixsocket"' EINVAL '"$MSG"'
# An export the server does not have.
MSG='opening the export'
serve size=1M ctl=none -- \
  $C '"nbd+unix:///bogus?socket=$unixsocket"' ENOENT '"$MSG"'

# Policy none needs the unsafe flag on a stable_writes=1 device ...
MSG='only allowed after stabledif_set_unsafe (h, true)'
serve size=1M ctl=none -- $C --policy none '$uri' EPERM '"$MSG"'
serve size=1M ctl=none -- $C --policy none --unsafe --effective none '$uri' ok
# ... but not where nothing is checked; auto is none there.
serve size=1M format=none ctl=none -- $C --policy none --effective none \
  '$uri' ok
serve size=1M format=none ctl=none -- $C --effective none '$uri' ok
serve size=1M format=EXT-DIF-TYPE3-CRC64 ctl=none -- \
  $C --policy snapshot --effective snapshot '$uri' ok

# Not stabledif devices.
MSG='not a stabledif device: the server sent no export description'
other memory 1M -- $C '$uri' EPROTO '"$MSG"'
MSG='not a stabledif device: export description is "a plain disk"'
other --filter=exportname memory 1M exportdesc=fixed:"a plain disk" -- \
  $C '$uri' EPROTO '"$MSG"'

# Malformed profiles: the parser's message is passed on.
bad () {
  MSG=$2
  other --filter=exportname memory 1040K exportdesc=fixed:"$1" -- \
    $C '$uri' EPROTO '"$MSG"'
}
P="view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8"
bad "stabledif/1 view=dif format=BOGUS interval=512 tuple=8 stable_writes=1" \
  'malformed device profile "stabledif/1 view=dif format=BOGUS'
bad "stabledif/1 view=dif format=BOGUS interval=512 tuple=8 stable_writes=1" \
  "bad value in 'format=BOGUS'"
bad "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC tuple=8 stable_writes=1" \
  "missing required key 'interval'"
bad "stabledif/1 $P stable_writes=0" "stable_writes=0"
bad "stabledif/1 $P" "missing required key 'stable_writes'"
bad "stabledif/2 $P stable_writes=1" "first token 'stabledif/2'"
# Unknown keys are ignored.
other --filter=exportname memory 1040K \
  exportdesc=fixed:"stabledif/1 $P stable_writes=1 colour=blue" \
  -- $C '$uri' ok
# A size that is not whole extended blocks.
MSG='export size 1048576 is not a multiple of the extended block size 520'
other --filter=exportname memory 1M \
  exportdesc=fixed:"stabledif/1 $P stable_writes=1" \
  -- $C '$uri' EPROTO '"$MSG"'
