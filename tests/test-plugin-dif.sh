#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the dif view with nbdsh, for every PI format.
#
# Extended blocks written with correct PI on dif read back through dif
# and data; data written on data reads back on dif with the PI the device
# inserted; wrong guard and (Types 1/2) wrong ref tag fail with EIO,
# misaligned and out-of-range requests with EINVAL, and each rejected
# request leaves every stored byte of data and PI as it was; escape
# tuples are accepted; Type 3 does not check the ref tag; trim and zero
# give zeros and all-ones PI; sub-interval writes on data round-trip.
# The PI arithmetic is the test's own (CRC tables in functions.sh).
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

cat > "$tmpdir/dif.py" <<'PY'
rng = random.Random(int(os.environ.get("SEED", "1")))
hd = connect("dif", strict=False)
hdata = connect("data", strict=False)
hmap = connect("", meta=nbd.CONTEXT_BASE_ALLOCATION)
d = Disk(hd)
I, E, N, T = d.interval, d.ext, d.nblocks, d.tuple
assert N >= 2048, N
assert hdata.get_size() == N * I and hmap.get_size() == N * I
prof = parse_profile(hdata.get_export_description())
assert prof["view"] == "data" and prof["format"] == d.format, prof
print("format %s interval %d tuple %d blocks %d" % (d.format, I, T, N))

