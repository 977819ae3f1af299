#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# file= storage keeps its crash promise across a real power cut.
#
# Boots Debian's kernel under QEMU (KVM if usable, else TCG) twice on an
# ext4 image (tests/vm/functions-powercut.sh).  In the first boot
# vm-powercut (tests/vm/vm-powercut.c) writes an 8 MiB file= disk in the
# guest through the data and dif views, a flush per generation of 32
# writes, forcing PATH or PATH.pi back to the disk every 4 writes, until
# the host kills QEMU with SIGKILL 1 to 3 s after the first flush: the
# guest's unwritten pages are lost, so the disk's data and PI come from
# different moments.  In the second boot opening the disk runs the
# dirty-region log's recovery and every block is read through the data
# view: no PI error, no block older than its last write before the last
# "FLUSHED" line the host saw, no block with contents no write gave it.
# STABLEDIF_POWERCUT_NOLOG=1 runs both boots with dirty-log=off, which
# must fail (false guard errors).
#
# SKIP (77) without qemu-system-x86_64, a kernel image, busybox-static or
# mke2fs.
: "${STABLEDIF_TEST_TIMEOUT:=600}"
source "${srcdir:-$(dirname "$0")}/functions.sh"
source "$srcdir/vm/functions-vm.sh"
source "$srcdir/vm/functions-powercut.sh"

vm_requires
pc_prepare "$tmpdir" "$top_builddir/tests/vm-powercut"
nolog=
[ "${STABLEDIF_POWERCUT_NOLOG:-}" = 1 ] && nolog=-n,

start=$(date +%s)
pc_boot "$tmpdir/write.log" "$nolog-w,1000"
[ -n "$pc_flushed" ] || { vm_show "$tmpdir/write.log"; fail "no FLUSHED line"; }
echo "$0: cut after ${pc_cut_ms} ms of writing; last flushed generation $pc_flushed"
pc_boot "$tmpdir/check.log" "$nolog-c,1000:$pc_flushed"
echo "$0: two boots took $(( $(date +%s) - start ))s"
cat "$tmpdir/check.log.host"
line=$(pc_check_line "$tmpdir/check.log")
echo "$0: guest: $line"
case $line in
  "CHECK PASS "*) ;;
  *) vm_show "$tmpdir/check.log"; fail "after the cut: $line" ;;
esac
