#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: ordinary NBD clients round-trip data on the data view --
# nbdcopy, qemu-img (convert + compare) and fio's nbd engine (with
# --verify) -- on a CRC-16/512 disk and on a CRC-64/4096 disk, where
# 512-byte and smaller client requests are read-modify-write.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires "$NBDKIT" "$NBDCOPY" "$QEMU_IMG" "$FIO" cmp

size=$((16 * 1024 * 1024))
in="$tmpdir/in.img"
# Random data with a hole and an odd-sized tail of data, so that the
# copies exercise zeroing and partial intervals as well as full writes.
head -c $((size - 5 * 1024 * 1024 - 1000)) /dev/urandom > "$in"
truncate -s $((size - 1000 - 4096)) "$in"
head -c $((1000 + 4096)) /dev/urandom >> "$in"
[ "$(stat -c %s "$in")" = "$size" ] || fail "test image has the wrong size"

for params in "format=T10-DIF-TYPE1-CRC" \
              "format=EXT-DIF-TYPE1-CRC64" \
              "format=T10-DIF-TYPE3-CRC interval=4096"; do
  # shellcheck disable=SC2086 # params is a list of words
  set -- size=$size $params

  # nbdcopy in and out, through the "" export and the "data" export.
  rm -f "$tmpdir/out1.img" "$tmpdir/out2.img"
  serve "$@" -- '
    set -e
    '"$NBDCOPY"' "'"$in"'" "$uri"
    '"$NBDCOPY"' "nbd+unix:///data?socket=$unixsocket" "'"$tmpdir/out1.img"'"
    '"$NBDCOPY"' --request-size=4096 --requests=4 --connections=2 \
       "$uri" "'"$tmpdir/out2.img"'"'
  cmp "$in" "$tmpdir/out1.img" || fail "$params: nbdcopy round trip"
  cmp "$in" "$tmpdir/out2.img" || fail "$params: nbdcopy (4K requests, 2 connections)"
  echo "ok: $params: nbdcopy"

  # qemu-img convert in, compare against the source, convert out.
  rm -f "$tmpdir/out3.img"
  serve "$@" -- '
    set -e
    u="nbd+unix:///data?socket=$unixsocket"
    '"$QEMU_IMG"' convert -n -f raw -O raw "'"$in"'" "$u"
    '"$QEMU_IMG"' compare -f raw -F raw "'"$in"'" "$u"
    '"$QEMU_IMG"' convert -f raw -O raw "$u" "'"$tmpdir/out3.img"'"'
  cmp "$in" "$tmpdir/out3.img" || fail "$params: qemu-img round trip"
  echo "ok: $params: qemu-img"

  # qemu-img compare notices a difference (the test above can fail).
  # The changed byte is the source's byte with every bit flipped: a fixed
  # value would equal the random byte there once in 256 runs.
  cp "$in" "$tmpdir/changed.img"
  b=$(od -An -tu1 -j 123457 -N 1 "$in" | tr -d ' ')
  # shellcheck disable=SC2059 # the format is the octal escape itself
  printf "$(printf '\\%03o' $(( b ^ 0xff )))" |
    dd of="$tmpdir/changed.img" bs=1 seek=123457 conv=notrunc status=none
  [ "$(cmp -l "$in" "$tmpdir/changed.img" | wc -l)" = 1 ] ||
    fail "changed.img does not differ from the source in one byte"
  if serve "$@" -- '
       u="nbd+unix:///data?socket=$unixsocket"
       '"$QEMU_IMG"' convert -n -f raw -O raw "'"$in"'" "$u" &&
       '"$QEMU_IMG"' compare -q -f raw -F raw "'"$tmpdir/changed.img"'" "$u"'
  then
    fail "$params: qemu-img compare missed a changed byte"
  fi

  # fio: random writes then a crc32c verify pass, 4K blocks and mixed
  # sizes from 512 bytes (RMW on a 4096 interval), several in flight.
  # No verify state file: fio would leave it in the current directory.
  serve "$@" -- '
    set -e
    for bs in --bs=4k --bsrange=512-64k; do
      '"$FIO"' --name=verify --ioengine=nbd --uri="$uri" \
        --rw=randwrite $bs --size=8M --offset=4M --iodepth=8 \
        --verify=crc32c --do_verify=1 --verify_fatal=1 \
        --verify_state_save=0 \
        --output='"$tmpdir"'/fio.txt
      grep -q "err= 0" '"$tmpdir"'/fio.txt
    done'
  echo "ok: $params: fio --verify=crc32c"
done
