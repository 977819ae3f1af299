#!/usr/bin/env bash
# bench/dif-view.sh: dif-view writes and reads through libstabledif,
# against plain libnbd writes and reads of the same data bytes to nbdkit's
# memory plugin, measured in the same run (bench-dif-view does the
# timing: best of several rounds, the two sides alternately).
#
#   bench/dif-view.sh [BUILDDIR] [-- BENCH-DIF-VIEW-OPTIONS]
#
# BUILDDIR is the top of the build tree (default: the current directory
# if it has stabledif.so, else the source tree).  Target: every ratio
# >= 0.85.  Exit status 1 if one is missed (bench-dif-view --check).
#
# Environment: FORMAT (default T10-DIF-TYPE1-CRC), SPAN (bytes per side,
# default 64M), NBDKIT (default nbdkit).  Not part of "make check".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=.
if [ $# -gt 0 ] && [ "$1" != "--" ]; then builddir=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
[ -e "$builddir/stabledif.so" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)

plugin=$builddir/stabledif.so
helper=$builddir/bench/bench-dif-view
: "${NBDKIT:=nbdkit}"
: "${FORMAT:=T10-DIF-TYPE1-CRC}"
: "${SPAN:=64M}"

for f in "$plugin" "$helper"; do
  [ -e "$f" ] || { echo "$0: $f not found: build first (make)" >&2; exit 2; }
done

# Both servers with the same thread model and no other work: the memory
# plugin (sparse, like stabledif's memory store) as the baseline.  Nested
# --run: each server stops when the command inside it ends.
export HELPER=$helper SPAN NBDKIT
export HELPER_ARGS="$*"
timeout 600 "$NBDKIT" -U - memory size=256M --run '
  export BASE_URI="$uri"
  timeout 600 "$NBDKIT" -U - '"$plugin"' size=256M format='"$FORMAT"' ctl=none \
    --run "\"\$HELPER\" --span \"\$SPAN\" --check \$HELPER_ARGS \"\$uri\" \"\$BASE_URI\""
'
