#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: file= with a geometry other than the one recorded in PATH.pi
# is refused: nbdkit exits non-zero before serving anyone, says what is
# recorded, what was asked and what differs, and leaves both files
# byte-for-byte as they were.  Also refused: PATH.pi without PATH, a
# damaged header, a raw image of another size, a filesystem that cannot
# hold the size.  The recorded geometry still opens afterwards.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires "$NBDKIT" "$NBDCOPY" cmp md5sum

f="$tmpdir/disk"
head -c 1048576 /dev/urandom > "$tmpdir/in.img"
serve 1M format=T10-DIF-TYPE1-CRC file="$f" -- \
  "$NBDCOPY"' "'"$tmpdir/in.img"'" "$uri"'
sums () { md5sum "$f" "$f.pi"; }
before=$(sums)

rec='existing geometry size=1M format=T10-DIF-TYPE1-CRC interval=512'
expect_config_error "$rec .* does not match size=2M format=T10-DIF-TYPE1-CRC interval=512 \(size differs\)" \
  2M file="$f"
expect_config_error "$rec .* does not match size=1M format=T10-DIF-TYPE3-CRC interval=512 \(format differs\)" \
  1M format=T10-DIF-TYPE3-CRC file="$f"
expect_config_error "$rec .* does not match size=1M format=T10-DIF-TYPE1-CRC interval=4096 \(interval differs\)" \
  1M interval=4096 file="$f"
expect_config_error "\(format, interval, tuple differ\)" \
  1M format=EXT-DIF-TYPE1-CRC64 file="$f"
expect_config_error "size=1M format=none interval=512 \(format, tuple differ\)" \
  1M format=none file="$f"
expect_config_error "\(size, interval differ\)" \
  64M interval=4096 file="$f"
[ "$(sums)" = "$before" ] || fail "a refused open changed the files"

# The recorded geometry still opens and the data is intact.
serve 1M file="$f" -- "$NBDCOPY"' "$uri" "'"$tmpdir/out.img"'"'
cmp "$tmpdir/in.img" "$tmpdir/out.img" || fail "data changed"
echo "ok: recorded geometry reopens"

# A damaged header.
cp "$f.pi" "$tmpdir/pi.orig"
printf 'stabledif-pi/9\n' | dd of="$f.pi" conv=notrunc status=none
expect_config_error "$f.pi is not a usable PI file: it does not start with" \
  1M file="$f"
cp "$tmpdir/pi.orig" "$f.pi"

# PATH.pi without PATH: refused, and PATH is not recreated empty.
mv "$f" "$tmpdir/moved"
expect_config_error "$f.pi exists but the data file $f does not" 1M file="$f"
[ ! -e "$f" ] || fail "the data file was created"
mv "$tmpdir/moved" "$f"

# PATH truncated behind our back.
cp "$f" "$tmpdir/data.orig"
truncate -s 512K "$f"
expect_config_error "the data file is 524288 bytes but .* records size=1M" \
  1M file="$f"
cp "$tmpdir/data.orig" "$f"

# A raw image without PATH.pi, of another size than asked: refused with
# the size that would adopt it.
g="$tmpdir/raw"
head -c 98304 /dev/urandom > "$g"
expect_config_error "exists \(98304 bytes\) without $g.pi, and size=1M does not match it; give size=96K" \
  1M file="$g"
[ ! -e "$g.pi" ] || fail "$g.pi was created"

# A size the filesystem cannot hold: ext4 files end at 16 TiB - 4 KiB, so
# a 16 TiB disk is refused there with a clear error and nothing left
# behind.  (Other filesystems hold it: see test-store-file.)

h="$tmpdir/huge"
if [ "$(stat -f -c %T "$tmpdir")" = "ext2/ext3" ]; then
  expect_config_error "file=$h: making the data file size=16T \(17592186044416 bytes\): File too large \(larger than this filesystem's largest file\)" \
    16T file="$h"
  if [ -e "$h" ] || [ -e "$h.pi" ]; then
    fail "a failed create left files behind"
  fi
fi

# Not a regular file.
expect_config_error "file=$tmpdir: opening $tmpdir: Is a directory" \
  1M file="$tmpdir"

# Everything is still intact.
serve 1M file="$f" -- "$NBDCOPY"' "$uri" "'"$tmpdir/out2.img"'"'
cmp "$tmpdir/in.img" "$tmpdir/out2.img" || fail "data changed at the end"
[ "$(sums)" = "$before" ] || fail "the files changed"
echo "ok: all refusals left the disk intact"