CHUNK = max(1, (1 << 20) // E) * E


def read_all():
    """Every byte of the dif view: all stored data and PI."""
    size = N * E
    return b"".join(hd.pread(min(CHUNK, size - off), off)
                    for off in range(0, size, CHUNK))


def unchanged(what, fn, err):
    """FN must fail with ERR and leave the whole disk as it was."""
    before = read_all()
    e = expect_error(err, fn)
    assert read_all() == before, what + ": stored data/PI changed"
    print("ok: %s -> %s (%s)" % (what, errno.errorcode[e.errnum],
                                  e.string.splitlines()[0]))


def dif_blocks(lba, n):
    return d.split(hd.pread(n * E, lba * E))


# 1. A fresh disk reads zeros with all-ones PI on both views.
data, tuples = dif_blocks(0, 4)
assert data == bytes(4 * I) and tuples == [d.escape_tuple()] * 4
assert hdata.pread(4 * I, 0) == bytes(4 * I)
print("ok: fresh blocks are zeros + all-ones PI")

if T == 0:
    # No PI: the dif view is the data view.
    buf = rand_bytes(rng, 8 * I)
    hd.pwrite(buf, 4 * E)
    assert hdata.pread(8 * I, 4 * I) == buf
    buf2 = rand_bytes(rng, 3 * I + 7)
    hdata.pwrite(buf2, 20 * I + 5)
    assert hd.pread(5 * E, 20 * E)[5:5 + len(buf2)] == buf2
    unchanged("misaligned dif write", lambda: hd.pwrite(buf, 1), errno.EINVAL)
    print("ok: format none round trip")
    raise SystemExit(0)

# 2. Correct PI written on dif reads back on dif and on data.
app_of = lambda lba: (lba * 0x101 + 1) & 0x7fff        # never 0xffff
ref_of = lambda lba: d.ref_for(lba) if d.type != 3 else rng.getrandbits(32)
payload = [rand_bytes(rng, I) for _ in range(8)]
ext = b"".join(d.block(payload[i], 4 + i, app=app_of(4 + i), ref=ref_of(4 + i))
               for i in range(8))
hd.pwrite(ext, 4 * E)
assert hd.pread(8 * E, 4 * E) == ext, "dif read-back"
assert hdata.pread(8 * I, 4 * I) == b"".join(payload), "data read-back"
# Unaligned reads of the data view see the same bytes.
assert hdata.pread(I + 10, 5 * I - 5) == b"".join(payload)[I - 5:2 * I + 5]
# FUA on dif, then flush.
ext2 = b"".join(d.block(rand_bytes(rng, I), 12 + i) for i in range(2))
hd.pwrite(ext2, 12 * E, nbd.CMD_FLAG_FUA)
hd.flush()
assert hd.pread(2 * E, 12 * E) == ext2
print("ok: dif write with correct PI reads back on dif and data")

# 3. Data written on data reads back on dif with the PI the device
#    inserted: guard of the data, app 0, ref from the LBA (0 for type 3).
buf = rand_bytes(rng, 3 * I)
hdata.pwrite(buf, 20 * I)
hdata.pwrite(rand_bytes(rng, I), 23 * I, nbd.CMD_FLAG_FUA)
hdata.flush()
data, tuples = dif_blocks(20, 3)
assert data == buf
for i in range(3):
    want = d.tuple_bytes(d.guard(buf[i * I:(i + 1) * I]), 0, d.ref_for(20 + i))
    assert tuples[i] == want, (20 + i, tuples[i].hex(), want.hex())
print("ok: data view inserts guard/app 0/ref")

# 4. Rejected requests change nothing.
good = [rand_bytes(rng, I) for _ in range(4)]


def blocks_30(bad_index, **bad):
    out = b""
    for i in range(4):
        kw = bad if i == bad_index else {}
        out += d.block(good[i], 30 + i, **kw)
    return out


# Store something at 30..33 first, so "unchanged" means more than zeros.
hdata.pwrite(rand_bytes(rng, 4 * I), 30 * I)
g31 = d.guard(good[1])
unchanged("wrong guard in block 2 of 4",
          lambda: hd.pwrite(blocks_30(1, guard=g31 ^ 1), 30 * E), errno.EIO)
unchanged("wrong guard in the last block",
          lambda: hd.pwrite(blocks_30(3, guard=0), 30 * E, nbd.CMD_FLAG_FUA),
          errno.EIO)
unchanged("wrong guard over a never-written block",
          lambda: hd.pwrite(d.block(good[0], 200, guard=g31 ^ 0x8000),
                            200 * E), errno.EIO)
if d.type in (1, 2):
    unchanged("wrong ref tag (LBA + 1)",
              lambda: hd.pwrite(blocks_30(2, ref=d.ref_for(33)), 30 * E),
              errno.EIO)
    unchanged("wrong ref tag (ref of LBA 0)",
              lambda: hd.pwrite(blocks_30(0, ref=0), 30 * E), errno.EIO)
    # An app tag of all ones escapes, but only in its own block.
    unchanged("escaped block next to a wrong ref",
              lambda: hd.pwrite(blocks_30(0, app=0xffff, guard=0)
                                [:E] + blocks_30(1, ref=7)[E:], 30 * E),
              errno.EIO)
one = d.block(good[0], 40)
unchanged("misaligned dif write offset",
          lambda: hd.pwrite(one, 40 * E + 1), errno.EINVAL)
unchanged("misaligned dif write offset (interval, not extended block)",
          lambda: hd.pwrite(one, 40 * I), errno.EINVAL)
unchanged("misaligned dif write length",
          lambda: hd.pwrite(one + one[:-1], 40 * E), errno.EINVAL)
unchanged("dif write of a data-sized block",
          lambda: hd.pwrite(good[0], 40 * E), errno.EINVAL)
unchanged("misaligned dif read", lambda: hd.pread(E, 7), errno.EINVAL)
unchanged("misaligned dif read length", lambda: hd.pread(E + 1, 0),
          errno.EINVAL)
unchanged("misaligned dif trim", lambda: hd.trim(E, 3 * E - 8), errno.EINVAL)
unchanged("misaligned dif zero", lambda: hd.zero(E - 1, 30 * E), errno.EINVAL)
unchanged("dif read past the end", lambda: hd.pread(2 * E, (N - 1) * E),
          errno.EINVAL)
unchanged("data read past the end", lambda: hdata.pread(2 * I, (N - 1) * I),
          errno.EINVAL)
# Writes past the end fail with ENOSPC (the NBD convention), whether
# nbdkit refuses them (the plugin never sees them) or libnbd in its
# default strict mode does before sending.
unchanged("dif write past the end",
          lambda: hd.pwrite(d.block(good[0], N - 1) + d.block(good[1], N),
                            (N - 1) * E), (errno.ENOSPC, errno.EINVAL))
unchanged("data write past the end",
          lambda: hdata.pwrite(bytes(2 * I), (N - 1) * I),
          (errno.ENOSPC, errno.EINVAL))
unchanged("dif trim past the end", lambda: hd.trim(2 * E, (N - 1) * E),
          errno.EINVAL)
unchanged("dif zero past the end", lambda: hd.zero(2 * E, (N - 1) * E),
          errno.ENOSPC)
hstrict = connect("dif")
unchanged("dif write past the end (strict client)",
          lambda: hstrict.pwrite(one, N * E), errno.ENOSPC)
unchanged("dif read past the end (strict client)",
          lambda: hstrict.pread(E, N * E), errno.EINVAL)

# 5. Escapes are accepted and stored as given.
if d.type in (1, 2):
    esc = d.block(good[0], 50, app=0xffff, guard=0x1234, ref=0xabc)
else:
    esc = d.block(good[0], 50, app=0xffff, guard=0x1234, ref=d.ref_mask)
    unchanged("type 3: app all ones but ref not all ones does not escape",
              lambda: hd.pwrite(d.block(good[0], 50, app=0xffff,
                                        guard=0x1234, ref=0), 50 * E),
              errno.EIO)
full = d.block(good[1], 51, app=0xffff, guard=0, ref=0)[:I] + d.escape_tuple()
hd.pwrite(esc + full, 50 * E)
assert hd.pread(2 * E, 50 * E) == esc + full
assert hdata.pread(2 * I, 50 * I) == good[0] + good[1]
print("ok: escape tuples accepted, stored and readable on data")

# 6. Type 3 does not check the ref tag (but does check the guard).
if d.type == 3:
    t3 = b"".join(d.block(good[i], 52 + i, ref=rng.getrandbits(32))
                  for i in range(2))
    hd.pwrite(t3, 52 * E)
    assert hd.pread(2 * E, 52 * E) == t3
    assert hdata.pread(2 * I, 52 * I) == good[0] + good[1]
    unchanged("type 3: wrong guard",
              lambda: hd.pwrite(d.block(good[2], 54, guard=1, ref=54), 54 * E),
              errno.EIO)
    print("ok: type 3 ref tag not checked, guard checked")

# 7. Trim and zero, on both views: zeros and all-ones PI.
hdata.pwrite(rand_bytes(rng, 8 * I), 60 * I)
hdata.trim(2 * I, 60 * I)
hdata.zero(2 * I, 62 * I)
hd.trim(2 * E, 64 * E)
hd.zero(2 * E, 66 * E, nbd.CMD_FLAG_FUA | nbd.CMD_FLAG_NO_HOLE)
data, tuples = dif_blocks(60, 8)
assert data == bytes(8 * I), "trim/zero: data not zero"
assert tuples == [d.escape_tuple()] * 8, "trim/zero: PI not all ones"
assert hdata.pread(8 * I, 60 * I) == bytes(8 * I)
# Fast zero is supported (the disk is sparse).
hd.zero(E, 68 * E, nbd.CMD_FLAG_FAST_ZERO)
print("ok: trim and zero give zeros and all-ones PI")

# Extents (data view): a never-written region is a hole that reads as
# zeros; a written block is not.
seen = []
hmap.block_status(I * (N // 2), I * (N - N // 2),
                  lambda ctx, off, ents, err:
                  seen.extend(ents) if ctx == nbd.CONTEXT_BASE_ALLOCATION
                  else None)
assert seen and seen[1] & 3 == 3, "unwritten region not a hole: %r" % seen
seen = []
hmap.block_status(I, 4 * I,
                  lambda ctx, off, ents, err:
                  seen.extend(ents) if ctx == nbd.CONTEXT_BASE_ALLOCATION
                  else None)
assert seen and seen[1] & 1 == 0, "written block is a hole: %r" % seen
# The dif view has no holes: every block has a tuple.
hdmap = connect("dif", meta=nbd.CONTEXT_BASE_ALLOCATION)
seen = []
hdmap.block_status(E * (N // 2), E * (N - N // 2),
                   lambda ctx, off, ents, err:
                   seen.extend(ents) if ctx == nbd.CONTEXT_BASE_ALLOCATION
                   else None)
assert seen and seen[1] == 0, "dif view reports a hole: %r" % seen
print("ok: extents")

# 8. Sub-interval writes on data (read-modify-write) round-trip, and the
#    device computes PI over the whole merged interval.
shadow = {}


def shadow_block(lba):
    if lba not in shadow:
        shadow[lba] = bytearray(hdata.pread(I, lba * I))
    return shadow[lba]


def patch(off, buf):
    hdata.pwrite(buf, off)
    for i, b in enumerate(buf):
        lba, o = divmod(off + i, I)
        shadow_block(lba)[o] = b


hdata.pwrite(rand_bytes(rng, I), 70 * I)
patch(70 * I + 37, rand_bytes(rng, 100))            # inside one block
patch(73 * I - 10, rand_bytes(rng, 30))             # across 72/73, unwritten
patch(75 * I + 3, rand_bytes(rng, 3 * I))           # 75..78, both ends partial
patch(50 * I + 1, b"\x5a")                          # into an escaped block
patch(80 * I + I - 1, b"\x01")                      # last byte of a block
for lba in sorted(shadow):
    blk = bytes(shadow[lba])
    assert hdata.pread(I, lba * I) == blk, "RMW data of block %d" % lba
    data, tuples = dif_blocks(lba, 1)
    assert data == blk
    want = d.tuple_bytes(d.guard(blk), 0, d.ref_for(lba))
    assert tuples[0] == want, (lba, tuples[0].hex(), want.hex())
print("ok: sub-interval writes on data (blocks %s)" % sorted(shadow))

# 9. Everything written in steps 2, 3, 5, 6 is still there.
assert hd.pread(8 * E, 4 * E) == ext
assert hdata.pread(3 * I, 20 * I) == buf
print("ok: earlier writes intact")
PY

# Each failure is reported once in the nbdkit log, naming the LBA and
# the check that failed.
# Past LBA 2^32, on a sparse disk of 2^32 + 64 blocks: the CRC-64 Type 1
# ref tag is the LBA's low 48 bits, so a block whose ref is right in its
# low 32 bits only (the ref of LBA - 2^32) is rejected with EIO, changes
# nothing and is recorded as a ref failure of its LBA; the CRC-16 Type 1
# ref tag is the low 32 bits, so there the same tuple is right.
cat > "$tmpdir/high.py" <<'PY'
import json

rng = random.Random(2)
hd = connect("dif", strict=False)
hdata = connect("data", strict=False)
d = Disk(hd)
I, E, N = d.interval, d.ext, d.nblocks
B32 = 1 << 32
assert N == B32 + 64, N
L = B32 + 5
data = rand_bytes(rng, I)
low32 = d.block(data, L, ref=(L - B32) & d.ref_mask)    # ref of L - 2^32


def last_event():
    with open(os.environ["EVENTS"]) as f:
        return json.loads(f.read().splitlines()[-1])


if d.tuple == 8:
    hd.pwrite(low32, L * E)
    assert low32 == d.block(data, L)
    assert hd.pread(E, L * E) == low32 and hdata.pread(I, L * I) == data
    print("ok: 32-bit ref of LBA %d is that of LBA %d" % (L, L - B32))
    raise SystemExit(0)

hd.pwrite(d.block(rand_bytes(rng, I), L - 1), (L - 1) * E)
before = hd.pread(3 * E, (L - 1) * E)
for what, buf, off in (
        ("one block", low32, L * E),
        ("second of two", d.block(rand_bytes(rng, I), L - 1) + low32,
         (L - 1) * E)):
    e = expect_error(errno.EIO, lambda: hd.pwrite(buf, off))
    assert hd.pread(3 * E, (L - 1) * E) == before, what + ": stored changed"
    ev = last_event()
    assert ev["check"] == "ref" and ev["lba"] == L, ev
    assert ev["expected"] == hex(L) and ev["actual"] == hex(L - B32), ev
    print("ok: ref of LBA %d at LBA %d (%s) -> EIO (%s)" % (
        L - B32, L, what, e.string.splitlines()[0]))
# LBA 5 with the ref of 2^32 + 5.
expect_error(errno.EIO, lambda: hd.pwrite(d.block(data, 5, ref=B32 + 5),
                                          5 * E))
ev = last_event()
assert ev["check"] == "ref" and ev["lba"] == 5, ev
# The right ref tag is taken, on both views.
hd.pwrite(d.block(data, L), L * E)
assert hd.pread(E, L * E) == d.block(data, L)
assert hdata.pread(I, L * I) == data
print("ok: 48-bit ref of LBA %d accepted" % L)
PY

run_high() {
  local log="$tmpdir/nbdkit-high-$1.log"
  echo "== $1 past LBA 2^32"
  if ! FORMAT=$1 INTERVAL=4096 SERVE_LOG=$log EVENTS=$tmpdir/events-$1 \
       run_nbdsh "$tmpdir/high.py" size=$(( ((1 << 32) + 64) * 4096 )) \
         format="$1" interval=4096 events="$tmpdir/events-$1"; then
    cat "$log" >&2
    fail "$1 past LBA 2^32"
  fi
  case $1 in
  *CRC64) grep -Eq "LBA 4294967301[^0-9].*ref" "$log" ||
            { cat "$log" >&2; fail "$1: no ref failure of LBA 2^32+5 logged"; } ;;
  esac
}

run() {
  local log="$tmpdir/nbdkit-$1-$2.log"
  echo "== $*"
  if ! FORMAT=$1 INTERVAL=$2 SERVE_LOG=$log run_nbdsh "$tmpdir/dif.py" \
         size=$(( $2 * 2048 )) format="$1" interval="$2"; then
    cat "$log" >&2
    fail "$*"
  fi
  [ "$1" = none ] && return
  grep -Eq "LBA 31[^0-9].*guard" "$log" ||
    { cat "$log" >&2; fail "$*: no guard failure of LBA 31 in the log"; }
  case $1 in
  *TYPE3*) ;;
  *) grep -Eq "LBA 32[^0-9].*ref" "$log" ||
       { cat "$log" >&2; fail "$*: no ref failure of LBA 32 in the log"; } ;;
  esac
}
run T10-DIF-TYPE1-CRC 512
run T10-DIF-TYPE1-CRC 4096
run T10-DIF-TYPE2-CRC 512
run T10-DIF-TYPE3-CRC 512
run T10-DIF-TYPE3-CRC 4096
run EXT-DIF-TYPE1-CRC64 4096
run EXT-DIF-TYPE3-CRC64 4096
run none 512
run_high EXT-DIF-TYPE1-CRC64
run_high T10-DIF-TYPE1-CRC
