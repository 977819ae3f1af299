#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/fio-data-view.sh: server throughput of stabledif's data view
# (format T10-DIF-TYPE1-CRC: the device inserts PI on every write and
# verifies it on every read) against nbdkit's memory plugin, with fio's
# nbd engine, measured in the same run.
#
#   bench/fio-data-view.sh [BUILDDIR]
#
# Jobs: sequential 128 KiB writes and reads, random 4 KiB writes and
# reads, queue depth 32, one connection each, RUNTIME seconds per job.
# Both devices are written in full first, so reads verify real PI.
# Each job runs ROUNDS times on both servers, one after the other, the
# order swapped every round (stabledif first in odd rounds, the memory
# plugin first in even ones); each round gives one ratio, stabledif's
# bandwidth over the memory plugin's.  Target: the median of a job's
# round ratios >= 0.9x.  Exit status 1 if a target is missed.
#
# Environment: RUNTIME (seconds per job, default 5), ROUNDS (default 5),
# SIZE (device size, default 256M), FORMAT (default T10-DIF-TYPE1-CRC),
# NBDKIT, FIO.  Not part of "make check" (tests/test-fio-data-view.sh
# runs it for a second per job to check its tables, not its figures).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${1:-.}
[ -e "$builddir/stabledif.so" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)
plugin=$builddir/stabledif.so
[ -e "$plugin" ] || { echo "$0: $plugin not found: build first" >&2; exit 2; }

: "${NBDKIT:=nbdkit}"
: "${FIO:=fio}"
: "${RUNTIME:=5}"
: "${ROUNDS:=5}"
: "${SIZE:=256M}"
: "${FORMAT:=T10-DIF-TYPE1-CRC}"
command -v "$FIO" >/dev/null || { echo "$0: fio not found" >&2; exit 2; }
"$FIO" --enghelp=nbd >/dev/null 2>&1 ||
  { echo "$0: this fio has no nbd engine" >&2; exit 2; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fio-data-view.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The measuring part, run with both servers up: $SD_URI and $MEM_URI,
# their process IDs in $TMP/sd.pid and $TMP/mem.pid.
cat > "$tmp/measure.sh" <<'EOF'
set -euo pipefail
# fio_run URI RW BS [extra fio args...] -> "bandwidth bytes" (bytes/s and
# bytes moved)
fio_run () {
  local uri=$1 rw=$2 bs=$3; shift 3
  "$FIO" --name=job --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" \
    --iodepth=32 --size="$SIZE" --output-format=json "$@" \
    --output="$TMP/fio.json" >/dev/null
  python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))["jobs"][0]
