#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif round trips against the real plugin, for every
# PI format and interval (T10 types 1, 2, 3 at 512 and 4096; CRC64 types
# 1 and 3 at 4096), for format=none, and with an app tag configured.
# The client connects with a URI that names no export (the library must
# choose the dif view).  See test-client-roundtrip.c for what is checked.
. "${srcdir:-$(dirname "$0")}/functions.sh"

size=$((64 * 1024 * 1024))
for fi in T10-DIF-TYPE1-CRC:512 T10-DIF-TYPE1-CRC:4096 \
          T10-DIF-TYPE2-CRC:512 T10-DIF-TYPE2-CRC:4096 \
          T10-DIF-TYPE3-CRC:512 T10-DIF-TYPE3-CRC:4096 \
          EXT-DIF-TYPE1-CRC64:4096 EXT-DIF-TYPE3-CRC64:4096 \
          none:512 none:4096; do
  f=${fi%%:*}
  i=${fi##*:}
  serve size=$size format=$f interval=$i ctl=none -- \
    ./test-client-roundtrip '$uri' "$f" "$i" "$size" ||
    fail "round trip $f interval $i"
done

# An app tag: the device expects it, the library generates it.
serve size=4M format=T10-DIF-TYPE1-CRC interval=512 app-tag=0x1234 \
  ctl=none -- ./test-client-roundtrip '$uri' T10-DIF-TYPE1-CRC 512 4194304 \
  0x1234 || fail "round trip with app-tag"
