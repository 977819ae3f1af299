#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif bench: memory and start-up cost of a huge sparse device.
#
# Starts nbdkit with a 16 TiB device -- stabledif on memory storage,
# stabledif on file= storage, and nbdkit's own memory plugin as the
# baseline -- measures the start-up time (launch until the pidfile
# appears: the disk is open and the socket listening) and the peak RSS
# (VmHWM in /proc/PID/status) when idle, then writes 1 GiB with fio's nbd
# engine, once sequentially from offset 0 and once as 64 KiB writes
# scattered over the whole device, and measures the peak RSS again.  It
# prints the growth of the peak RSS against the bytes written (the ratio
# is what matters, not absolute numbers: machines differ), and for file=
# the disk space the two files use.
#
# Usage: bench/memory-scale.sh [BUILDDIR]       (not part of make check)
# Environment: PLUGIN (default BUILDDIR/plugin/.libs/...), SIZE (16T),
# WRITE (1G), BENCH_DIR (where file= puts its files: a filesystem that
# holds a file of SIZE; default: $TMPDIR or /var/tmp, else /dev/shm),
# NBDKIT, FIO.
set -euo pipefail

builddir=${1:-.}
PLUGIN=${PLUGIN:-$builddir/plugin/.libs/nbdkit-stabledif-plugin.so}
SIZE=${SIZE:-16T}
WRITE=${WRITE:-1G}
NBDKIT=${NBDKIT:-nbdkit}
FIO=${FIO:-fio}

for p in "$NBDKIT" "$FIO" numfmt; do
  command -v "$p" >/dev/null || { echo "$0: $p is needed" >&2; exit 1; }
done
[ -f "$PLUGIN" ] || { echo "$0: no plugin at $PLUGIN (give BUILDDIR)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/memory-scale.XXXXXX")
job=""
pidfile="$work/nbdkit.pid"
sock="$work/nbd.sock"
finish () {
  if [ -n "$job" ]; then
    if [ -s "$pidfile" ]; then kill "$(cat "$pidfile")" 2>/dev/null || :; fi
    wait "$job" 2>/dev/null || :
  fi
  rm -rf "$work"
  [ -z "${filedir:-}" ] || rm -rf "$filedir"
}
trap finish EXIT

size_bytes=$(numfmt --from=iec "$SIZE")
write_bytes=$(numfmt --from=iec "$WRITE")

# A directory whose filesystem holds a sparse file of SIZE (ext4 stops at
# 16 TiB - 4 KiB; XFS, btrfs and tmpfs hold it).
filedir=""
for d in ${BENCH_DIR:-} "${TMPDIR:-/var/tmp}" /var/tmp /dev/shm; do
  if [ ! -d "$d" ] || [ ! -w "$d" ]; then continue; fi
  t=$(mktemp -d "$d/memory-scale-files.XXXXXX")
  if truncate -s "$size_bytes" "$t/probe" 2>/dev/null; then
    rm -f "$t/probe"; filedir=$t; break
  fi
  rm -rf "$t"
done

div () { awk "BEGIN { print ($1) / ($2) }"; }
kib () { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
status_kib () { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }

# measure NAME PATTERN NBDKIT-ARGS...: one row of the table.
measure () {
  local name=$1 pattern=$2; shift 2
  local t0 t1 pid idle_hwm hwm used=""
  rm -f "$pidfile" "$sock"
  t0=$(date +%s.%N)
  "$NBDKIT" -f -U "$sock" -P "$pidfile" --exit-with-parent "$@" \
    2>>"$work/nbdkit.log" &
  job=$!
  for _ in $(seq 600); do
    [ -s "$pidfile" ] && break
    kill -0 "$job" 2>/dev/null || { cat "$work/nbdkit.log" >&2; exit 1; }
    sleep 0.01
  done
  t1=$(date +%s.%N)
  pid=$(cat "$pidfile")
  idle_hwm=$(status_kib VmHWM "$pid")

  if [ "$pattern" = sequential ]; then
    set -- --rw=write --bs=1M --offset=0 --size="$write_bytes"
  else
    set -- --rw=randwrite --bs=64k --size="$size_bytes" \
      --io_size="$write_bytes" --norandommap --randrepeat=1
  fi
  "$FIO" --name=fill --ioengine=nbd --uri="nbd+unix:///?socket=$sock" \
    --iodepth=16 "$@" --output="$work/fio.out" >/dev/null
  hwm=$(status_kib VmHWM "$pid")
  if [ -n "${file:-}" ]; then
    used=$(( ($(stat -c %b "$file") + $(stat -c %b "$file.pi")) * 512 ))
  fi
  kill "$pid"
  wait "$job" || :
  job=""

  printf "%-22s %-10s %8.3f s  %12s  %12s  %12s  %8.4f" \
    "$name" "$pattern" "$(div "$t1 - $t0" 1)" "$(kib "$idle_hwm")" \
    "$(kib "$hwm")" "$(kib $((hwm - idle_hwm)))" \
    "$(div "($hwm - $idle_hwm) * 1024" "$write_bytes")"
  if [ -n "$used" ]; then
    printf "  %s on disk (%.4f of written)" "$(numfmt --to=iec "$used")" \
      "$(div "$used" "$write_bytes")"
  fi
  printf "\n"
}

echo "device $SIZE ($size_bytes bytes), writing $WRITE ($write_bytes bytes)"
echo "nbdkit $("$NBDKIT" --version | awk '{print $2}'), plugin $PLUGIN"
[ -n "$filedir" ] && echo "file= storage in $filedir ($(stat -f -c %T "$filedir"))"
printf "%-22s %-10s %10s  %12s  %12s  %12s  %8s\n" \
  storage pattern start-up "peak idle" "peak after" growth "growth/written"
for pattern in sequential scattered; do
  file=""
  measure "nbdkit memory" "$pattern" memory "$size_bytes"
  measure "stabledif memory" "$pattern" "$PLUGIN" "$size_bytes"
  measure "stabledif memory crc64" "$pattern" "$PLUGIN" "$size_bytes" \
    format=EXT-DIF-TYPE1-CRC64
  if [ -n "$filedir" ]; then
    file="$filedir/disk"
    rm -f "$file" "$file.pi"
    measure "stabledif file" "$pattern" "$PLUGIN" "$size_bytes" file="$file"
    rm -f "$file" "$file.pi"
    file=""
  else
    echo "stabledif file: skipped, no filesystem here holds a $SIZE file" \
         "(set BENCH_DIR)"
  fi
done
