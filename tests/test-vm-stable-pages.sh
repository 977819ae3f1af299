#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# What stable_writes costs a real kernel's writers on this device.
#
# Two stabledif devices, 32 MiB each, T10-DIF-TYPE1-CRC and format=none,
# each behind nbdkit's delay filter adding D ms to every write, attached
# in a QEMU guest with stabledif-attach (stable_writes 1 and 0; the
# kernel's NBD client over virtio-serial, as in test-vm-attach.sh).  On
# each device the guest makes ext4, mounts it and runs vm-stable-probe's
# rewrite probe (write a page, start its writeback, write it again,
# time the second write), first with the flag stabledif-attach set,
# then with the other value written to sysfs before mkfs.  Whenever
# the flag was 1 at mount time the median rewrite must wait for the
# device (>= 0.8 D); whenever it was 0 it must not (< D/10): the cost
# follows the flag, not the device behind it.
#
# SKIP (77) without qemu-system-x86_64, a kernel image or busybox-static.
: "${STABLEDIF_TEST_TIMEOUT:=600}"
source "${srcdir:-$(dirname "$0")}/functions.sh"
source "$srcdir/vm/functions-vm.sh"

attach_prog="$top_builddir/client/stabledif-attach/stabledif-attach"
relay_prog="$top_builddir/tests/vm-relay"
probe_prog="$top_builddir/tests/vm-stable-probe"
requires "$NBDKIT"
for p in "$attach_prog" "$relay_prog" "$probe_prog"; do
  [ -x "$p" ] || fail "$p not built"
done
filter_dir=$("$NBDKIT" --dump-config | sed -n 's/^filterdir=//p')
[ -e "$filter_dir/nbdkit-delay-filter.so" ] ||
  { echo "$0: SKIP: nbdkit has no delay filter ($filter_dir)"; exit 77; }
vm_requires

# Device write latency (ms) and probe iterations per setting.
d_ms=50 iter=9

initrd="$tmpdir/initrd.cpio"
vm_initramfs "$initrd" -m virtio_pci -m virtio_console -m nbd \
  -b /sbin/mke2fs -b "$attach_prog" -b "$relay_prog" -b "$probe_prog"

log="$tmpdir/console.log"
dev="--filter=delay $PLUGIN size=32M wdelay=${d_ms}ms"
t_t10="probe:nbd-t10:0:ext4:rewrite/$iter:1+0"
t_none="probe:nbd-none:1:ext4:rewrite/$iter:0+1"
start=$(date +%s)
rc=0
vm_boot_nbd "$log" "$initrd" "$t_t10,$t_none" : \
  "nbd-t10 $dev format=T10-DIF-TYPE1-CRC" "nbd-none $dev format=none" || rc=$?
echo "$0: guest boot and test took $(( $(date +%s) - start ))s"
cat "$log.host"
grep -a '^STABLEDIF-VM: PROBE:' "$log" | tr -d '\r' || :

[ "$(cat "$tmpdir/qemu.rc")" = 0 ] || {
  vm_show "$log"; fail "QEMU exit status $(cat "$tmpdir/qemu.rc")"; }
vm_result "$log" "$t_t10"
vm_result "$log" "$t_none"
grep -aq '^STABLEDIF-VM: done' "$log" || { vm_show "$log"; fail "guest did not finish"; }
[ $rc = 0 ] || fail "nbdkit failed (status $rc)"

# Per device: the flag stabledif-attach set, then the one at mount.
checked=0
for want in "nbd-t10 1 1" "nbd-t10 1 0" "nbd-none 0 0" "nbd-none 0 1"; do
  set -- $want
  line=$(vm_probe_line "$log" "$1" "$3")
  [ -n "$line" ] || { vm_show "$log"; fail "$1: no probe result with stable_writes=$3"; }
  [ "$(vm_field "$line" attach)" = "$2" ] ||
    fail "$1: stabledif-attach set stable_writes=$(vm_field "$line" attach), expected $2"
  med=$(vm_field "$line" median_us)
  if [ "$3" = 1 ]; then
    [ "$med" -ge $((d_ms * 800)) ] ||
      fail "$1, stable_writes=1: median rewrite ${med} us < 0.8 x ${d_ms} ms: the writer did not wait for writeback"
  else
    [ "$med" -lt $((d_ms * 100)) ] ||
      fail "$1, stable_writes=0: median rewrite ${med} us >= ${d_ms} ms / 10: the writer waited"
  fi
  echo "$0: $1 (stabledif-attach set $2), stable_writes=$3 at mount: median rewrite $med us (D = $d_ms ms)"
  checked=$((checked + 1))
done
[ $checked = 4 ] || fail "checked $checked probe results, expected 4"
