#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: app-tag=VALUE[/MASK].  The data view inserts VALUE as the app
# tag; the dif view accepts blocks whose app tag matches VALUE in the bits
# of MASK and rejects others with EIO, leaving the disk unchanged; an app
# tag of all ones still escapes (Types 1, 2); the profile says so.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

cat > "$tmpdir/apptag.py" <<'PY'
rng = random.Random(2)
TAG = int(os.environ["TAG"], 0)
MASK = int(os.environ["MASK"], 0)
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
I, E, N = d.interval, d.ext, d.nblocks
prof = parse_profile(hd.get_export_description())
print("profile:", hd.get_export_description())
# The configured tag and mask appear in the profile, as numbers.
vals = [v for k, v in prof.items() if k.startswith("app")]
assert vals, "no app tag key in the profile: %r" % prof


def read_all():
    return hd.pread(N * E, 0)


def unchanged(what, fn):
    before = read_all()
    expect_error(errno.EIO, fn)
    assert read_all() == before, what + ": stored data/PI changed"
    print("ok: %s -> EIO" % what)


# Data view inserts the configured tag.
buf = rand_bytes(rng, 2 * I)
hdata.pwrite(buf, 4 * I)
data, tuples = d.split(hd.pread(2 * E, 4 * E))
assert data == buf
for i in range(2):
    g, app, ref = d.tuple_fields(tuples[i])
    assert (g, app, ref) == (d.guard(buf[i * I:(i + 1) * I]), TAG,
                             d.ref_for(4 + i)), (i, tuples[i].hex())
print("ok: inserted app tag 0x%04x" % TAG)

# Matching in the masked bits is enough.
other = (TAG & MASK) | (~MASK & 0x5a5a & 0xffff)
if other == 0xffff:
    other = TAG
blk = rand_bytes(rng, I)
hd.pwrite(d.block(blk, 8, app=other), 8 * E)
assert hdata.pread(I, 8 * I) == blk
print("ok: app 0x%04x accepted (mask 0x%04x)" % (other, MASK))

# A difference in a masked bit is rejected; guard and ref are correct.
for bit in range(16):
    if MASK & (1 << bit):
        bad = TAG ^ (1 << bit)
        if bad != 0xffff:
            break
unchanged("app 0x%04x" % bad,
          lambda: hd.pwrite(d.block(rand_bytes(rng, I), 9, app=bad), 9 * E))
unchanged("app 0 in block 2 of 2",
          lambda: hd.pwrite(d.block(blk, 10, app=TAG)
                            + d.block(blk, 11, app=0 if TAG & MASK else 1),
                            10 * E))
# All ones escapes.
esc = d.block(blk, 12, app=0xffff, guard=0, ref=0)
hd.pwrite(esc, 12 * E)
assert hd.pread(E, 12 * E) == esc
print("ok: app 0xffff escapes")
PY

for tagmask in 0x1234/0xff00 0x1234 4660/0x00f0 0; do
  tag=${tagmask%%/*}
  case $tagmask in */*) mask=${tagmask#*/} ;; *) mask=0xffff ;; esac
  echo "== app-tag=$tagmask"
  TAG=$tag MASK=$mask run_nbdsh "$tmpdir/apptag.py" \
    size=1M app-tag="$tagmask"
done
