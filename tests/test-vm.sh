#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A Linux guest whose disk is the data view of a stabledif device.
#
# Boots Debian's kernel under QEMU (KVM if usable, else TCG) with an
# initramfs built for the test, no IP network.  QEMU's own NBD client
# attaches the data view of a 64 MiB T10-DIF-TYPE1-CRC device over a
# Unix socket as a virtio disk; the guest makes an ext4 filesystem,
# writes files, syncs, drops its caches, reads them back and compares
# checksums, runs e2fsck -fn, and powers off.  On the host the device's
# counters (stabledif-ctl) must show the guest's writes and flushes, PI
# inserted for every block written, and no PI error of any kind.
#
# SKIP (77) without qemu-system-x86_64, a kernel image or busybox-static.
: "${STABLEDIF_TEST_TIMEOUT:=600}"
source "${srcdir:-$(dirname "$0")}/functions.sh"
source "$srcdir/vm/functions-vm.sh"

ctl_prog="$top_builddir/client/stabledif-ctl/stabledif-ctl"
requires "$NBDKIT" python3
[ -x "$ctl_prog" ] || fail "$ctl_prog not built"
vm_requires

initrd="$tmpdir/initrd.cpio"
vm_initramfs "$initrd" -m virtio_pci -m virtio_blk \
  -b /sbin/mke2fs -b /sbin/e2fsck

log="$tmpdir/console.log"
ctl="$tmpdir/ctl.sock"
events="$tmpdir/events.jsonl"
counters="$tmpdir/counters.json"

start=$(date +%s)
# QEMU's NBD client on the data view; after the guest is gone, while
# nbdkit still runs, read the counters and run "stabledif-ctl check".
boot=$(vm_boot_cmd "$log" "$initrd" fs \
  "-drive file=nbd+unix:///data?socket=\$unixsocket,format=raw,if=virtio")
rc=0
serve size=64M format=T10-DIF-TYPE1-CRC "ctl=$ctl" "events=$events" -- \
  "$boot; echo \$? > $tmpdir/qemu.rc;" \
  "$ctl_prog -s $ctl --json counters > $counters &&" \
  "$ctl_prog -s $ctl check > $tmpdir/check.txt" || rc=$?
echo "$0: guest boot and test took $(( $(date +%s) - start ))s"
cat "$log.host"

[ "$(cat "$tmpdir/qemu.rc")" = 0 ] || {
  vm_show "$log"; fail "QEMU exit status $(cat "$tmpdir/qemu.rc")"; }
vm_result "$log" fs
grep -aq '^STABLEDIF-VM: done' "$log" || { vm_show "$log"; fail "guest did not finish"; }
[ $rc = 0 ] || { cat "$tmpdir/check.txt" "$counters" >&2 || :; fail "stabledif-ctl counters/check failed (status $rc)"; }

# What the device saw: writes and flushes through the data view, PI
# inserted for all of it, nothing rejected, nothing failed.
python3 - "$counters" <<'EOF' || fail "counters do not show a clean run: $(cat "$counters")"
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
data = c["requests"]["data"]
problems = []
if data["write"] <= 0: problems.append("no writes")
if data["flush"] <= 0: problems.append("no flushes")
if data["read"] <= 0: problems.append("no reads")
# 512-byte intervals: every byte written got its PI generated.
if c["blocks"]["generated"] * 512 < c["bytes"]["data"]["write"]:
    problems.append("fewer blocks generated than written")
for side in ("write_errors", "read_errors"):
    for check, n in c[side].items():
        if n: problems.append("%s.%s=%d" % (side, check, n))
for k in ("writes_rejected", "reads_failed"):
    if c[k]: problems.append("%s=%d" % (k, c[k]))
print("device: %d writes (%d bytes), %d flushes, %d reads, %d blocks generated, no PI errors"
      % (data["write"], c["bytes"]["data"]["write"], data["flush"],
         data["read"], c["blocks"]["generated"]))
if problems:
    print("problems: " + ", ".join(problems), file=sys.stderr)
    sys.exit(1)
EOF
# The events file holds failures only: it must be empty or absent.
if [ -s "$events" ]; then
  cat "$events" >&2
  fail "the device recorded PI failures"
fi
