#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/file-log.sh: what file= storage's dirty-region log costs: fio's
# nbd engine against two servers on file= storage in DIR, one with the
# log (the default) and one with dirty-log=off, measured in the same run.
#
#   bench/file-log.sh [BUILDDIR]
#
# Jobs: random 4 KiB writes and sequential 128 KiB writes on the data
# view, queue depth 8, an NBD flush every FSYNC writes (fio --fsync).
# Each job runs ROUNDS times on both servers, the order swapped every
# round; each round gives one ratio, bandwidth with the log over without.
# Target: the median ratio of each job >= 0.9x.  Exit status 1 if a
# target is missed.
#
# Environment: DIR (where the files go, default /var/tmp: a real
# filesystem, since fdatasync is what is measured), RUNTIME (seconds per
# job, default 5), ROUNDS (default 3), SIZE (default 1G: 16 regions),
# FSYNC (default 32), NBDKIT, FIO.  Not part of "make check".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${1:-.}
[ -e "$builddir/stabledif.so" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)
plugin=$builddir/stabledif.so
[ -e "$plugin" ] || { echo "$0: $plugin not found: build first" >&2; exit 2; }

: "${NBDKIT:=nbdkit}" "${FIO:=fio}" "${DIR:=/var/tmp}"
: "${RUNTIME:=5}" "${ROUNDS:=3}" "${SIZE:=1G}" "${FSYNC:=32}"
"$FIO" --enghelp=nbd >/dev/null 2>&1 ||
  { echo "$0: no fio with the nbd engine" >&2; exit 2; }

tmp=$(mktemp -d "$DIR/file-log.XXXXXX")
pids=()
cleanup () {
  for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || :; done
  wait 2>/dev/null || :
  rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME PARAMS...: a server on $tmp/NAME.sock with file=$tmp/NAME.
start () {
  local name=$1; shift
  "$NBDKIT" -f -U "$tmp/$name.sock" --exit-with-parent "$plugin" \
    "$SIZE" file="$tmp/$name" ctl=none "$@" &
  pids+=($!)
  for _ in $(seq 100); do [ -S "$tmp/$name.sock" ] && return; sleep 0.1; done
  echo "$0: nbdkit ($name) did not start" >&2
  exit 2
}
start log
start nolog dirty-log=off

# run NAME RW BS: bandwidth (bytes/s) of one timed fio run.
run () {
  "$FIO" --name=job --ioengine=nbd --uri="nbd+unix:///?socket=$tmp/$1.sock" \
    --rw="$2" --bs="$3" --iodepth=8 --size="$SIZE" --fsync="$FSYNC" \
    --runtime="$RUNTIME" --time_based --output-format=json \
    --output="$tmp/fio.json" >/dev/null
  python3 -c 'import json,sys
print(int(json.load(open(sys.argv[1]))["jobs"][0]["write"]["bw_bytes"]))' \
    "$tmp/fio.json"
}

status=0
printf "%-22s %12s %12s %8s   %s\n" "job (fsync=$FSYNC)" "log MB/s" \
  "no log MB/s" "median" "ratios"
for job in "randwrite 4k" "write 128k"; do
  set -- $job
  ratios=() a=() b=()
  for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then x=$(run log "$1" "$2"); y=$(run nolog "$1" "$2")
    else y=$(run nolog "$1" "$2"); x=$(run log "$1" "$2"); fi
    a+=("$x") b+=("$y")
    ratios+=("$(python3 -c "print('%.3f' % ($x / $y))")")
  done
  line=$(python3 - "${a[*]}" "${b[*]}" "${ratios[*]}" <<'PY'
import statistics, sys
a, b, r = ([float(v) for v in s.split()] for s in sys.argv[1:4])
print("%.1f %.1f %.3f" % (statistics.median(a) / 1e6,
                          statistics.median(b) / 1e6, statistics.median(r)))
PY
)
  set -- $line
  printf "%-22s %12s %12s %7sx   %s\n" "$job" "$1" "$2" "$3" "${ratios[*]}"
  python3 -c "import sys; sys.exit(0 if $3 >= 0.9 else 1)" || status=1
done
[ $status = 0 ] && echo "target met: every median >= 0.9x" ||
  echo "target missed: a median < 0.9x"
exit $status
