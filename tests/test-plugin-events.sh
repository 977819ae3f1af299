#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: events=PATH.  Every block of a rejected dif write is appended
# to PATH as one JSON line naming the connection, view, op, LBA, check,
# expected and actual value and the request; a relative PATH is taken
# from nbdkit's working directory; connections are numbered from 1.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

cat > "$tmpdir/events.py" <<'PY'
h1 = connect("data")
h2 = connect("dif")
d = Disk(h2)
I, E = d.interval, d.ext
rng = random.Random(3)
blocks = [rand_bytes(rng, I) for _ in range(3)]
guards = [d.guard(b) for b in blocks]
h1.pwrite(b"".join(blocks), 0)              # fine: no event
ext = (d.block(blocks[0], 5, guard=guards[0] ^ 0xff)
       + d.block(blocks[1], 6)
       + d.block(blocks[2], 7, ref=1234))
expect_error(errno.EIO, h2.pwrite, ext, 5 * E)
with open(os.environ["EXPECT"], "w") as f:
    f.write("%d %x %x\n" % (5, guards[0], guards[0] ^ 0xff))
    f.write("%d %x %x\n" % (7, 7, 1234))
PY

cd "$tmpdir"
EXPECT="$tmpdir/expect.txt" run_nbdsh "$tmpdir/events.py" \
  size=1M events=events.jsonl
[ -s "$tmpdir/events.jsonl" ] || fail "events file is empty or missing"
cat "$tmpdir/events.jsonl"

python3 - "$tmpdir/events.jsonl" "$tmpdir/expect.txt" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
expect = [l.split() for l in open(sys.argv[2])]
assert len(events) == 2, events
checks = ["guard", "ref"]
for ev, (lba, want, got), check in zip(events, expect, checks):
    assert ev["view"] == "dif" and ev["op"] == "write", ev
    assert ev["lba"] == int(lba) and ev["check"] == check, ev
    assert int(ev["expected"], 16) == int(want, 16), ev
    assert int(ev["actual"], 16) == int(got, 16), ev
    assert ev["offset"] == 5 * 520 and ev["length"] == 3 * 520, ev
    assert ev["time"].endswith("Z"), ev
# Both blocks belong to one request on the second connection (the data
# connection opened first is 1, nbdsh opens no other).
assert events[0]["conn"] == events[1]["conn"] == 2, events
assert events[1]["seq"] == events[0]["seq"] + 1, events
print("ok: events file")
PY