print(int(j["read"]["bw_bytes"] + j["write"]["bw_bytes"]),
      int(j["read"]["io_bytes"] + j["write"]["io_bytes"]))' "$TMP/fio.json"
}
# CPU time (user + system, clock ticks) a server has used so far, all
# its threads.
cpu_ticks () {
  awk '{ print $14 + $15 }' "/proc/$(cat "$1")/stat"
}
# measure SIDE URI RW BS: one timed run of job $j; sets bw (bytes/s) and
# adds the bytes moved and the server's CPU ticks to bytes[SIDE:$j] and
# ticks[SIDE:$j].
measure () {
  local side=$1 uri=$2 rw=$3 bs=$4 t0 t1 out
  t0=$(cpu_ticks "$TMP/$side.pid")
  out=$(fio_run "$uri" "$rw" "$bs" --runtime="$RUNTIME" --time_based)
  t1=$(cpu_ticks "$TMP/$side.pid")
  bw=${out% *}
  bytes[$side:$j]=$(( ${bytes[$side:$j]} + ${out#* } ))
  ticks[$side:$j]=$(( ${ticks[$side:$j]} + t1 - t0 ))
}

echo "filling both devices ($SIZE each) ..."
fio_run "$SD_URI" write 1M >/dev/null
fio_run "$MEM_URI" write 1M >/dev/null

jobs="write:128k read:128k randwrite:4k randread:4k"
# Per job: each side's bandwidth of every round, and each round's ratio
# (space-separated, in round order).
declare -A bw_sd bw_mem ratios bytes ticks
for j in $jobs; do
  bw_sd[$j]=""; bw_mem[$j]=""; ratios[$j]=""
  for side in sd mem; do bytes[$side:$j]=0; ticks[$side:$j]=0; done
done
for r in $(seq 1 "$ROUNDS"); do
  for j in $jobs; do
    rw=${j%%:*} bs=${j#*:}
    # Whichever side runs first may find the machine quieter (or busier)
    # than the second: swap the order every round.
    if [ $((r % 2)) = 1 ]; then
      measure sd "$SD_URI" "$rw" "$bs"; a=$bw
      measure mem "$MEM_URI" "$rw" "$bs"; b=$bw
    else
      measure mem "$MEM_URI" "$rw" "$bs"; b=$bw
      measure sd "$SD_URI" "$rw" "$bs"; a=$bw
    fi
    bw_sd[$j]+=" $a"; bw_mem[$j]+=" $b"
    q=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
    ratios[$j]+=" $q"
    awk -v r="$r" -v j="$j" -v a="$a" -v b="$b" -v q="$q" 'BEGIN {
      printf "  round %d %-14s stabledif %9.1f MB/s  memory %9.1f MB/s  %5.2fx\n",
        r, j, a / 1e6, b / 1e6, q }'
  done
done

# The servers' CPU per GB moved, over every round: steadier than
# throughput on a shared machine, and it shows what the server itself
# costs (fio's share of the CPUs is the same on both sides).
hz=$(getconf CLK_TCK)
echo
echo "server CPU (user + system, all threads) per GB moved, all $ROUNDS rounds:"
printf '%-16s %14s %14s %8s\n' job stabledif memory sd/mem
for j in $jobs; do
  awk -v j="$j" -v hz="$hz" -v ta="${ticks[sd:$j]}" -v ba="${bytes[sd:$j]}" \
      -v tb="${ticks[mem:$j]}" -v bb="${bytes[mem:$j]}" 'BEGIN {
    a = ba > 0 ? ta * 1000 / hz / (ba / 1e9) : 0
    b = bb > 0 ? tb * 1000 / hz / (bb / 1e9) : 0
    # Clock ticks: a server that used none has no quotient.
    if (a > 0 && b > 0)
      printf "%-16s %8.0f ms/GB %8.0f ms/GB %7.2fx\n", j, a, b, a / b
    else
      printf "%-16s %8.0f ms/GB %8.0f ms/GB %8s\n", j, a, b, "n/a" }'
done

echo
echo "stabledif data view ($FORMAT) vs nbdkit memory plugin, fio nbd engine,"
echo "iodepth 32, $ROUNDS rounds of ${RUNTIME}s, medians (the ratio: the median"
echo "of the rounds' ratios, with the lowest and the highest):"
printf '%-16s %14s %14s %8s %15s %8s\n' job stabledif memory ratio \
  "lowest-highest" target
missed=0
for j in $jobs; do
  awk -v j="$j" -v a="${bw_sd[$j]}" -v b="${bw_mem[$j]}" \
      -v q="${ratios[$j]}" '
  # median of the space-separated numbers in S (lowest in LO, highest in
  # HI); the mean of the middle two for an even count
  function median(s,    v, n, i, k, t) {
    n = split(s, v, " ")
    for (i = 2; i <= n; i++)            # insertion sort: a few rounds
      for (k = i; k > 1 && v[k - 1] + 0 > v[k] + 0; k--) {
        t = v[k]; v[k] = v[k - 1]; v[k - 1] = t
      }
    lo = v[1]; hi = v[n]
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  BEGIN {
    ma = median(a); mb = median(b); ratio = median(q)
    printf "%-16s %9.1f MB/s %9.1f MB/s %7.2fx %7.2f-%.2fx %7.2fx%s\n", j,
      ma / 1e6, mb / 1e6, ratio, lo, hi, 0.9, ratio < 0.9 ? "  MISSED" : ""
    exit ratio < 0.9 }' || missed=1
done
exit $missed
EOF

export FIO SIZE RUNTIME ROUNDS FORMAT NBDKIT TMP=$tmp PLUGIN=$plugin
# Nested --run: each server stops when the command inside it ends.
timeout 3600 "$NBDKIT" -U "$tmp/mem.sock" -P "$tmp/mem.pid" memory \
  size="$SIZE" --run '
  export MEM_URI="$uri"
  timeout 3600 "$NBDKIT" -U "$TMP/sd.sock" -P "$TMP/sd.pid" "$PLUGIN" \
    size="$SIZE" format="$FORMAT" ctl=none \
    --run "SD_URI=\"\$uri\" bash \"\$TMP/measure.sh\""
'
