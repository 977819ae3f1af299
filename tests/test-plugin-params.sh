#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: plugin parameters.  Bad parameters stop nbdkit with a message
# naming the parameter; good ones (and the defaults) give the disk they
# describe; --dump-plugin and --help say what the plugin supports.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires "$NBDKIT" "$NBDINFO"

# --- bad parameters: nbdkit exits non-zero, naming the parameter --------
expect_config_error "size.*0|0.*size" size=0
expect_config_error "size" size=1000
expect_config_error "size" size=6K interval=4096
expect_config_error "^nbdkit: error: size: 'banana' is not a size \(want " size=banana
expect_config_error "^nbdkit: error: size: 'abc' is not a size \(want " size=abc
expect_config_error "size" 1000                      # the magic key is size
expect_config_error "format.*T10-DIF-TYPE4-CRC" format=T10-DIF-TYPE4-CRC
expect_config_error "format.*t10-dif-type1-crc" format=t10-dif-type1-crc
expect_config_error "interval" interval=1000
expect_config_error "interval" interval=0
expect_config_error "interval" interval=8192
expect_config_error "interval" format=EXT-DIF-TYPE1-CRC64 interval=512
expect_config_error "interval" format=EXT-DIF-TYPE3-CRC64 interval=512
expect_config_error "app-tag" app-tag=0x10000
expect_config_error "^nbdkit: error: app-tag: 0x12345 is out of range \(want a 16-bit number, 0 to 0xffff\)$" \
  app-tag=0x12345
expect_config_error "app-tag" app-tag=0x12/0x1ffff
expect_config_error "app-tag" app-tag=tag
expect_config_error "app-tag" app-tag=/0xff
expect_config_error "unknown parameter 'colour'" colour=red
# Each parameter once: the second of two would silently win.
expect_config_error "size: given more than once" size=1M size=2M
expect_config_error "size: given more than once" 1M size=2M
expect_config_error "format: given more than once" \
  format=T10-DIF-TYPE1-CRC format=T10-DIF-TYPE3-CRC
expect_config_error "ctl: given more than once" ctl=none ctl=none

# --- good parameters give the disk they describe ------------------------
# size=VALUE and the magic key, default size 1G, and the default interval
# of each format (4096 for CRC-64 unless given).
check_disk () {
  local want_size=$1 want_line=$2; shift 2
  local out="$tmpdir/disk.txt"
  serve "$@" -- \
    "$NBDINFO"' --size "nbd+unix:///data?socket=$unixsocket" &&
     '"$NBDINFO"' --no-content "nbd+unix:///dif?socket=$unixsocket" |
       grep description:' \
    > "$out"
  local size line
  size=$(head -n1 "$out")
  line=$(sed -n 's/^[[:space:]]*description: //p' "$out")
  [ "$size" = "$want_size" ] ||
    fail "$*: data size $size, expected $want_size"
  [ "$line" = "$want_line" ] ||
    fail "$*: dif profile '$line', expected '$want_line'"
  echo "ok: $* -> $size bytes, $line"
}
check_disk 1073741824 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1"
check_disk 1048576 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1" \
  1M
check_disk 2097152 \
  "stabledif/1 view=dif format=T10-DIF-TYPE2-CRC interval=4096 tuple=8 stable_writes=1" \
  size=2M format=T10-DIF-TYPE2-CRC interval=4096
check_disk 4096 \
  "stabledif/1 view=dif format=EXT-DIF-TYPE1-CRC64 interval=4096 tuple=16 stable_writes=1" \
  size=4096 format=EXT-DIF-TYPE1-CRC64
check_disk 8192 \
  "stabledif/1 view=dif format=EXT-DIF-TYPE3-CRC64 interval=4096 tuple=16 stable_writes=1" \
  format=EXT-DIF-TYPE3-CRC64 interval=4096 size=8K
check_disk 512 \
  "stabledif/1 view=dif format=none interval=512 tuple=0 stable_writes=0" \
  size=512 format=none
# Every size suffix of nbdkit(1), in either case: b, s (sectors), K..E.
check_disk 1024 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1" \
  size=2s
check_disk 1536 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1" \
  size=1536b
check_disk 2097152 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1" \
  size=2048k
check_disk 1099511627776 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1" \
  size=1t
check_disk 1125899906842624 \
  "stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1" \
  size=1P
# A 16 TiB disk starts at once (sparse memory).
check_disk 17592186044416 \
  "stabledif/1 view=dif format=T10-DIF-TYPE3-CRC interval=512 tuple=8 stable_writes=1" \
  16T format=T10-DIF-TYPE3-CRC

# --- unknown export ------------------------------------------------------
log="$tmpdir/unknown-export.log"
SERVE_LOG=$log serve 1M -- \
  'if '"$NBDINFO"' "nbd+unix:///nope?socket=$unixsocket" 2>/dev/null; then
     echo "export nope was served"; exit 1; fi'
grep -q "unknown export 'nope' (exports: \"\", data, dif)" "$log" ||
  { cat "$log" >&2; fail "no 'unknown export' message in the nbdkit log"; }
echo "ok: unknown export refused"

# --- --dump-plugin -------------------------------------------------------
dump="$tmpdir/dump.txt"
run_nbdkit "$PLUGIN" --dump-plugin > "$dump"
cat "$dump"
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' \
            "${top_builddir:-..}/config.h")
[ -n "$version" ] || fail "cannot find PACKAGE_VERSION in config.h"
grep -qx "name=stabledif" "$dump" || fail "dump: name"
grep -qx "stabledif_version=$version" "$dump" || fail "dump: version"
grep -qx "stabledif_intervals=512,4096" "$dump" || fail "dump: intervals"
grep -qx "thread_model=parallel" "$dump" || fail "dump: thread model"
grep -qx "magic_config_key=size" "$dump" || fail "dump: magic config key"
# The formats are those of the table in common/pi.c, every one of them.
table=$(sed -n '/^static const struct pi_format pi_formats\[\]/,/^};/ s/^ *{ *"\([^"]*\)".*/\1/p' \
          "${top_srcdir:-$srcdir/..}/common/pi.c" | sort)
[ "$(echo "$table" | wc -l)" -ge 6 ] ||
  fail "cannot read the table of formats in common/pi.c: '$table'"
formats=$(sed -n 's/^stabledif_formats=//p' "$dump" | tr , '\n' | sort)
[ "$formats" = "$table" ] ||
  fail "dump: formats are '$formats', the table has '$table'"
# Every format listed is accepted by format=.
for f in $formats; do
  serve size=64K format="$f" -- "$NBDINFO"' --size "$uri" >/dev/null'
done
echo "ok: --dump-plugin"

# --- --help lists every parameter ---------------------------------------
help="$tmpdir/help.txt"
run_nbdkit "$PLUGIN" --help > "$help"
for p in size= format= interval= app-tag= file= events= ctl=; do
  grep -q -- "$p" "$help" || fail "--help does not mention $p"
done
# ... and every format of the table, as a word of its own.
for f in $table; do
  grep -qE -- "(^| )$f[,.)]" "$help" || fail "--help does not list format $f"
done
echo "ok: --help"
