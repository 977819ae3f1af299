#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Boot the VM tests' guest once, bounded in time.
#
#   run-vm.sh LOG TIMEOUT KERNEL INITRD APPEND [QEMU-ARGS...]
#
# Runs qemu-system-x86_64 (1 vCPU, 512 MiB, no network, no display,
# console on the serial port, written to LOG) with KERNEL, INITRD and the
# kernel command line APPEND, plus QEMU-ARGS (disks, virtio-serial
# ports).  The guest (tests/vm/init) powers itself off when done.
#
# Accelerator: $STABLEDIF_VM_ACCEL (kvm or tcg) if set; otherwise KVM
# when /dev/kvm can be opened, else TCG.  A KVM guest that shows no
# sign of life from /init within $STABLEDIF_VM_KVM_PROBE seconds (default 20:
# nested KVM is sometimes present but broken) is killed and the boot is
# repeated under TCG.  With $STABLEDIF_VM_ACCEL_CACHE set to a file,
# that verdict is remembered there, so the next boot goes straight to
# TCG.
#
# Exit status: QEMU's (0 after a normal power-off); 124 if the guest
# was still running after TIMEOUT seconds (it is then killed).  Started
# by nbdkit --run, so it uses only what the environment passes.
set -u

[ $# -ge 5 ] || { echo "usage: $0 LOG TIMEOUT KERNEL INITRD APPEND [QEMU-ARGS...]" >&2; exit 2; }
log=$1 timeout=$2 kernel=$3 initrd=$4 append=$5
shift 5
: "${QEMU:=qemu-system-x86_64}"
: "${STABLEDIF_VM_KVM_PROBE:=20}"
cache=${STABLEDIF_VM_ACCEL_CACHE:-}

# The first line tests/vm/init prints.
init_banner='STABLEDIF-VM: init'

accel=${STABLEDIF_VM_ACCEL:-}
if [ -z "$accel" ] && [ -n "$cache" ] && [ "$(cat "$cache" 2>/dev/null)" = tcg ]; then
  accel=tcg
  echo "run-vm: $cache says KVM is unusable here: using TCG" >> "$log.host"
elif [ -z "$accel" ]; then
  if [ -c /dev/kvm ] && { exec 3<>/dev/kvm; } 2>/dev/null; then
    exec 3>&-
    accel=kvm
  else
    accel=tcg
  fi
fi

qpid=
stop_qemu () {
  if [ -n "$qpid" ]; then
    kill "$qpid" 2>/dev/null
    wait "$qpid" 2>/dev/null
    qpid=
  fi
}
trap stop_qemu EXIT

# boot ACCEL PROBE: run QEMU; with PROBE, give up after
# $STABLEDIF_VM_KVM_PROBE seconds without a line from /init (status 125).
boot () {
  local a=$1 probe=$2 ticks=0 seen=
  shift 2
  echo "run-vm: booting under $a (timeout ${timeout}s)" >> "$log.host"
  : > "$log"
  "$QEMU" -accel "$a" -m 512 -smp 1 -nodefaults -nographic -no-reboot \
    -nic none -serial "file:$log" -monitor none \
    -kernel "$kernel" -initrd "$initrd" -append "$append" \
    "$@" </dev/null >>"$log.host" 2>&1 &
  qpid=$!
  # Poll twice a second, bounded by the timeout.
  while kill -0 "$qpid" 2>/dev/null; do
    if [ $ticks -ge $((timeout * 2)) ]; then
      echo "run-vm: guest still running after ${timeout}s: killed" >> "$log.host"
      stop_qemu
      return 124
    fi
    if [ "$probe" = yes ] && [ -z "$seen" ]; then
      if grep -q "$init_banner" "$log" 2>/dev/null; then
        seen=yes
      elif [ $ticks -ge $((STABLEDIF_VM_KVM_PROBE * 2)) ]; then
        echo "run-vm: no output from /init under KVM after ${STABLEDIF_VM_KVM_PROBE}s" >> "$log.host"
        stop_qemu
        return 125
      fi
    fi
    sleep 0.5
    ticks=$((ticks + 1))
  done
  wait "$qpid"
  local rc=$?
  qpid=
  return $rc
}

start=$(date +%s)
if [ "$accel" = kvm ] && [ -z "${STABLEDIF_VM_ACCEL:-}" ]; then
  boot kvm yes "$@"
  rc=$?
  if [ $rc = 125 ]; then
    echo "run-vm: KVM is unusable here; booting again under TCG" >> "$log.host"
    [ -z "$cache" ] || echo tcg > "$cache"
    boot tcg no "$@"
    rc=$?
  fi
else
  boot "$accel" no "$@"
  rc=$?
fi
echo "run-vm: guest ran $(( $(date +%s) - start ))s, QEMU exit status $rc" >> "$log.host"
exit $rc
