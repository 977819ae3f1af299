# SPDX-License-Identifier: BSD-3-Clause
# Helpers of the VM tests (tests/test-vm*.sh).  Sourced after
# tests/functions.sh.
#
# The guest is Debian's kernel (/boot/vmlinuz-*, package linux-image-amd64
# or linux-image-cloud-amd64) with an initramfs built here from
# busybox-static, the modules it needs and the programs the test names.
# It has no IP network: its disks and NBD connections reach nbdkit
# through QEMU (Unix sockets on the host).

: "${QEMU:=qemu-system-x86_64}"
vm_dir="$srcdir/vm"

# Seconds a guest may run: generous for TCG on a busy machine.
: "${STABLEDIF_VM_TIMEOUT:=300}"

# Where run-vm.sh remembers that KVM is present but unusable (nested
# KVM can be), so that only the first VM test of a build waits for it.
: "${STABLEDIF_VM_ACCEL_CACHE:=${top_builddir:-.}/tests/vm-accel.cache}"
export STABLEDIF_VM_ACCEL_CACHE

# vm_requires: SKIP (exit 77) unless QEMU, a kernel with its modules,
# busybox-static and cpio are present.  Sets vm_kernel and vm_kver.
vm_requires () {
  local k kver
  requires "$QEMU" cpio depmod modprobe
  vm_kernel=${STABLEDIF_VM_KERNEL:-}
  if [ -z "$vm_kernel" ]; then
    # The newest /boot/vmlinuz-* whose modules are installed.
    for k in $(ls /boot/vmlinuz-* 2>/dev/null | sort -rV); do
      kver=${k#/boot/vmlinuz-}
      if [ -r "$k" ] && [ -d "/lib/modules/$kver/kernel" ]; then
        vm_kernel=$k
        break
      fi
    done
  fi
  if [ -z "$vm_kernel" ] || [ ! -r "$vm_kernel" ]; then
    echo "$0: SKIP: no readable /boot/vmlinuz-* with modules (Debian: linux-image-cloud-amd64)"
    exit 77
  fi
  vm_kver=${vm_kernel#/boot/vmlinuz-}
  if [ ! -d "/lib/modules/$vm_kver/kernel" ]; then
    echo "$0: SKIP: no modules for $vm_kernel in /lib/modules/$vm_kver"
    exit 77
  fi
  if ! { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; }; then
    echo "$0: SKIP: no static /bin/busybox (Debian: busybox-static)"
    exit 77
  fi
}

# The guest kernel's command line, before the guest's own parameters.
# no_timer_check: under TCG on a loaded host the guest's timer check can
# fail ("IO-APIC + timer doesn't work") and panic the boot.
vm_cmdline="console=ttyS0 panic=-1 quiet no_timer_check"

# vm_initramfs OUT [-i INIT] [-m MODULE]... [-b PROGRAM]... [-f FILE]...: build the
# guest's initramfs (tests/vm/mkinitramfs.sh) with INIT as its /init
# (default tests/vm/init).
vm_initramfs () {
  local out=$1 init=$vm_dir/init; shift
  if [ "${1-}" = -i ]; then
    init=$2
    shift 2
  fi
  bash "$vm_dir/mkinitramfs.sh" -k "$vm_kver" -i "$init" -o "$out" "$@" ||
    fail "building the initramfs failed"
}

# vm_boot_cmd LOG INITRD TESTS [QEMU-ARGS...]: print the shell command
# (for nbdkit --run) that boots the guest, running the guest tests TESTS
# (see tests/vm/init), console in LOG.  Arguments are quoted for the
# shell; "\$unixsocket" etc. in QEMU-ARGS are left for the --run shell.
vm_boot_cmd () {
  local log=$1 initrd=$2 tests=$3; shift 3
  local append="$vm_cmdline stabledif.tests=$tests"
  local cmd a
  cmd="QEMU=$(printf %q "$QEMU") bash $(printf %q "$vm_dir/run-vm.sh")"
  for a in "$log" "$STABLEDIF_VM_TIMEOUT" "$vm_kernel" "$initrd" "$append"; do
    cmd="$cmd $(printf %q "$a")"
  done
  for a in "$@"; do
    cmd="$cmd $a"
  done
  echo "$cmd"
}

# vm_result LOG TEST: PASS if the guest reported TEST passed, else fail
# with the guest's reason and the end of its console.
vm_result () {
  local log=$1 t=$2 line
  line=$(grep -a "^STABLEDIF-VM: $t " "$log" | tail -1 | tr -d '\r')
  case $line in
    "STABLEDIF-VM: $t PASS") echo "$0: guest: $t PASS" ;;
    "")
      vm_show "$log"
      fail "guest did not report test $t" ;;
    *)
      vm_show "$log"
      fail "guest: ${line#STABLEDIF-VM: }" ;;
  esac
}

