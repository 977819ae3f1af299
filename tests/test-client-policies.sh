#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif's stable-page policies and forensics, one
# request at a time, against the real plugin (see test-client-policies.c):
# wait, wait-sent and snapshot keep the data stable; none lets it change
# and the device rejects the write, the library names the changed blocks
# and bytes, and the old data stays intact.  Two formats.
. "${srcdir:-$(dirname "$0")}/functions.sh"

serve size=4M format=T10-DIF-TYPE1-CRC interval=512 ctl=none -- \
  ./test-client-policies '$uri' || fail "T10-DIF-TYPE1-CRC/512"
serve size=8M format=EXT-DIF-TYPE3-CRC64 interval=4096 ctl=none -- \
  ./test-client-policies '$uri' || fail "EXT-DIF-TYPE3-CRC64/4096"
