#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# Build the minimal initramfs the VM tests boot (tests/test-vm*.sh).
#
#   mkinitramfs.sh -k KVER -i INIT -o OUT [-m MODULE]... [-b PROGRAM]...
#                  [-f FILE]...
#
# KVER     kernel release whose modules are copied (/lib/modules/KVER,
#          i.e. the installed Debian kernel package that matches the
#          vmlinuz the test boots -- not the host's running kernel).
# INIT     the guest's /init script (tests/vm/init).
# OUT      the initramfs to write: an uncompressed newc cpio archive (the
#          kernel unpacks it faster than it could decompress one).
# MODULE   a kernel module to include, with every module it depends on
#          (resolved with "modprobe --show-depends"); built-in modules
#          need nothing.  modules.dep is regenerated so that "modprobe"
#          works in the guest.
# PROGRAM  a dynamically linked program to include, with the shared
#          libraries ldd lists for it; it is installed as /usr/bin/BASENAME.
# FILE     a data file a program needs, copied to the same path.
#
# The guest gets busybox-static as its shell and tools.  Exits non-zero
# with a message naming what is missing.
set -euo pipefail

prog=${0##*/}
die () { echo "$prog: $*" >&2; exit 1; }

kver= init= out=
modules=()
programs=()
files=()
while getopts "k:i:o:m:b:f:" opt; do
  case $opt in
    k) kver=$OPTARG ;;
    i) init=$OPTARG ;;
    o) out=$OPTARG ;;
    m) modules+=("$OPTARG") ;;
    b) programs+=("$OPTARG") ;;
    f) files+=("$OPTARG") ;;
    *) die "usage: $prog -k KVER -i INIT -o OUT [-m MODULE]... [-b PROGRAM]... [-f FILE]..." ;;
  esac
done
[ -n "$kver" ] && [ -n "$init" ] && [ -n "$out" ] ||
  die "usage: $prog -k KVER -i INIT -o OUT [-m MODULE]... [-b PROGRAM]..."

# The applet list is read whole before it is searched: with pipefail,
# "busybox --list | grep -q" fails whenever grep quits before busybox
# has written the rest of the list (SIGPIPE).
busybox=
for b in /bin/busybox /usr/bin/busybox; do
  [ -x "$b" ] || continue
  applets=$("$b" --list 2>/dev/null) || continue
  if grep -qx ash <<<"$applets" && ! ldd "$b" >/dev/null 2>&1; then
    busybox=$b; break
  fi
done
[ -n "$busybox" ] || die "no statically linked busybox (Debian: busybox-static)"
[ -d "/lib/modules/$kver" ] || die "/lib/modules/$kver: no modules for kernel $kver"
command -v cpio >/dev/null || die "cpio not found (Debian: cpio)"
command -v depmod >/dev/null || die "depmod not found (Debian: kmod)"

stage=$(mktemp -d "${TMPDIR:-/tmp}/initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,usr/bin,dev,proc,sys,run,tmp,mnt,etc,lib64} "$stage/lib/modules/$kver"
ln -s bin "$stage/sbin"
cp "$busybox" "$stage/bin/busybox"
cp "$init" "$stage/init"
chmod 755 "$stage/init"
# mke2fs reads its defaults from here.
[ -f /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$stage/etc/"

# Copy FILE into the stage at the same path (following symlinks), once.
copy_file () {
  local f=$1
  [ -e "$stage$f" ] && return 0
  mkdir -p "$stage$(dirname "$f")"
  cp -L "$f" "$stage$f"
}

# Kernel modules and their dependencies, in load order.
for m in "${modules[@]}"; do
  deps=$(modprobe -S "$kver" --show-depends "$m" 2>&1) ||
    die "kernel $kver has no module $m: $deps"
  while read -r kind path _; do
    case $kind in
      insmod) copy_file "$path" ;;
      builtin) ;;
      *) die "modprobe --show-depends $m: unexpected line: $kind $path" ;;
    esac
  done <<<"$deps"
done
for f in modules.builtin modules.builtin.modinfo modules.order; do
  [ -f "/lib/modules/$kver/$f" ] && cp "/lib/modules/$kver/$f" "$stage/lib/modules/$kver/"
done
depmod -b "$stage" "$kver" 2>/dev/null || depmod -b "$stage" "$kver"

# Programs and the libraries they load.
for p in "${programs[@]}"; do
  [ -x "$p" ] || die "$p: not an executable"
  cp -L "$p" "$stage/usr/bin/${p##*/}"
  libs=$(ldd "$p" 2>&1) || {
    case $libs in
      *"not a dynamic executable"*) continue ;;
      *) die "ldd $p: $libs" ;;
    esac
  }
  while read -r line; do
    case $line in
      *"=> not found"*) die "$p: missing library: $line" ;;
      *"=> /"*) lib=${line#*=> }; copy_file "${lib%% (*}" ;;
      /*) copy_file "${line%% (*}" ;;
    esac
  done <<<"$libs"
done

for f in ${files[@]+"${files[@]}"}; do
  [ -f "$f" ] || die "$f: not a file"
  copy_file "$f"
done

(cd "$stage" && find . -print0 | cpio --null -o -H newc --quiet) > "$out.tmp"
mv "$out.tmp" "$out"
