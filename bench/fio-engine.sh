#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/fio-engine.sh: what the fio engine (stabledif-fio(1)) costs on
# top of libstabledif, and how PI-checked I/O through it compares with
# fio's nbd engine on the data view of the same disk.
#
#   bench/fio-engine.sh [BUILDDIR]
#
# One stabledif server (FORMAT, INTERVAL, SIZE) serves both views.  Three
# tables, queue depth 32 and one connection everywhere:
#
#  1. checked: the engine on the dif view against libstabledif driven
#     directly by bench-dif-view (--submit caller: one thread keeps 32
#     requests in flight, as fio's thread does through the engine), same
#     requests (sequential 4 KiB and 128 KiB writes and reads over SPAN),
#     same PI work.  Target: the median of a job's round ratios >= 0.95
#     (the engine adds at most 5%).
#  2. for information: the engine on the dif view (the host makes and
#     checks the PI) against fio's nbd engine on the data view (the
#     device makes the PI of what arrives and checks it on read), 4 KiB
#     random and 128 KiB sequential writes and reads.
#  3. for information: fio's own cost, fio's nbd engine against libnbd
#     driven directly (bench-dif-view --side baseline), both on the data
#     view, the jobs of the first table: the share of the first table's
#     gap that any fio engine pays.
#
# fio runs with --gtod_reduce=1 --thread, as fio is run to measure a
# fast device: without them fio's own latency bookkeeping (two clock
# reads and histogram updates per request) halves 4 KiB rates here, for
# either engine.
#
# Each job runs ROUNDS times on both sides, one after the other, the
# order swapped every round; each round gives one ratio.  Exit status 1
# if a target of the first table is missed, 2 on a usage or set-up
# error.
#
# Environment: RUNTIME (seconds per run, default 3), ROUNDS (default 5),
# SIZE (device size, default 256M), SPAN (bytes each job covers, default
# 64M), FORMAT (default T10-DIF-TYPE1-CRC), INTERVAL (default 512),
# POLICY (libstabledif policy on both sides, default auto), NBDKIT, FIO.
# Needs the engine (configure --with-fio).  Not part of "make check"
# (tests/test-fio-engine.sh checks the engine's behaviour).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${1:-.}
[ -e "$builddir/stabledif.so" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)
plugin=$builddir/stabledif.so
engine=$builddir/client/fio-engine/.libs/stabledif-fio.so
helper=$builddir/bench/bench-dif-view
for f in "$plugin" "$helper"; do
  [ -e "$f" ] || { echo "$0: $f not found: build first (make)" >&2; exit 2; }
done
[ -e "$engine" ] || {
  echo "$0: $engine not found: configure found no fio source tree" \
       "(configure --with-fio=DIR)" >&2; exit 2; }

: "${NBDKIT:=nbdkit}"
: "${FIO:=fio}"
: "${RUNTIME:=3}"
: "${ROUNDS:=5}"
: "${SIZE:=256M}"
: "${SPAN:=64M}"
: "${FORMAT:=T10-DIF-TYPE1-CRC}"
: "${INTERVAL:=512}"
: "${POLICY:=auto}"
command -v "$FIO" >/dev/null || { echo "$0: fio not found" >&2; exit 2; }
"$FIO" --enghelp=nbd >/dev/null 2>&1 ||
  { echo "$0: this fio has no nbd engine" >&2; exit 2; }
