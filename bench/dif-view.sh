#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/dif-view.sh: dif-view writes and reads through libstabledif,
# against plain libnbd writes and reads of the same data bytes to nbdkit's
# memory plugin, measured in the same run (bench-dif-view does the
# timing: several rounds, each timing both sides back to back; a table
# row gives the median of the rounds' ratios, each round follows it).
#
#   bench/dif-view.sh [BUILDDIR] [-- BENCH-DIF-VIEW-OPTIONS]
#
# BUILDDIR is the top of the build tree (default: the current directory
# if it has stabledif.so, else the source tree).  Both sides use
# CONNECTIONS connections (libstabledif: per handle, each with its own
# I/O thread; the baseline: that many libnbd handles, a thread each).
# Target: every ratio of that table >= 0.85, but 128 KiB writes >= 0.75
# (the join of separate data and PI buffers; bench/README.md); in the
# caller-thread table under it (one thread, one connection per side),
# 128 KiB reads >= 0.85, 128 KiB writes >= 0.75 (the join again), 4 KiB
# writes >= 0.80, every row >= 0.95 with FORMAT=none.  Exit status 1 if
# one is missed (bench-dif-view --check).  With CONNECTIONS > 1 a table
# with one connection per side follows, for information only: it is not
# checked against the target.
#
# With "-- --interleaved" the tables are of interleaved buffers instead
# (library PI filled in place, reads verified in place, the caller's PI
# sent unchecked) against libnbd moving the same extended bytes, with
# their own targets (bench-dif-view --help, bench/README.md); the
# caller-thread table under it holds interleaved 128 KiB writes and
# reads to 0.85, 4 KiB writes to 0.80.
#
# Each run also prints, for information, the client's CPU per MB of both
# sides and each server's (stabledif's, the memory plugin's: all their
# threads, from /proc).
#
# With RUNS > 1 the checked table is measured RUNS times (in the same
# two servers) and a summary follows: per row the lowest, the median and
# the highest ratio; the target then applies to the medians (one run's
# ratio moves by up to 0.15 on a shared machine; the median of several
# is the figure README reports).
#
# Environment: CONNECTIONS (default: the number of online CPUs, at most
# 4), RUNS (default 1), FORMAT (default T10-DIF-TYPE1-CRC), INTERVAL
# (protection interval, default 512: the plugin's default), SPAN (bytes
# per side, default 64M), NBDKIT (default nbdkit).  Not part of "make
# check".
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
: "${INTERVAL:=512}"
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
: "${RUNS:=1}"
case $RUNS in
  *[!0-9]*|''|0)
    echo "$0: RUNS=$RUNS: not a number of runs (1 or more)" >&2
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
  set -o pipefail
  status=0
  # nbdkit may write its -P file only after --run has started (a loaded
  # machine): wait for both, 10 s at most.
  for i in $(seq 100); do
    [ -s "$PID_DIR/sd.pid" ] && [ -s "$PID_DIR/base.pid" ] && break
    sleep 0.1
  done
  PIDS="$(cat "$PID_DIR/sd.pid"),$(cat "$PID_DIR/base.pid")"
  echo "== $CONNECTIONS connection(s) per side: checked against the target =="
  if [ "$RUNS" = 1 ]; then
    "$HELPER" --span "$SPAN" --check --connections "$CONNECTIONS" \
      --server-pids "$PIDS" $HELPER_ARGS "$SD_URI" "$BASE_URI" || status=$?
  else
    : > "$RUNS_LOG"
    for run in $(seq "$RUNS"); do
      echo "-- run $run of $RUNS"
      "$HELPER" --span "$SPAN" --connections "$CONNECTIONS" \
        --server-pids "$PIDS" $HELPER_ARGS "$SD_URI" "$BASE_URI" |
        tee -a "$RUNS_LOG" ||
        { status=$?; break; }
    done
    if [ "$status" = 0 ]; then
      echo
      echo "== $CONNECTIONS connection(s) per side: $RUNS runs, the target applies to the medians =="
      awk "$summarize_awk" "$RUNS_LOG" || status=$?
    fi
  fi
  if [ "$CONNECTIONS" -gt 1 ] && [ "$status" -le 1 ]; then
    echo
    echo "== 1 connection per side: for information, NOT checked against the target =="
    r=0
    "$HELPER" --span "$SPAN" --connections 1 --server-pids "$PIDS" \
      $HELPER_ARGS "$SD_URI" "$BASE_URI" || r=$?
    [ "$status" != 0 ] || status=$r
  fi
  exit "$status"
