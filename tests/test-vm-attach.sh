#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The kernel's NBD client in a guest, attached with stabledif-attach.
#
# Two stabledif devices, 64 MiB each: T10-DIF-TYPE1-CRC and format=none.
# The guest has no IP network: each device reaches it through a
# virtio-serial port whose host end QEMU connects to nbdkit's Unix
# socket; in the guest, vm-relay bridges the port to a Unix socket,
# stabledif-attach attaches it to /dev/nbdN.  For each device the guest
# checks /sys/block/nbdN/queue/stable_writes (1 for T10, 0 for none),
# makes ext4 on it, writes, syncs, reads back, fscks, detaches.  On the
# host, each device's counters show the writes and no PI error.
#
# SKIP (77) without qemu-system-x86_64, a kernel image or busybox-static.
: "${STABLEDIF_TEST_TIMEOUT:=600}"
source "${srcdir:-$(dirname "$0")}/functions.sh"
source "$srcdir/vm/functions-vm.sh"

ctl_prog="$top_builddir/client/stabledif-ctl/stabledif-ctl"
attach_prog="$top_builddir/client/stabledif-attach/stabledif-attach"
relay_prog="$top_builddir/tests/vm-relay"
requires "$NBDKIT" python3
for p in "$ctl_prog" "$attach_prog" "$relay_prog"; do
  [ -x "$p" ] || fail "$p not built"
done
vm_requires

initrd="$tmpdir/initrd.cpio"
vm_initramfs "$initrd" -m virtio_pci -m virtio_console -m nbd \
  -b /sbin/mke2fs -b /sbin/e2fsck -b "$attach_prog" -b "$relay_prog"

log="$tmpdir/console.log"
ctl_t10="$tmpdir/t10-ctl.sock" ctl_none="$tmpdir/none-ctl.sock"
events_t10="$tmpdir/t10-events.jsonl" events_none="$tmpdir/none-events.jsonl"

# Guest tests: device on port nbd-t10 -> /dev/nbd0, stable_writes 1;
# port nbd-none -> /dev/nbd1, stable_writes 0.  After the guest, while
# the servers run, their counters and "stabledif-ctl check".
after="$ctl_prog -s $ctl_t10 --json counters > $tmpdir/t10.json &&"
after="$after $ctl_prog -s $ctl_none --json counters > $tmpdir/none.json &&"
after="$after $ctl_prog -s $ctl_t10 check && $ctl_prog -s $ctl_none check"

start=$(date +%s)
rc=0
vm_boot_nbd "$log" "$initrd" "attach:nbd-t10:0:1,attach:nbd-none:1:0" "$after" \
  "nbd-t10 $PLUGIN format=T10-DIF-TYPE1-CRC size=64M ctl=$ctl_t10 events=$events_t10" \
  "nbd-none $PLUGIN format=none size=64M ctl=$ctl_none events=$events_none" || rc=$?
echo "$0: guest boot and test took $(( $(date +%s) - start ))s"
cat "$log.host"
grep -a -e '^guest:' -e '^/dev/nbd' -e '^  ' "$log" | tr -d '\r' || :

[ "$(cat "$tmpdir/qemu.rc")" = 0 ] || {
  vm_show "$log"; fail "QEMU exit status $(cat "$tmpdir/qemu.rc")"; }
vm_result "$log" attach:nbd-t10:0:1
vm_result "$log" attach:nbd-none:1:0
grep -aq '^STABLEDIF-VM: done' "$log" || { vm_show "$log"; fail "guest did not finish"; }
[ $rc = 0 ] || fail "stabledif-ctl counters/check failed (status $rc)"

for dev in t10 none; do
  python3 - "$tmpdir/$dev.json" "$dev" <<'EOF' || fail "$dev: counters do not show a clean run: $(cat "$tmpdir/$dev.json")"
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
data = c["requests"]["data"]
problems = []
if data["write"] <= 0: problems.append("no writes")
if data["read"] <= 0: problems.append("no reads")
if data["flush"] <= 0: problems.append("no flushes")
for side in ("write_errors", "read_errors"):
    for check, n in c[side].items():
        if n: problems.append("%s.%s=%d" % (side, check, n))
for k in ("writes_rejected", "reads_failed"):
    if c[k]: problems.append("%s=%d" % (k, c[k]))
print("%s device: %d writes (%d bytes), %d flushes, %d reads, no PI errors"
      % (sys.argv[2], data["write"], c["bytes"]["data"]["write"],
         data["flush"], data["read"]))
if problems:
    print("problems: " + ", ".join(problems), file=sys.stderr)
    sys.exit(1)
EOF
done
for f in "$events_t10" "$events_none"; do
  if [ -s "$f" ]; then
    cat "$f" >&2
    fail "a device recorded PI failures ($f)"
  fi
done
