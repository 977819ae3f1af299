#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/power-cut.sh: file= storage across many real power cuts.
#
#   make -C BUILDDIR/tests vm-powercut
#   bench/power-cut.sh [BUILDDIR]
#
# The guest of tests/test-vm-powercut.sh (Debian's kernel under QEMU,
# an ext4 image, vm-powercut writing an 8 MiB file= disk through both
# views) is killed with SIGKILL CUTS times, each a random 1 to 3 s after
# the first flush of its writing phase; each boot checks what the
# previous cut left (after the dirty-region log's recovery), then writes
# again, so CUTS cuts cost CUTS+1 boots (tests/vm/functions-powercut.sh).
# Per cut and in total it prints the blocks recovered, the false PI
# errors (blocks that fail a PI check: must be 0), the lost flushed
# writes (blocks older than a write acknowledged before the last flush
# the host saw complete: must be 0) and the blocks holding contents no
# write gave them (must be 0).  Exit status 1 if any of those is not 0.
#
# Environment: CUTS (default 20), NOLOG=1 (dirty-log=off: shows the
# false PI errors the log prevents), WRITEBACK (vm-powercut -k: force
# PATH or PATH.pi back to the disk every N writes, default 4; 0 leaves
# write-back to the kernel alone), QEMU, STABLEDIF_VM_KERNEL,
# STABLEDIF_VM_ACCEL (see tests/vm/run-vm.sh).  Not part of "make check".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=${1:-.}
[ -x "$builddir/tests/vm-powercut" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)
prog=$builddir/tests/vm-powercut
[ -x "$prog" ] ||
  { echo "$0: $prog not found: make -C BUILDDIR/tests vm-powercut" >&2; exit 2; }

: "${CUTS:=20}" "${NOLOG:=}" "${WRITEBACK:=4}"
# The test helpers, as "make check" runs them.
export srcdir=$here/../tests top_builddir=$builddir
export PLUGIN=${PLUGIN:-$builddir/stabledif.so}
source "$srcdir/functions.sh"
source "$srcdir/vm/functions-vm.sh"
source "$srcdir/vm/functions-powercut.sh"
vm_requires
pc_prepare "$tmpdir" "$prog"

opts=-k,$WRITEBACK
[ "$NOLOG" = 1 ] && opts="-n,$opts"
echo "power-cut: $CUTS cuts, dirty-log=$([ "$NOLOG" = 1 ] && echo off || echo on)," \
  "forced write-back every $WRITEBACK writes"

tot_rec=0 tot_pi=0 tot_lost=0 tot_bad=0 start=$(date +%s)
cbase= flushed=
for ((cut = 0; cut <= CUTS; cut++)); do
  args=$opts
  [ -n "$cbase" ] && args="$args,-c,$cbase:$flushed"
  wbase=$(( (cut + 1) * 1000000 ))
  [ $cut -lt "$CUTS" ] && args="$args,-w,$wbase"
  log=$tmpdir/boot$cut.log
  pc_boot "$log" "$args"
  if [ -n "$cbase" ]; then
    line=$(pc_check_line "$log")
    rec=$(pc_field "$line" recovered) pi=$(pc_field "$line" pi_errors)
    lost=$(pc_field "$line" lost) bad=$(pc_field "$line" bad)
    printf 'cut %2d: %4d ms of writing, %4d generations flushed: recovered %3d, false PI errors %d, lost flushed writes %d, bad blocks %d\n' \
      "$cut" "$prev_ms" "$((flushed - cbase))" "$rec" "$pi" "$lost" "$bad"
    tot_rec=$((tot_rec + rec)) tot_pi=$((tot_pi + pi))
    tot_lost=$((tot_lost + lost)) tot_bad=$((tot_bad + bad))
  fi
  [ $cut -lt "$CUTS" ] || break
  [ -n "$pc_flushed" ] || { vm_show "$log"; fail "boot $cut: no FLUSHED line"; }
  cbase=$wbase flushed=$pc_flushed prev_ms=$pc_cut_ms
done
echo "total: $CUTS cuts in $(( $(date +%s) - start ))s: recovered $tot_rec blocks," \
  "false PI errors $tot_pi, lost flushed writes $tot_lost, bad blocks $tot_bad"
[ $((tot_pi + tot_lost + tot_bad)) = 0 ]