'

# The summary of RUNS runs (awk, over their tables): the ratio of every
# row as lowest, median and highest; exit status 1 if a median is below
# the target.  Then, for information, the same for the client CPU per MB
# of libstabledif over the baseline's (the second table of each run) and
# for the servers' (the third).  A variable, not a function: nbdkit
# --run's /bin/sh does not pass bash functions on.
summarize_awk='
    # Empty arrays (for summary() even when a table gave no value).
    BEGIN { split("", c); split("", cn); split("", sc); split("", scn) }
    $1 ~ /^(write|read)$/ && $5 == "MB/s" && $8 ~ /x$/ {
      row = $1 " " $2 " " $3
      if (!(row in n)) order[++rows] = row
      r[row, ++n[row]] = substr($8, 1, length($8) - 1) + 0
      target[row] = substr($9, 1, length($9) - 1) + 0
    }
    /^client CPU/ { table = "client" }
    /^server CPU/ { table = "server" }
    $1 ~ /^(write|read)$/ && $5 == "ms/MB" && $8 ~ /x$/ {
      row = $1 " " $2 " " $3
      v = substr($8, 1, length($8) - 1) + 0
      if (table == "client") c[row, ++cn[row]] = v
      else if (table == "server") sc[row, ++scn[row]] = v
    }
    # The lowest, median and highest of the K values V[ROW, 1..K], sorted
    # in place (few: insertion sort), as "lowest median highest".
    function spread(v, row, k,    a, b, t) {
      for (a = 2; a <= k; a++)
        for (b = a; b > 1 && v[row, b - 1] > v[row, b]; b--) {
          t = v[row, b]; v[row, b] = v[row, b - 1]; v[row, b - 1] = t
        }
      return v[row, 1] " " (k % 2 ? v[row, (k + 1) / 2] \
        : (v[row, k / 2] + v[row, k / 2 + 1]) / 2) " " v[row, k]
    }
    # An informational summary headed TITLE: the spread of V[ROW, 1..K]
    # (K = VN[ROW]) for every row that has values.
    function summary(title, v, vn,    i, row, k, q) {
      printf "\n%s (for information):\n", title
      for (i = 1; i <= rows; i++) {
        row = order[i]; k = vn[row]
        if (k == 0) continue
        split(spread(v, row, k), q, " ")
        printf "%-16s %6d %7.2fx %7.2fx %7.2fx\n", row, k, q[1], q[2], q[3]
      }
    }
    END {
      printf "%-16s %6s %8s %8s %8s\n", "", "runs", "lowest", "median", "highest"
      bad = 0
      for (i = 1; i <= rows; i++) {
        row = order[i]; k = n[row]
        split(spread(r, row, k), q, " ")
        med = q[2] + 0
        miss = med < target[row]
        bad = bad || miss
        printf "%-16s %6d %7.2fx %7.2fx %7.2fx   target %.2fx%s\n", row, k,
          q[1], med, q[3], target[row], miss ? "  MISSED" : ""
      }
      if (rows == 0) { print "no table rows found"; exit 2 }
      summary("client CPU per MB, libstabledif / baseline", c, cn)
      summary("server CPU per MB, stabledif / memory plugin", sc, scn)
      exit bad
    }'
export RUNS summarize_awk RUNS_LOG="$(mktemp "${TMPDIR:-/tmp}/dif-view-runs.XXXXXX")"
export PID_DIR="$(mktemp -d "${TMPDIR:-/tmp}/dif-view-pids.XXXXXX")"
trap 'rm -rf "$RUNS_LOG" "$PID_DIR"' EXIT

# Both servers with the same thread model and no other work: the memory
# plugin (sparse, like stabledif's memory store) as the baseline.  Nested
# --run: each server stops when the command inside it ends.
export HELPER=$helper SPAN NBDKIT CONNECTIONS tables
export HELPER_ARGS="$*"
timeout 900 "$NBDKIT" -U - -P "$PID_DIR/base.pid" memory size=256M --run '
  export BASE_URI="$uri"
  timeout 900 "$NBDKIT" -U - -P "$PID_DIR/sd.pid" '"$plugin"' size=256M \
    format='"$FORMAT"' interval='"$INTERVAL"' ctl=none --run "SD_URI=\"\$uri\" bash -c \"\$tables\""
'