# vm_show LOG: the end of the guest console and the host-side log.
vm_show () {
  echo "--- guest console (last 40 lines) ---" >&2
  tail -40 "$1" | tr -d '\r' >&2 || :
  echo "--- host ---" >&2
  cat "$1.host" >&2 || :
}

# vm_boot_nbd LOG INITRD TESTS AFTER DEVICE...: serve each DEVICE, a
# string "PORT NBDKIT-ARGS..." (the plugin, its parameters and any
# filters, e.g. "nbd-t10 $PLUGIN format=T10-DIF-TYPE1-CRC size=64M"),
# with its own nbdkit on the Unix socket $tmpdir/PORT.sock; boot the
# guest (running the guest tests TESTS, console in LOG) with one
# virtio-serial port per DEVICE, named PORT and connected to that
# socket; then, while the servers still run, the shell command AFTER
# (may be ":").  QEMU's exit status goes to $tmpdir/qemu.rc.  Returns
# the status of AFTER (or nbdkit's, if a server failed).  Each server
# runs the next one under --run, the last one the guest.
vm_boot_nbd () {
  local log=$1 initrd=$2 tests=$3 after=$4; shift 4
  local qargs=(-device virtio-serial-pci,id=vs0) i=0 d port cmd inner preload=
  for d in "$@"; do
    port=${d%% *}
    qargs+=("-chardev socket,id=c$i,path=$tmpdir/$port.sock"
            "-device virtserialport,bus=vs0.0,chardev=c$i,name=$port")
    i=$((i + 1))
  done
  cmd="$(vm_boot_cmd "$log" "$initrd" "$tests" "${qargs[@]}");"
  cmd="$cmd echo \$? > $tmpdir/qemu.rc; $after"
  # The servers started from a --run command need the preload again.
  [ -z "$nbdkit_preload" ] || preload="LD_PRELOAD='$nbdkit_preload'"
  for ((i = $#; i > 1; i--)); do
    d=${!i} port=${!i%% *}
    inner=$(printf %q "$(run_cmd "$cmd")")
    cmd="$preload $NBDKIT -U $tmpdir/$port.sock --exit-with-parent ${d#* } --run $inner"
  done
  port=${1%% *}
  # shellcheck disable=SC2086 # NBDKIT-ARGS are words
  run_nbdkit -U "$tmpdir/$port.sock" --exit-with-parent ${1#* } \
    --run "$(run_cmd "$cmd")"
}

# vm_probe_line LOG PORT SW: the last result line of the guest test
# "probe" (tests/vm/init) for PORT with stable_writes=SW at mount, less
# its "STABLEDIF-VM: PROBE:" prefix; empty if there is none.
vm_probe_line () {
  grep -a "^STABLEDIF-VM: PROBE: $2 .* stable_writes=$3 " "$1" | tail -1 |
    tr -d '\r' | sed 's/^STABLEDIF-VM: PROBE: //'
}

# vm_field LINE KEY: the value of KEY=VALUE in LINE (words), or empty.
vm_field () {
  local w
  for w in $1; do
    case $w in "$2="*) echo "${w#*=}"; return 0 ;; esac
  done
}