for v in RUNTIME ROUNDS; do
  case ${!v} in
    *[!0-9]*|''|0) echo "$0: $v=${!v}: not a positive number" >&2; exit 2 ;;
  esac
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fio-engine.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The measuring part, run with the server up ($DIF_URI, $DATA_URI).
cat > "$tmp/measure.sh" <<'EOF'
set -euo pipefail
# fio_bw ENGINE-ARGS... -- FIO-ARGS...: one fio run; prints its
# bandwidth (bytes/s, reads and writes together).
fio_bw () {
  "$FIO" --name=job --iodepth=32 --size="$SPAN" --gtod_reduce=1 --thread \
    --output-format=json \
    --output="$TMP/fio.json" "$@" >/dev/null
  # (fio's nbd engine logs "fio: connected to NBD server" into the
  # JSON file when run with --thread: start at the first "{" line.)
  python3 -c '
import json, re, sys
text = open(sys.argv[1]).read()
start = re.search(r"^\{", text, re.M)
if not start:
    sys.exit("fio: no JSON output")
j = json.JSONDecoder().raw_decode(text[start.start():])[0]["jobs"][0]
if j["error"]:
    sys.exit("fio: job error %d" % j["error"])
print(int(j["read"]["bw_bytes"] + j["write"]["bw_bytes"]))' "$TMP/fio.json"
}
# engine RW BS: the stabledif engine on the dif view.
engine () {
  fio_bw --ioengine=external:"$ENGINE" --uri="$DIF_URI" --policy="$POLICY" \
    --rw="$1" --bs="$2" --runtime="$RUNTIME" --time_based
}
# nbd RW BS: fio's nbd engine on the data view.
nbd () {
  fio_bw --ioengine=nbd --uri="$DATA_URI" --rw="$1" --bs="$2" \
    --runtime="$RUNTIME" --time_based
}
# helper SIDE RW BS [ARGS...]: one side of bench-dif-view alone (one
# round of RUNTIME seconds): libstabledif on the dif view, or the
# baseline, libnbd, on the data view.
helper () {
  local side=$1 only=$2 size
  size=$(numfmt --from=iec "${3^^}")
  shift 3
  "$HELPER" --side "$side" "$@" --connections 1 --depth 32 \
    --span "$SPAN" --rounds 1 --round-ms "$((RUNTIME * 1000))" \
    --size "$size" --only "$only" "$DIF_URI" "$DATA_URI" > "$TMP/lib.out"
  sed -nE 's/^(write|read) [0-9]+ [KM]iB: ([0-9.]+) MB\/s.*/\2/p' \
    "$TMP/lib.out" | awk '{ printf "%.0f\n", $1 * 1e6 } END { if (NR != 1) exit 1 }' ||
    { cat "$TMP/lib.out" >&2; echo "bench-dif-view: no rate" >&2; exit 2; }
}
# library RW BS: libstabledif alone, as fio's thread drives it through
# the engine (one thread submits, waits in stabledif_poll).
library () { helper libstabledif "$1" "$2" --submit caller --policy "$POLICY"; }
# libnbd RW BS: libnbd alone (one thread submits and polls).
libnbd () { helper baseline "$1" "$2"; }

# round_pair TABLE JOB A-FUNC B-FUNC RW BS ROUND: time A and B (order
# swapped in even rounds), append to the lists of TABLE:JOB.
declare -A bw_a bw_b ratios
round_pair () {
  local t=$1 j=$2 fa=$3 fb=$4 rw=$5 bs=$6 r=$7 a b q
  if [ $((r % 2)) = 1 ]; then
    a=$($fa "$rw" "$bs"); b=$($fb "$rw" "$bs")
  else
    b=$($fb "$rw" "$bs"); a=$($fa "$rw" "$bs")
  fi
  bw_a[$t:$j]+=" $a"; bw_b[$t:$j]+=" $b"
  q=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", (b > 0 ? a / b : 0) }')
  ratios[$t:$j]+=" $q"
  awk -v r="$r" -v j="$j" -v fa="$fa" -v fb="$fb" -v a="$a" -v b="$b" \
      -v q="$q" 'BEGIN {
    printf "  round %d %-13s %s %8.1f MB/s  %s %8.1f MB/s  %5.2fx\n",
      r, j, fa, a / 1e6, fb, b / 1e6, q }'
}

echo "filling the disk ($SIZE) ..."
"$FIO" --name=fill --ioengine=nbd --uri="$DATA_URI" --rw=write --bs=1M \
  --iodepth=8 --size="$SIZE" >/dev/null

