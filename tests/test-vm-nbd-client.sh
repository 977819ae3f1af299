#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The real nbd-client(8) on the data view, as users try it first.
#
# A 32 MiB T10-DIF-TYPE1-CRC device behind nbdkit's delay filter (D ms
# per write) reaches a QEMU guest over virtio-serial (vm-relay, as in
# test-vm-attach.sh).  In the guest, Debian's nbd-client attaches the
# data view,
#   nbd-client -unix SOCKET -N data /dev/nbd0
# which leaves /sys/block/nbd0/queue/stable_writes at the driver's 0;
# the guest writes 1 there before mkfs, makes ext4, mounts it and runs
# vm-stable-probe's rewrite probe: the second write of a page under
# writeback must wait for the device (median >= 0.8 D), as it does after
# stabledif-attach.  nbd-client -d detaches.  On the host the device's
# counters must show the guest's writes and no PI error.
#
# SKIP (77) without qemu-system-x86_64, a kernel image, busybox-static,
# nbd-client (Debian: nbd-client) or nbdkit's delay filter.
: "${STABLEDIF_TEST_TIMEOUT:=600}"
source "${srcdir:-$(dirname "$0")}/functions.sh"
source "$srcdir/vm/functions-vm.sh"

ctl_prog="$top_builddir/client/stabledif-ctl/stabledif-ctl"
relay_prog="$top_builddir/tests/vm-relay"
probe_prog="$top_builddir/tests/vm-stable-probe"
requires "$NBDKIT" python3
for p in "$ctl_prog" "$relay_prog" "$probe_prog"; do
  [ -x "$p" ] || fail "$p not built"
done
nbd_client=$(PATH=/usr/sbin:/sbin:$PATH command -v nbd-client) ||
  { echo "$0: SKIP: no nbd-client (Debian: nbd-client)"; exit 77; }
filter_dir=$("$NBDKIT" --dump-config | sed -n 's/^filterdir=//p')
[ -e "$filter_dir/nbdkit-delay-filter.so" ] ||
  { echo "$0: SKIP: nbdkit has no delay filter ($filter_dir)"; exit 77; }
vm_requires

# Device write latency (ms) and probe iterations.
d_ms=50 iter=9

initrd="$tmpdir/initrd.cpio"
vm_initramfs "$initrd" -m virtio_pci -m virtio_console -m nbd \
  -b /sbin/mke2fs -b "$nbd_client" -b "$relay_prog" -b "$probe_prog"

log="$tmpdir/console.log"
ctl="$tmpdir/ctl.sock" events="$tmpdir/events.jsonl"
t="nbd-client:nbd-t10:0:ext4:rewrite/$iter:1"
start=$(date +%s)
rc=0
vm_boot_nbd "$log" "$initrd" "$t" \
  "$ctl_prog -s $ctl --json counters > $tmpdir/counters.json" \
  "nbd-t10 --filter=delay $PLUGIN format=T10-DIF-TYPE1-CRC size=32M wdelay=${d_ms}ms ctl=$ctl events=$events" ||
  rc=$?
echo "$0: guest boot and test took $(( $(date +%s) - start ))s"
cat "$log.host"
grep -a -e '^guest:' -e '^STABLEDIF-VM: PROBE:' "$log" | tr -d '\r' || :

[ "$(cat "$tmpdir/qemu.rc")" = 0 ] || {
  vm_show "$log"; fail "QEMU exit status $(cat "$tmpdir/qemu.rc")"; }
vm_result "$log" "$t"
grep -aq '^STABLEDIF-VM: done' "$log" || { vm_show "$log"; fail "guest did not finish"; }
[ $rc = 0 ] || fail "stabledif-ctl counters failed (status $rc)"

line=$(vm_probe_line "$log" nbd-t10 1)
[ -n "$line" ] || { vm_show "$log"; fail "no probe result with stable_writes=1"; }
[ "$(vm_field "$line" attach)" = 0 ] ||
  fail "nbd-client left stable_writes=$(vm_field "$line" attach), expected the driver's 0"
med=$(vm_field "$line" median_us)
[ "$med" -ge $((d_ms * 800)) ] ||
  fail "stable_writes=1 written after nbd-client: median rewrite ${med} us < 0.8 x ${d_ms} ms: the writer did not wait"
echo "$0: nbd-client, stable_writes=1 written before mkfs: median rewrite $med us (D = $d_ms ms)"

python3 - "$tmpdir/counters.json" <<'PY' || fail "counters do not show a clean run: $(cat "$tmpdir/counters.json")"
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
problems = []
if c["requests"]["data"]["write"] <= 0: problems.append("no writes")
for side in ("write_errors", "read_errors"):
    for check, n in c[side].items():
        if n: problems.append("%s.%s=%d" % (side, check, n))
for k in ("writes_rejected", "reads_failed"):
    if c[k]: problems.append("%s=%d" % (k, c[k]))
print("device: %d writes through the data view, no PI errors" % c["requests"]["data"]["write"])
if problems:
    print("problems: " + ", ".join(problems), file=sys.stderr)
    sys.exit(1)
PY
if [ -s "$events" ]; then
  cat "$events" >&2
  fail "the device recorded PI failures"
fi
