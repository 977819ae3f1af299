#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: file= storage recovers what a power cut leaves.
#
# A 128 MiB disk (two 64 MiB dirty-log regions) gets data on both views
# and 65 flushes, so PATH.log is clean; then blocks of region 0 are
# overwritten and nbdkit is killed (SIGKILL), which leaves region 0
# marked dirty in PATH.log.  A power cut is then played on the files:
# the old PI goes back under four of the new blocks (new data reached
# the disk, its PI did not), and in region 1, which is not dirty, data
# is written into PATH behind the server's back (corruption at rest).
# After a restart: nbdkit logs "recovered 4 blocks in 1 dirty regions",
# stabledif-ctl counts 4 blocks recovered, all of region 0 reads back
# through the data view (no EIO) with the new data and PI that verifies,
# and region 1's damaged blocks still fail with EIO, counted as guard
# errors.  dirty-log=off keeps no PATH.log.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires od dd

CTLBIN="$top_builddir/client/stabledif-ctl/stabledif-ctl"
f="$tmpdir/disk"
I=512
params=(128M format=T10-DIF-TYPE1-CRC file="$f")

# What both scripts below start with (after functions.sh's prelude):
# handles on both views and the data of round R.
cat > "$tmpdir/common.py" <<'PY'
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
I, E = d.interval, d.ext
def pattern(lba, n, r):
    return b"".join(bytes((b * 7 + i * 13 + r) & 0xff for i in range(I))
                    for b in range(lba, lba + n))
PY
# nbdsh_script NAME: the nbdsh command running $tmpdir/NAME.py after the
# prelude and common.py, on the socket in $sock.
nbdsh_script () {
  echo "$NBDSH -n -c \"exec(open('$tmpdir/prelude.py').read() + open('$tmpdir/common.py').read() + open('$tmpdir/$1.py').read())\""
}

# Phase A: round A everywhere it matters, flushed 65 times (the log
# clean).  Phase B: round B over LBA 100..107 (region 0 dirty).
cat > "$tmpdir/write.py" <<'PY'
phase = os.environ["PHASE"]
if phase == "A":
    hdata.pwrite(pattern(100, 8, 1), 100 * I)
    ext = b"".join(d.block(pattern(150000 + i, 1, 1), 150000 + i, app=0x77)
                   for i in range(8))
    hd.pwrite(ext, 150000 * E)
    for i in range(65):                     # the log's idle flushes + 1
        hd.flush()
else:
    hdata.pwrite(pattern(100, 8, 2), 100 * I)
print("phase %s written" % phase)
PY

# After the restart: region 0 reads whole and as round B; region 1's
# damage fails.
cat > "$tmpdir/read.py" <<'PY'
chunk = 4 << 20
region = 64 << 20
for off in range(0, region, chunk):
    hdata.pread(chunk, off)                 # EIO would raise
assert hdata.pread(8 * I, 100 * I) == pattern(100, 8, 2)
ext = hd.pread(8 * E, 100 * E)
for i in range(8):
    blk = ext[i * E:(i + 1) * E]
    assert blk == d.block(pattern(100 + i, 1, 2), 100 + i), \
        "LBA %d: tuple %s" % (100 + i, blk[I:].hex())
# Region 1: the four damaged blocks fail, the rest read.
expect_error(errno.EIO, hdata.pread, 4 * I, 150000 * I)
assert hdata.pread(4 * I, 150004 * I) == pattern(150004, 4, 1)
print("ok: region 0 recovered, region 1 damage reported")
PY

# Phase A, then B, then the kill.
serve_killable "${params[@]}" ctl=none
sock=$sock PHASE=A eval "$(nbdsh_script write)"
mark=$(od -An -tu1 -j4096 -N2 "$f.log" | tr -s ' ')
[ "$mark" = " 0 0" ] || fail "marks after 65 flushes: '$mark', want 0 0"
dd if="$f.pi" of="$tmpdir/old-pi" bs=1 skip=$((4096 + 100 * 8)) count=32 \
  status=none
sock=$sock PHASE=B eval "$(nbdsh_script write)"
mark=$(od -An -tu1 -j4096 -N2 "$f.log" | tr -s ' ')
[ "$mark" = " 1 0" ] || fail "marks after writing region 0: '$mark', want 1 0"
kill -9 "$(cat "$pidfile")"
wait "$bg" 2>/dev/null || :

# The power cut: old PI under new data in region 0; data changed under
# its PI in region 1.
dd if="$tmpdir/old-pi" of="$f.pi" bs=1 seek=$((4096 + 100 * 8)) \
  conv=notrunc status=none
head -c $((4 * I)) /dev/urandom |
  dd of="$f" bs=$I seek=150000 conv=notrunc status=none

# Restart: recovery, then the reads and the counters.
log="$tmpdir/nbdkit.log"
cat > "$tmpdir/after.sh" <<EOF
set -e
sock=\$1
sock=\$sock $(nbdsh_script read)
"$CTLBIN" -s "$tmpdir/ctl.sock" status > "$tmpdir/status"
"$CTLBIN" -s "$tmpdir/ctl.sock" --json counters > "$tmpdir/status.json"
EOF
SERVE_LOG=$log serve "${params[@]}" ctl="$tmpdir/ctl.sock" -- \
  bash "$tmpdir/after.sh" '$unixsocket' || { cat "$log"; fail "after restart"; }
cat "$tmpdir/status"
grep -q "recovered 4 blocks in 1 dirty regions" "$log" ||
  { cat "$log"; fail "no recovery line in nbdkit's log"; }
[ "$(grep -c "recovered" "$log")" = 1 ] || fail "recovery logged twice"
grep -Eq "^blocks .* 4 recovered$" "$tmpdir/status" ||
  fail "status does not count 4 blocks recovered"
python3 - "$tmpdir/status.json" <<'PY' || fail "counters"
import json, sys
c = json.load(open(sys.argv[1]))
c = c["counters"]
assert c["blocks"]["recovered"] == 4, c["blocks"]
assert c["read_errors"]["guard"] == 4, c["read_errors"]
print("counters: %s, read guard errors %d" % (c["blocks"],
                                              c["read_errors"]["guard"]))
PY
od -An -tu1 -j4096 -N2 "$f.log" | grep -q "^ *0 *0$" ||
  fail "the log is not clean after recovery"

# dirty-log=off: no PATH.log.
rm -f "$f" "$f.pi" "$f.log"
serve 1M file="$f" dirty-log=off ctl=none -- true
[ -e "$f.pi" ] && [ ! -e "$f.log" ] || fail "dirty-log=off made a log"
echo "ok: recovery after a simulated power cut"
