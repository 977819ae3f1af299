#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: a flood of PI failures stays readable.  300 rejected dif
# writes (which leave the blocks they aim at as they were) and 40 failed
# data-view reads (an injected block) give nbdkit at most 10 error lines
# per 5 seconds, and "N similar messages suppressed" lines whose counts
# make up, with the lines logged, exactly one line per failed request;
# the counters, the event ring and events= still have every failure.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

WRITES=300 READS=40
export WRITES READS CTL="$tmpdir/ctl.sock" EVENTS="$tmpdir/events.jsonl"
export COUNTERS="$tmpdir/counters.json" RING="$tmpdir/ring.json"

cat > "$tmpdir/flood.py" <<'PY'
import json

h = connect("dif")
d = Disk(h)
E = d.ext
# The 64 blocks the rejected writes aim at hold good blocks, which must
# read back unchanged, data and PI.
good = b"".join(d.block(bytes([i + 2]) * d.interval, i, app=0x42)
                for i in range(64))
h.pwrite(good, 0)
bad = d.block(b"\x01" * d.interval, 0, guard=d.guard(b"\x01" * d.interval) ^ 1)
for i in range(int(os.environ["WRITES"])):
    expect_error(errno.EIO, h.pwrite, bad, (i % 64) * E)
assert h.pread(64 * E, 0) == good, "a rejected write changed the disk"
hd = connect("data")
ctl("inject data 100")
for i in range(int(os.environ["READS"])):
    expect_error(errno.EIO, hd.pread, d.interval, 100 * d.interval)
with open(os.environ["COUNTERS"], "w") as f:
    json.dump(ctl("counters"), f)
with open(os.environ["RING"], "w") as f:
    json.dump(ctl("events"), f)
PY

log=$tmpdir/nbdkit.log
t0=$(date +%s)
SERVE_LOG=$log run_nbdsh "$tmpdir/flood.py" size=1M ctl="$CTL" \
  events="$EVENTS" || { cat "$log"; fail "flood"; }
t1=$(date +%s)

# Every failure is counted and recorded.
python3 - <<'PY' || fail "counters or events"
import json, os
w, r = int(os.environ["WRITES"]), int(os.environ["READS"])
c = json.load(open(os.environ["COUNTERS"]))["counters"]
assert c["writes_rejected"] == w and c["write_errors"]["guard"] == w, c
assert c["reads_failed"] == r and c["read_errors"]["guard"] == r, c
ring = json.load(open(os.environ["RING"]))["events"]
assert len(ring) == w + r, len(ring)
events = [json.loads(l) for l in open(os.environ["EVENTS"])]
assert len(events) == w + r, len(events)
assert sum(e["op"] == "read" for e in events) == r
PY
echo "ok: counters, ring and events= have all $((WRITES + READS)) failures"

# The log: lines logged + lines suppressed = one per failed request.
logged_w=$(grep -c 'error: dif view write rejected: ' "$log" || :)
logged_r=$(grep -c 'error: data view read: stored ' "$log" || :)
suppressed=$(sed -n 's/.*error: \([0-9]*\) similar messages suppressed (PI failures; the counters and events record every one)$/\1/p' "$log" |
             awk '{ n += $1 } END { print n + 0 }')
summaries=$(grep -c 'similar messages suppressed' "$log" || :)
logged=$((logged_w + logged_r))
echo "logged $logged_w + $logged_r lines, $summaries summaries of $suppressed, in $((t1 - t0)) s"
[ $((logged + suppressed)) = $((WRITES + READS)) ] ||
  { cat "$log"; fail "$logged logged + $suppressed suppressed != $((WRITES + READS))"; }
# At most 10 lines in each 5 s interval the run can have spanned.
max=$((10 * ((t1 - t0) / 5 + 1)))
[ "$logged" -le "$max" ] ||
  { cat "$log"; fail "$logged lines logged in $((t1 - t0)) s, wanted <= $max"; }
[ "$summaries" -ge 1 ] || { cat "$log"; fail "no summary line"; }
# A summary never stands alone in an interval: there are at most as
# many summaries as bursts.
[ "$summaries" -le $((max / 10)) ] ||
  { cat "$log"; fail "$summaries summary lines"; }
echo "ok: the log is rate-limited and the summaries count exactly"
