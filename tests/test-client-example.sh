#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the example program client/examples/example-write.c runs against the
# plugin and prints the profile, the PI of what it wrote (guards computed
# independently: CRC-16/T10-DIF of 512 'A's is 0x2f3f, CRC-64/NVME of
# 4096 'A's is 0xc47d251c87ed933) and its counters; then the PI the
# library filled into an interleaved buffer (512 'C's: 0x222f; 4096:
# 0x7b4895d639bba2f0), sent again as the caller's PI and read back.
. "${srcdir:-$(dirname "$0")}/functions.sh"

out=$tmpdir/out

expect () {
  grep -qxF -- "$1" "$out" || { cat "$out"; fail "no line \"$1\""; }
}

serve size=1M format=T10-DIF-TYPE1-CRC ctl=none -- \
  "$top_builddir/client/examples/example-write \"\$uri\" > $out"
cat "$out"
expect "format=T10-DIF-TYPE1-CRC interval=512 stable_writes=1 policy=wait"
expect "LBA 0: guard 0x2f3f app 0x0 ref 0x0"
expect "LBA 7: guard 0x2f3f app 0x0 ref 0x7"
expect "writes=2 reads=2 waits=1 rejected=0"
expect "interleaved LBA 16: guard 0x222f ref 0x10"
expect "interleaved: written twice, read back verified"
expect "ok"

serve size=1M format=EXT-DIF-TYPE3-CRC64 ctl=none -- \
  "$top_builddir/client/examples/example-write \"\$uri\" > $out"
cat "$out"
expect "format=EXT-DIF-TYPE3-CRC64 interval=4096 stable_writes=1 policy=wait"
expect "LBA 5: guard 0xc47d251c87ed933 app 0x0 ref 0x0"
expect "interleaved LBA 16: guard 0x7b4895d639bba2f0 ref 0x0"
expect "ok"

# No PI: auto means never wait.
serve size=1M format=none ctl=none -- "$top_builddir/client/examples/example-write \"\$uri\" > $out"
cat "$out"
expect "format=none interval=512 stable_writes=0 policy=none"
expect "writes=2 reads=2 waits=0 rejected=0"
grep -q '^LBA' "$out" && fail "tuples printed for format none"
expect "ok"
