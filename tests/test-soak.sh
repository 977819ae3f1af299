#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the soak -- a bounded load with many connections on both
# views and control-socket clients, against the real nbdkit and the
# plugin, once on memory storage and once on file= storage.
#
# tests/soak.c (the driver) runs 8 libnbd connections on the data view,
# 8 libstabledif handles (each with a raw libnbd connection for zero and
# trim) on the dif view and 4 control-socket clients for
# $STABLEDIF_SOAK_SECONDS seconds (default 20; "make soak" runs longer),
# checking every read against what its worker wrote.  Then:
#
#   - the device's request and byte counters, per op and view, equal the
#     sums the clients counted themselves, exactly.  Nothing else talks
#     NBD to the device (libnbd and libstabledif send no request of their
#     own on connect or close, nbdkit adds none), so nothing is allowed
#     for;
#   - the write and read PI error counters are 0, and no event was
#     recorded;
#   - a full scan of the disk through the dif view (soak --scan, with
#     libstabledif verifying every block's PI) finds zero PI errors and
#     no escaped block holding data, and afterwards the counters are the
#     soak's plus exactly the scan's reads;
#   - stabledif-ctl check says the device is clean.
#
# It prints the requests per second of the load and the peak RSS of the
# nbdkit server process (VmHWM, read while it still runs).
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires python3
: "${top_builddir:?top_builddir must be set}"
SOAK="$top_builddir/tests/soak"
CTLBIN="$top_builddir/client/stabledif-ctl/stabledif-ctl"
[ -x "$SOAK" ] || fail "$SOAK not built"
[ -x "$CTLBIN" ] || fail "$CTLBIN not built"

: "${STABLEDIF_SOAK_SECONDS:=20}"
: "${STABLEDIF_SOAK_SEED:=$(date +%s)}"
case $STABLEDIF_SOAK_SECONDS in
  ''|*[!0-9]*|0) fail "STABLEDIF_SOAK_SECONDS must be a whole number > 0" ;;
esac
case $STABLEDIF_SOAK_SEED in
  ''|*[!0-9]*) fail "STABLEDIF_SOAK_SEED must be a whole number" ;;
esac
# nbdkit's own cut-off must leave room for the load, the scan and a slow
# (sanitizer) build; the driver itself reports a hang after 60 s.
min_timeout=$((STABLEDIF_SOAK_SECONDS * 2 + 300))
if [ "$STABLEDIF_TEST_TIMEOUT" -lt "$min_timeout" ]; then
  STABLEDIF_TEST_TIMEOUT=$min_timeout
fi
echo "soak: $STABLEDIF_SOAK_SECONDS s per store, seed $STABLEDIF_SOAK_SEED" \
     "(STABLEDIF_SOAK_SEED=$STABLEDIF_SOAK_SEED repeats each worker's" \
     "sequence of requests)"

# The commands run by nbdkit --run, with the NBD socket as $1 and the
# directory for results as $2; the rest of what they need comes in the
# environment.
cat > "$tmpdir/inner.sh" <<'EOF'
set -eu
sock=$1 out=$2
ctl=$out/ctl.sock
fail () { echo "inner.sh: FAIL: $*" >&2; exit 1; }

# The nbdkit server process, for its peak RSS.  nbdkit --run runs this
# command from the nbdkit process started first (an ancestor of this
# shell); in nbdkit 1.32 that process forks the server, and only waits.
# The server is the one with threads (the control socket's at least).
field () { awk -v f="$1:" '$1 == f { print $2 }' "/proc/$2/status"; }
runner=$$
while [ "$runner" -gt 1 ] && [ "$(cat /proc/$runner/comm)" != nbdkit ]; do
  runner=$(field PPid "$runner")
