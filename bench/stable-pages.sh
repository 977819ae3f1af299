#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# bench/stable-pages.sh: the stable-pages table, as ratios measured in the
# same run (stabledif-bench, each device its own nbdkit).
#
#   bench/stable-pages.sh [BUILDDIR] [-- STABLEDIF-BENCH-OPTIONS]
#
# Each round runs stabledif-bench twice:
#   - on a T10-DIF-TYPE1-CRC device, policies wait and snapshot;
#   - on a format=none device, policy auto (which is none there: no
#     stable pages, no PI -- what a device that does not need stable
#     pages costs).
# and computes
#   (1) wait's maximum write latency / snapshot's     target >= 10
#       (waiting for writeback is what makes writers stall; a snapshot
#       never waits)
#   (2) snapshot's throughput / auto's on format=none target >= 0.9
#       (what a snapshot -- a copy at submit, plus PI -- costs the
#       writers, against no stable pages and no PI at all)
# The verdict uses the median over ROUNDS rounds.  Exit status 1 if a
# target is missed.
#
# Environment: ROUNDS (default 3), DURATION (seconds per policy, default
# 3).  Extra options after "--" go to every stabledif-bench run (for
# example --think-us 0 for writers that never pause).  Not part of
# "make check".
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
builddir=.
if [ $# -gt 0 ] && [ "$1" != "--" ]; then builddir=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
[ -e "$builddir/stabledif.so" ] || builddir=$here/..
builddir=$(cd "$builddir" && pwd)
bench=$builddir/client/stabledif-bench/stabledif-bench
[ -x "$bench" ] || { echo "$0: $bench not found: build first" >&2; exit 2; }

: "${ROUNDS:=3}"
: "${DURATION:=3}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stable-pages.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for r in $(seq 1 "$ROUNDS"); do
  timeout 600 "$bench" --no-progress --json --duration "$DURATION" \
    --plugin "$builddir/stabledif.so" --format T10-DIF-TYPE1-CRC \
    --policy wait,snapshot "$@" > "$tmp/t10-$r.json"
  timeout 600 "$bench" --no-progress --json --duration "$DURATION" \
    --plugin "$builddir/stabledif.so" --format none \
    --policy auto "$@" > "$tmp/none-$r.json"
done

python3 - "$tmp" "$ROUNDS" <<'EOF'
import json, statistics, sys

tmp, rounds = sys.argv[1], int(sys.argv[2])

def run(doc, policy):
    for r in doc["runs"]:
        if r["policy"] == policy:
            return r
    raise SystemExit("no run of policy %s" % policy)

lat, thr = [], []
print("round  wait max  snapshot max  ratio | snapshot MB/s  auto(none) MB/s  ratio")
for i in range(1, rounds + 1):
    t10 = json.load(open("%s/t10-%d.json" % (tmp, i)))
    none = json.load(open("%s/none-%d.json" % (tmp, i)))
    w, s, a = run(t10, "wait"), run(t10, "snapshot"), run(none, "auto")
    wm = w["operations"]["write"]["max_ms"]
    sm = s["operations"]["write"]["max_ms"]
    st, at = s["throughput_mb_s"], a["throughput_mb_s"]
    lat.append(wm / sm if sm > 0 else float("inf"))
    thr.append(st / at if at > 0 else 0.0)
    print("%5d %7.2f ms %10.2f ms %6.1fx | %13.2f %16.2f %6.2fx"
          % (i, wm, sm, lat[-1], st, at, thr[-1]))
    for name, r in (("wait", w), ("snapshot", s)):
        c = r["corruption"]
        if c["device"] or c["client"]:
            print("  unexpected corruption under %s: %s" % (name, c))

cfg = t10["config"]
print()
print("stabledif-bench: %d writers, %d pages of %d bytes, %d-byte writes %d us "
      "apart, flush every %d ms, %g s per policy; median of %d rounds:"
      % (cfg["threads"], cfg["working_set"] // cfg["page_size"],
         cfg["page_size"], cfg["write_size"], cfg["think_us"],
         cfg["flush_interval_ms"], cfg["duration_s"], rounds))
ml, mt = statistics.median(lat), statistics.median(thr)
missed = False
for what, v, target in (("wait max write latency / snapshot's", ml, 10.0),
                        ("snapshot throughput / auto's on format=none", mt, 0.9)):
    flag = "" if v >= target else "  MISSED"
    missed |= v < target
    print("  %-46s %7.2fx  (target >= %gx)%s" % (what, v, target, flag))
sys.exit(1 if missed else 0)
EOF