lib_jobs="write:4k read:4k write:128k read:128k"
nbd_jobs="randwrite:4k randread:4k write:128k read:128k"
for r in $(seq 1 "$ROUNDS"); do
  for j in $lib_jobs; do
    round_pair lib "$j" engine library "${j%%:*}" "${j#*:}" "$r"
  done
  for j in $nbd_jobs; do
    round_pair nbd "$j" engine nbd "${j%%:*}" "${j#*:}" "$r"
  done
  for j in $lib_jobs; do
    round_pair fio "$j" nbd libnbd "${j%%:*}" "${j#*:}" "$r"
  done
done

# table TABLE JOBS TARGET: one row per job (medians; the ratio's lowest
# and highest); exit status 1 if a median ratio is below TARGET (0: not
# checked).
table () {
  local t=$1 jobs=$2 target=$3 j missed=0
  for j in $jobs; do
    awk -v j="$j" -v a="${bw_a[$t:$j]}" -v b="${bw_b[$t:$j]}" \
        -v q="${ratios[$t:$j]}" -v target="$target" '
    # median of the space-separated numbers in S (lowest in LO, highest
    # in HI); the mean of the middle two for an even count
    function median(s,    v, n, i, k, x) {
      n = split(s, v, " ")
      for (i = 2; i <= n; i++)
        for (k = i; k > 1 && v[k - 1] + 0 > v[k] + 0; k--) {
          x = v[k]; v[k] = v[k - 1]; v[k - 1] = x
        }
      lo = v[1]; hi = v[n]
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    BEGIN {
      ma = median(a); mb = median(b); ratio = median(q)
      miss = target > 0 && ratio < target
      t = target > 0 ? sprintf("%.2fx", target) : "-"
      printf "%-14s %9.1f MB/s %9.1f MB/s %7.2fx %7.2f-%.2fx %8s%s\n", j,
        ma / 1e6, mb / 1e6, ratio, lo, hi, t, (miss ? "  MISSED" : "")
      exit miss }' || missed=1
  done
  return $missed
}

echo
echo "the fio engine against libstabledif driven directly (bench-dif-view"
echo "--submit caller), dif view, $FORMAT interval $INTERVAL, policy $POLICY,"
echo "iodepth 32, $ROUNDS rounds of ${RUNTIME}s, medians (the ratio: the median"
echo "of the rounds' ratios, with the lowest and the highest):"
printf '%-14s %14s %14s %8s %15s %8s\n' job engine libstabledif ratio \
  lowest-highest target
missed=0
table lib "$lib_jobs" 0.95 || missed=1

echo
echo "for information: the fio engine on the dif view (host PI) against"
echo "fio's nbd engine on the data view (device PI), same disk:"
printf '%-14s %14s %14s %8s %15s %8s\n' job engine nbd ratio \
  lowest-highest target
table nbd "$nbd_jobs" 0

echo
echo "for information: what fio itself costs, fio's nbd engine against libnbd"
echo "driven directly (bench-dif-view --side baseline), both on the data view:"
printf '%-14s %14s %14s %8s %15s %8s\n' job nbd libnbd ratio \
  lowest-highest target
table fio "$lib_jobs" 0
exit $missed
EOF

export FIO RUNTIME ROUNDS SIZE SPAN FORMAT INTERVAL POLICY TMP=$tmp \
  ENGINE=$engine HELPER=$helper
echo "bench/fio-engine.sh: $("$FIO" --version), $("$NBDKIT" --version | sed -n 1p)"
timeout 3600 "$NBDKIT" -U "$tmp/sd.sock" "$plugin" size="$SIZE" \
  format="$FORMAT" interval="$INTERVAL" ctl=none --run '
  DIF_URI="nbd+unix:///dif?socket=$unixsocket" \
  DATA_URI="nbd+unix:///data?socket=$unixsocket" bash "$TMP/measure.sh"'
