# SPDX-License-Identifier: BSD-3-Clause
# Helpers of the power-cut runs (tests/test-vm-powercut.sh,
# bench/power-cut.sh).  Sourced after tests/functions.sh and
# tests/vm/functions-vm.sh.
#
# The guest (tests/vm/init-powercut) runs vm-powercut on a file= disk in
# an ext4 filesystem on a virtio disk.  The disk image is a plain file
# that QEMU opens with cache=unsafe: what QEMU has written survives its
# death (the host's page cache keeps it), what the guest kernel still
# held in its page cache does not.  Each boot checks what the previous
# one left, then writes until the host kills QEMU (SIGKILL) a random
# while after the guest's first flush: a power cut, with the guest's
# dirty pages of the disk's files lost, whichever of them the guest had
# written back kept.  N cuts cost N+1 boots.

# Milliseconds of writing before the cut: at least PC_CUT_MIN_MS, less
# than PC_CUT_MAX_MS, chosen at random for each cut.
: "${PC_CUT_MIN_MS:=1000}" "${PC_CUT_MAX_MS:=3000}"

# pc_prepare DIR PROGRAM: build the guest's initramfs with PROGRAM (the
# built vm-powercut) and a fresh ext4 image of 64 MiB in DIR.  Sets
# pc_initrd and pc_image.  SKIPs without mke2fs.
pc_prepare () {
  local dir=$1 prog=$2
  requires mke2fs
  [ -x "$prog" ] || fail "$prog not built"
  pc_initrd=$dir/initrd-powercut.cpio
  pc_image=$dir/powercut.img
  vm_initramfs "$pc_initrd" -i "$vm_dir/init-powercut" \
    -m virtio_pci -m virtio_blk -b "$prog"
  rm -f "$pc_image"
  truncate -s 64M "$pc_image"
  mke2fs -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 \
    "$pc_image" || fail "mke2fs $pc_image failed"
}

# pc_last_flushed LOG: the N of the last whole "FLUSHED gen=N" line of
# the console LOG (a line the cut interrupted does not count), or
# nothing.
pc_last_flushed () {
  local log=$1
  tr -d '\r' < "$log" |
    if [ "$(tail -c 1 "$log" | od -An -tx1 | tr -d ' ')" = 0a ]; then
      cat
    else
      sed '$d'
    fi |
    sed -n 's/^FLUSHED gen=\([0-9][0-9]*\)$/\1/p' | tail -1
}

# pc_boot LOG ARGS: boot the guest with vm-powercut ARGS (its options,
# as one word with commas for spaces, see tests/vm/init-powercut).  If
# ARGS has "-w,BASE", wait for "FLUSHED gen=BASE" on the console, then
# a random PC_CUT_MIN_MS..PC_CUT_MAX_MS ms, and kill QEMU with SIGKILL;
# else wait for the guest to power off.  Messages of the host side go
# to LOG.host.  Sets pc_cut_ms to the delay
# (empty if there was no cut) and pc_flushed to pc_last_flushed LOG.
# Fails the test if the guest does not get that far.
pc_boot () {
  local log=$1 args=$2 wbase= pid rc ticks=0 limit
  local pidfile=${log%.*}.pid
  case $args in
    *-w,*) wbase=${args##*-w,}; wbase=${wbase%%,*} ;;
  esac
  rm -f "$pidfile"
  QEMU=$QEMU bash "$vm_dir/run-vm.sh" "$log" "$STABLEDIF_VM_TIMEOUT" \
    "$vm_kernel" "$pc_initrd" \
    "$vm_cmdline stabledif.powercut=$args" \
    -drive "file=$pc_image,format=raw,if=virtio,cache=unsafe" \
    -pidfile "$pidfile" 2>>"$log.host" &
  pid=$!
  pc_cut_ms=
  if [ -n "$wbase" ]; then
    limit=$((STABLEDIF_VM_TIMEOUT * 5))
    while ! grep -aq "^FLUSHED gen=$wbase\\b" "$log" 2>/dev/null; do
      if ! kill -0 "$pid" 2>/dev/null || [ $ticks -ge $limit ]; then
        kill "$pid" 2>/dev/null || :
        wait "$pid" || :
        vm_show "$log"
        fail "the guest did not start writing"
      fi
      sleep 0.2
      ticks=$((ticks + 1))
    done
    pc_cut_ms=$((PC_CUT_MIN_MS + RANDOM % (PC_CUT_MAX_MS - PC_CUT_MIN_MS)))
    sleep "$((pc_cut_ms / 1000)).$(printf %03d $((pc_cut_ms % 1000)))"
    kill -KILL "$(cat "$pidfile")" ||
      { vm_show "$log"; fail "QEMU was gone before the cut"; }
  fi
  rc=0
  wait "$pid" || rc=$?
  if [ -z "$wbase" ] && [ $rc != 0 ]; then
    vm_show "$log"
    fail "QEMU exit status $rc"
  fi
  pc_flushed=$(pc_last_flushed "$log")
}

# pc_check_line LOG: the guest's "CHECK ..." line in LOG, or fail.
pc_check_line () {
  local line
  line=$(tr -d '\r' < "$1" | grep -a '^CHECK ' | tail -1)
  [ -n "$line" ] || { vm_show "$1"; fail "the guest printed no CHECK line"; }
  echo "$line"
}

# pc_field LINE NAME: the value of NAME=VALUE in LINE.
pc_field () {
  local w
  for w in $1; do
    case $w in "$2="*) echo "${w#*=}"; return 0 ;; esac
  done
  return 1
}
