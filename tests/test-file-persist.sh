#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: file= storage survives a restart of nbdkit.
#
# Writes through both views (device-generated PI on data, host PI on dif,
# partial intervals, FUA, zero and trim), stops nbdkit, starts it again
# with the same file= and reads back every byte of data and PI; PATH is a
# raw image equal to the data view and PATH.pi holds the geometry header;
# nbdcopy in, restart, nbdcopy out; an existing raw image without PATH.pi
# is adopted (its blocks read unchecked, all-ones PI); a second nbdkit on
# the same file is refused while the first one runs.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires "$NBDCOPY" cmp

# Phase 1: write a recognisable pattern, then save the whole dif view.
cat > "$tmpdir/write.py" <<'PY'
rng = random.Random(int(os.environ["SEED"]))
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
I, E, N = d.interval, d.ext, d.nblocks

# Data view: whole and partial intervals, some with FUA.
for k in range(40):
    n = rng.randrange(1, 3 * I + 100)
    off = rng.randrange(0, N * I - n)
    buf = rand_bytes(rng, n)
    hdata.pwrite(buf, off, nbd.CMD_FLAG_FUA if k % 3 == 0 else 0)
    assert hdata.pread(n, off) == buf
# Dif view: host PI with an app tag of its own.
for k in range(20):
    n = rng.randrange(1, 9)
    lba = rng.randrange(0, N - n)
    ext = b"".join(d.block(rand_bytes(rng, I), lba + i, app=0x1000 + k)
                   for i in range(n))
    hd.pwrite(ext, lba * E, nbd.CMD_FLAG_FUA if k % 2 else 0)
    assert hd.pread(n * E, lba * E) == ext
# Zero and trim, on both views.
hdata.zero(8 * I, 2 * I)
hd.trim(3 * E, 20 * E)
hd.zero(E, (N - 2) * E, nbd.CMD_FLAG_FUA)
hdata.trim(I, 100 * I)
hd.flush()

img = hd.pread(N * E, 0)
data, tuples = d.split(img)
checked = sum(1 for t in tuples if t != d.escape_tuple())
assert checked > 20, "only %d blocks carry PI" % checked
assert hdata.pread(N * I, 0) == data
open(os.environ["OUT"], "wb").write(img)
open(os.environ["OUT"] + ".data", "wb").write(data)
print("wrote: %d blocks carry PI, %d escaped" % (checked, N - checked))
PY

# Phase 2: after a restart every byte of data and PI is back, and the
# data view verifies all of it (no EIO).
cat > "$tmpdir/read.py" <<'PY'
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
N, E, I = d.nblocks, d.ext, d.interval
want = open(os.environ["OUT"], "rb").read()
got = hd.pread(N * E, 0)
assert len(got) == len(want)
for lba in range(N):
    a, b = got[lba * E:(lba + 1) * E], want[lba * E:(lba + 1) * E]
    assert a == b, "LBA %d differs after restart: %s != %s" % (
        lba, a[I:].hex(), b[I:].hex())
assert hdata.pread(N * I, 0) == open(os.environ["OUT"] + ".data", "rb").read()
print("ok: %d blocks of data and PI back after restart" % N)
PY

persist () {
  local size=$1; shift
  local f="$tmpdir/disk"
  rm -f "$f" "$f.pi"
  OUT="$tmpdir/img" SEED=7 run_nbdsh "$tmpdir/write.py" \
    size="$size" file="$f" "$@"
  [ -s "$f.pi" ] || fail "$*: no $f.pi"
  head -n1 "$f.pi" | grep -qx 'stabledif-pi/1' || fail "$*: no header in $f.pi"
  grep -aq "^size=$size\$" "$f.pi" || fail "$*: $f.pi does not record size=$size"
  # PATH is a raw image: exactly the data view.
  cmp "$f" "$tmpdir/img.data" || fail "$*: $f is not the raw data"
  OUT="$tmpdir/img" run_nbdsh "$tmpdir/read.py" size="$size" file="$f" "$@"
  # And once more with the parameters given in another order / spelling.
  OUT="$tmpdir/img" run_nbdsh "$tmpdir/read.py" file="$f" "$@" "$size"
  echo "ok: persist $size $*"
}
persist 1048576 format=T10-DIF-TYPE1-CRC
persist 1048576 format=T10-DIF-TYPE3-CRC interval=4096
persist 4194304 format=EXT-DIF-TYPE1-CRC64

# nbdcopy in, restart, nbdcopy out; a hole in the image stays a hole.
f="$tmpdir/copy"
head -c 1048576 /dev/urandom > "$tmpdir/in.img"
truncate -s 3M "$tmpdir/in.img"
head -c 1048576 /dev/urandom >> "$tmpdir/in.img"
serve 4M file="$f" -- "$NBDCOPY"' "'"$tmpdir/in.img"'" "$uri"'
cmp "$tmpdir/in.img" "$f" || fail "nbdcopy: $f differs from the image"
serve 4M file="$f" -- "$NBDCOPY"' "$uri" "'"$tmpdir/out.img"'"'
cmp "$tmpdir/in.img" "$tmpdir/out.img" || fail "nbdcopy out after restart"
used=$(( $(stat -c %b "$f") * $(stat -c %B "$f") ))
[ "$used" -lt $((3 * 1048576)) ] ||
  fail "nbdcopy: $f uses $used bytes, the 2M hole was written"
echo "ok: nbdcopy in, restart, out ($used bytes of $f used)"

# An existing raw image without PATH.pi is adopted: its data reads back
# through both views, with all-ones PI (unchecked) until written.
f="$tmpdir/raw.img"
head -c 65536 /dev/urandom > "$f"
cp "$f" "$tmpdir/raw.orig"
cat > "$tmpdir/adopt.py" <<'PY'
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
orig = open(os.environ["ORIG"], "rb").read()
assert hdata.pread(len(orig), 0) == orig
data, tuples = d.split(hd.pread(d.nblocks * d.ext, 0))
assert data == orig
assert all(t == d.escape_tuple() for t in tuples)
# Written blocks get real PI.
hdata.pwrite(orig[:d.interval], 0)
_, t = d.split(hd.pread(d.ext, 0))
assert d.tuple_fields(t[0]) == (d.guard(orig[:d.interval]), 0, 0), t[0].hex()
print("ok: adopted raw image")
PY
ORIG="$tmpdir/raw.orig" run_nbdsh "$tmpdir/adopt.py" size=64K file="$f"
[ -s "$f.pi" ] || fail "adopt: no $f.pi created"
cmp "$f" "$tmpdir/raw.orig" || fail "adopt: the image changed"

# A second nbdkit on the same files is refused while the first runs; the
# first one keeps serving.  (Its socket is in $tmpdir: with "-U -" an
# nbdkit whose configuration fails leaves its /tmp directory behind.)
f="$tmpdir/locked"
serve 1M file="$f" -- '
  if LD_PRELOAD="'"$nbdkit_preload"'" "'"$NBDKIT"'" \
       -U "'"$tmpdir/second.sock"'" "'"$PLUGIN"'" \
       1M file="'"$f"'" --run true \
       2>"'"$tmpdir/second.err"'"; then
    echo "second nbdkit started on the same file"; exit 1
  fi
  '"$NBDCOPY"' "$uri" null:'
grep -q "in use by another process" "$tmpdir/second.err" ||
  { cat "$tmpdir/second.err" >&2; fail "second nbdkit: no 'in use' error"; }
echo "ok: $(cat "$tmpdir/second.err")"
