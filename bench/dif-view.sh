#!/usr/bin/env bash
# bench/dif-view.sh: dif-view writes and reads through libstabledif,
# against plain libnbd writes and reads of the same data bytes to nbdkit's
# memory plugin, measured in the same run (bench-dif-view does the
# timing: best of several rounds, the two sides alternately).
#
#   bench/dif-view.sh [BUILDDIR] [-- BENCH-DIF-VIEW-OPTIONS]
#
# BUILDDIR is the top of the build tree (default: the current directory
# if it has stabledif.so, else the source tree).  Both sides use
# CONNECTIONS connections (libstabledif: per handle, each with its own
# I/O thread; the baseline: that many libnbd handles, a thread each).
# Target: every ratio of that table >= 0.85.  Exit status 1 if one is
# missed (bench-dif-view --check).  With CONNECTIONS > 1 a table with one
# connection per side follows, for information only: it is not checked
# against the target.
#
# Environment: CONNECTIONS (default: the number of online CPUs, at most
# 4), FORMAT (default T10-DIF-TYPE1-CRC), SPAN (bytes per side, default
# 64M), NBDKIT (default nbdkit).  Not part of "make check".
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
if [ -z "${CONNECTIONS:-}" ]; then
  CONNECTIONS=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
  [ "$CONNECTIONS" -le 4 ] || CONNECTIONS=4
  [ "$CONNECTIONS" -ge 1 ] || CONNECTIONS=1
fi
case $CONNECTIONS in
  *[!0-9]*|'')
    echo "$0: CONNECTIONS=$CONNECTIONS: not a number of connections" >&2
    exit 2 ;;
esac

for f in "$plugin" "$helper"; do
  [ -e "$f" ] || { echo "$0: $f not found: build first (make)" >&2; exit 2; }
done

# The tables, run inside both servers (SD_URI, BASE_URI): the checked
# one with CONNECTIONS per side, then (CONNECTIONS > 1) the informational
# one with a single connection per side (not after a usage error, 2).
# Exit status: the checked table's (1: a target missed or a failure),
# else the other's (a failure).
tables='
  status=0
  echo "== $CONNECTIONS connection(s) per side: checked against the target =="
  "$HELPER" --span "$SPAN" --check --connections "$CONNECTIONS" \
    $HELPER_ARGS "$SD_URI" "$BASE_URI" || status=$?
  if [ "$CONNECTIONS" -gt 1 ] && [ "$status" -le 1 ]; then
    echo
    echo "== 1 connection per side: for information, NOT checked against the target =="
    r=0
    "$HELPER" --span "$SPAN" --connections 1 \
      $HELPER_ARGS "$SD_URI" "$BASE_URI" || r=$?
    [ "$status" != 0 ] || status=$r
  fi
  exit "$status"
'

# Both servers with the same thread model and no other work: the memory
# plugin (sparse, like stabledif's memory store) as the baseline.  Nested
# --run: each server stops when the command inside it ends.
export HELPER=$helper SPAN NBDKIT CONNECTIONS tables
export HELPER_ARGS="$*"
timeout 900 "$NBDKIT" -U - memory size=256M --run '
  export BASE_URI="$uri"
  timeout 900 "$NBDKIT" -U - '"$plugin"' size=256M format='"$FORMAT"' ctl=none \
    --run "SD_URI=\"\$uri\" bash -c \"\$tables\""
'
