#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: libstabledif's caller PI and interleaved buffers (the _pi
# calls) against the real plugin, for every PI format and interval and
# format none (see test-client-pi.c), on devices with an app tag.  Then
# the PI stored for every block the program wrote is checked with the
# Python reference arithmetic (tests/pi_ref.py), independently of the
# library: guard over the stored data, the app tag and ref tag written.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

cat "$tmpdir/prelude.py" - > "$tmpdir/stored.py" <<'PY'
h = connect("dif")
d = Disk(h)
want = {}
with open(os.environ["MANIFEST"]) as m:
    for line in m:
        lba, nb, app, ref = map(int, line.split())
        for b in range(lba, lba + nb):
            want[b] = (app, ref)
assert want, "the program stored nothing"
for b, (app, ref) in sorted(want.items()):
    if d.tuple == 0:
        break
    blk = h.pread(d.ext, b * d.ext)
    data, tup = blk[:d.interval], blk[d.interval:]
    exp = d.tuple_bytes(d.guard(data), app,
                        b & d.ref_mask if ref == -1 else ref)
    assert tup == exp, "LBA %d: stored tuple %s, expected %s" % (
        b, tup.hex(), exp.hex())
print("%s/%d: the PI of %d blocks is as written" % (
    d.format, d.interval, len(want)))
PY

for fi in T10-DIF-TYPE1-CRC:512 T10-DIF-TYPE1-CRC:4096 \
          T10-DIF-TYPE2-CRC:512 T10-DIF-TYPE2-CRC:4096 \
          T10-DIF-TYPE3-CRC:512 T10-DIF-TYPE3-CRC:4096 \
          EXT-DIF-TYPE1-CRC64:4096 EXT-DIF-TYPE3-CRC64:4096 \
          none:512; do
  f=${fi%%:*}
  i=${fi##*:}
  app=app-tag=0x1234
  [ "$f" = none ] && app=
  m=$tmpdir/manifest-$f-$i
  : > "$m"
  serve size=4M format=$f interval=$i $app ctl=none -- \
    "./test-client-pi \"\$uri\" $m &&" \
    "MANIFEST=$m sock=\"\$unixsocket\" $NBDSH -n" \
    "-c \"exec(open('$tmpdir/stored.py').read())\"" ||
    fail "$f interval $i"
done