done
[ "$runner" -gt 1 ] || fail "no nbdkit among the ancestors of $$"
server=$runner
for s in /proc/[0-9]*/status; do
  p=${s#/proc/}; p=${p%/status}
  if [ "$(field PPid "$p" 2>/dev/null)" = "$runner" ] &&
     [ "$(field Name "$p" 2>/dev/null)" = nbdkit ]; then
    server=$p
  fi
done
[ "$(field Threads "$server")" -ge 2 ] ||
  fail "nbdkit process $server has one thread: not the server"

rc=0
"$SOAK" --socket "$sock" --ctl "$ctl" --seconds "$SECONDS_" \
  --seed "$SEED" --totals "$out/soak.json" > "$out/soak.out" || rc=$?
cat "$out/soak.out"
[ "$rc" = 0 ] || fail "soak driver failed (exit $rc)"
"$CTLBIN" -s "$ctl" --json counters > "$out/counters-soak.json"
"$CTLBIN" -s "$ctl" --json events > "$out/events.json"

"$SOAK" --socket "$sock" --scan --totals "$out/scan.json" || rc=$?
[ "$rc" = 0 ] || fail "scan failed (exit $rc)"
"$CTLBIN" -s "$ctl" --json counters > "$out/counters-scan.json"
"$CTLBIN" -s "$ctl" check > "$out/check.out" ||
  { cat "$out/check.out"; fail "stabledif-ctl check: not clean"; }

field VmHWM "$server" > "$out/vmhwm"
EOF

# The comparison: the device's counters against the clients' totals.
cat > "$tmpdir/compare.py" <<'EOF'
import json
import sys

out = sys.argv[1]


def load(name):
    with open("%s/%s" % (out, name)) as f:
        return json.load(f)


soak, scan = load("soak.json"), load("scan.json")
after_soak = load("counters-soak.json")
after_scan = load("counters-scan.json")
events = load("events.json")
bad = []

for reply in (after_soak, after_scan, events):
    if reply.get("ok") is not True:
        bad.append("control socket error: %r" % reply)
if bad:
    sys.exit("\n".join(bad))


def compare(device, want, what):
    for key in ("requests", "bytes"):
        for view in ("data", "dif"):
            for op in ("read", "write", "trim", "zero", "flush"):
                d = device[key][view][op]
                w = want(key, view, op)
                if d != w:
                    bad.append("%s: device %s.%s.%s = %d, clients sent %d "
                               "(%+d)" % (what, key, view, op, d, w, d - w))


compare(after_soak["counters"], lambda k, v, o: soak[k][v][o],
        "after the load")
compare(after_scan["counters"],
        lambda k, v, o: soak[k][v][o] + scan[k][v][o], "after the scan")

for reply, what in ((after_soak, "after the load"),
                    (after_scan, "after the scan")):
    c = reply["counters"]
    for side in ("write_errors", "read_errors"):
        for check in ("guard", "app", "ref"):
            if c[side][check] != 0:
                bad.append("%s: %s.%s = %d, want 0" % (
                    what, side, check, c[side][check]))
    for key in ("writes_rejected", "reads_failed", "injections"):
        if c[key] != 0:
            bad.append("%s: %s = %d, want 0" % (what, key, c[key]))
    if reply["last_seq"] != 0:
        bad.append("%s: %d events were recorded" % (what, reply["last_seq"]))
if events["events"]:
    bad.append("events: %r" % events["events"][:3])

# Nothing may be too small to mean anything: every op of both views ran.
for view in ("data", "dif"):
    for op in ("read", "write", "trim", "zero", "flush"):
        if soak["requests"][view][op] == 0:
            bad.append("the load sent no %s request on the %s view" % (
                op, view))

if bad:
    sys.exit("\n".join(bad))
n = sum(soak["requests"][v][o] for v in soak["requests"]
        for o in soak["requests"][v])
print("ok: device counters = clients' totals (%d requests, %d + %d "
      "connections; scan %d reads); 0 PI errors, 0 events" % (
          n, soak["connections"]["data"], soak["connections"]["dif"],
          scan["requests"]["dif"]["read"]))
EOF

# soak NAME PARAMS...: one nbdkit run with the load, the scan and the
# checks; prints the rates.
soak () {
  local name=$1; shift
  local out="$tmpdir/$name" log="$tmpdir/$name/nbdkit.log"
  mkdir -p "$out"
  echo "== $name: $*"
  if ! SOAK="$SOAK" CTLBIN="$CTLBIN" SECONDS_="$STABLEDIF_SOAK_SECONDS" \
       SEED="$STABLEDIF_SOAK_SEED" SERVE_LOG="$log" \
       serve "$@" ctl="$out/ctl.sock" -- \
       "bash '$tmpdir/inner.sh' \"\$unixsocket\" '$out'"; then
    # The driver's and inner.sh's messages first, then nbdkit's last.
    grep -E '^(soak|inner\.sh): ' "$log" | head -20 >&2 || :
    tail -10 "$log" >&2
    fail "soak on $name storage ($*)"
  fi
  python3 "$tmpdir/compare.py" "$out" || fail "soak on $name storage: counters"
  grep '^requests per second' "$out/soak.out" |
    sed "s/^/$name: /"
  echo "$name: nbdkit peak RSS (VmHWM): $(cat "$out/vmhwm") kB"
}

export SOAK CTLBIN
soak memory size=64M format=T10-DIF-TYPE1-CRC interval=512
soak file size=64M format=EXT-DIF-TYPE1-CRC64 interval=4096 \
  file="$tmpdir/soak.img"
