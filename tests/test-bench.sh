#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: stabledif-bench against the real plugin.
#
# Self-served (no URI: its own nbdkit, plugin found in the build tree)
# and with a URI from nbdkit --run and --ctl: the dbench-shaped table has
# its rows and columns for every policy; --json parses and has every
# policy; policy none with a wide race window lets corruption through to
# the device, which rejects it (device and client counters agree with
# the device's own totals), while wait, wait-sent, snapshot and auto
# see none; auto is wait on a T10 device and none (never waits) on a
# format=none device; --svg writes well-formed XML; bad options exit 2
# with a message naming the option, before anything runs (a --svg file
# that cannot be written, a --format, --interval or --size the plugin
# would refuse); the progress line shows on a terminal (script(1)) and
# not with --no-progress or when stderr is not one; a device that cannot
# be served or reached exits 1 (nbdkit's messages relayed once, no
# --svg file made or an old one touched); SIGINT stops early with a
# partial report (exit 130) and leaves no nbdkit or temporary directory
# behind.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires python3 script
: "${top_builddir:?top_builddir must be set}"
BENCH="$top_builddir/client/stabledif-bench/stabledif-bench"
CTLBIN="$top_builddir/client/stabledif-ctl/stabledif-ctl"
[ -x "$BENCH" ] || fail "$BENCH not built"
export BENCH CTLBIN tmpdir

# Bounded: every run of the bench is cut off.
bench () { timeout 120 "$BENCH" --no-progress "$@"; }
out=$tmpdir/out
err=$tmpdir/err
# expect_rc WANT ARGS...: the bench with ARGS exits with WANT.
expect_rc () {
  local want=$1 r=0; shift
  bench "$@" > "$out" 2> "$err" || r=$?
  [ "$r" = "$want" ] || { cat "$out" "$err"; fail "$*: exit $r, wanted $want"; }
}
# json FILE EXPR: python EXPR holds, with j = the JSON in FILE and
# run(NAME) = its run of policy NAME.
json () {
  python3 - "$1" "$2" <<'EOF' || { cat "$1"; fail "json $1: $2"; }
import json, sys
j = json.load(open(sys.argv[1]))
def run(name):
    return [r for r in j["runs"] if r["policy"] == name][0]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}

# ---- usage ----
"$BENCH" --help | grep -q '^Usage: stabledif-bench' || fail --help
"$BENCH" --version | grep -qE '^stabledif-bench [0-9]+\.[0-9]+' || fail --version
bad () {
  local pattern=$1; shift
  expect_rc 2 "$@"
  grep -qE -- "$pattern" "$err" || { cat "$err"; fail "$*: message"; }
  [ ! -s "$out" ] || fail "$*: printed a report"
}
bad '--threads 0: out of range' --threads 0
bad 'unknown policy "fast"' --policy fast
bad '--duration: "soon" is not a number' --duration soon
bad '--duration 100000: out of range' --duration 100000
bad '--page-size 1000: must be a power of two' --page-size 1000
bad '--working-set 6000: must be a non-zero multiple' --working-set 6000
bad 'unknown option --frobnicate' --frobnicate
bad 'option -t needs an argument' -t
bad 'only one URI' nbd://a nbd://b
bad '--ctl names the control socket of the device at URI' --ctl /x.sock
bad 'cannot be used with a URI' --format none nbd://localhost
bad '--connections 17: out of range \(1 to 16\)' --connections 17
bad '--connections: "x" is not a number' --connections x
# Found before any run (-d: short, should it run): a --svg path that
# cannot be written, and what our own nbdkit would refuse -- one line.
bad "^stabledif-bench: --svg $tmpdir/no-such-dir/x.svg: No such file or directory\$" \
  -d 0.2 --working-set 1M --svg "$tmpdir/no-such-dir/x.svg"
bad "^stabledif-bench: --svg $tmpdir: Is a directory\$" -d 0.2 --working-set 1M --svg "$tmpdir"
bad '^stabledif-bench: --format bogus: unknown PI format \(known: none, T10-DIF-TYPE1-CRC, .*EXT-DIF-TYPE1-CRC64' \
  -d 0.2 --working-set 1M --format bogus
[ "$(wc -l < "$err")" = 1 ] || { cat "$err"; fail "--format bogus: more than one line"; }
bad '^stabledif-bench: --format EXT-DIF-TYPE1-CRC64 --interval 512: .*use interval 4096$' \
  -d 0.2 --working-set 1M --format EXT-DIF-TYPE1-CRC64 --interval 512
[ "$(wc -l < "$err")" = 1 ] || { cat "$err"; fail "--interval 512: more than one line"; }
bad '^stabledif-bench: --size 1049000: must be a multiple of the protection interval \(512 bytes\)$' \
  -d 0.2 --working-set 1M --size 1049000
bad '^stabledif-bench: --size 1049088: must be a multiple of the protection interval \(4096 bytes\)$' \
  -d 0.2 --working-set 1M --size 1049088 --format EXT-DIF-TYPE3-CRC64
bad '^stabledif-bench: --page-size 2048: must be a multiple of the protection interval \(4096 bytes\)$' \
  -d 0.2 --working-set 1M --page-size 2048 --interval 4096
bad '^stabledif-bench: --page-size 2048: must be a multiple of the protection interval \(4096 bytes\)$' \
  -d 0.2 --working-set 1M --page-size 2048 --format EXT-DIF-TYPE1-CRC64
echo "ok: usage errors"

# ---- self-served: text table and SVG ----
# No --plugin and no $STABLEDIF_PLUGIN: the build tree's stabledif.so.
# A wide race window (5 ms between checksum and copy-out) makes sure the
# writers catch pages in it under policy none.
unset STABLEDIF_PLUGIN
TMPDIR=$tmpdir expect_rc 0 --duration 1 --race-delay-us 5000 \
  --working-set 1M --svg "$tmpdir/plot.svg"
used=$(sed -n 's/^stabledif-bench: our own nbdkit with plugin //p' "$out")
[ -n "$used" ] && [ "$used" -ef "$top_builddir/stabledif.so" ] ||
  { cat "$out"; fail "self-served: not the build tree's plugin: $used"; }
grep -qxF 'device: stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1' "$out" ||
  { cat "$out"; fail "self-served: device line"; }
for p in 'auto (in effect: wait)' wait wait-sent snapshot 'none (unsafe flag set: the device checks PI)'; do
  grep -qxF "policy $p" "$out" || { cat "$out"; fail "no table for policy $p"; }
done
# Five tables, each with the header and the three rows.
[ "$(grep -c '^ Operation       Count    AvgLat    P99Lat    MaxLat$' "$out")" = 5 ] ||
  { cat "$out"; fail "table headers"; }
for row in Write Writeback Flush; do
  [ "$(grep -cE "^ $row +[0-9]+ +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$" "$out")" = 5 ] ||
    { cat "$out"; fail "rows $row"; }
done
[ "$(grep -cE '^Throughput [0-9.]+ MB/sec  4 writers  max_latency=[0-9.]+ ms' "$out")" = 5 ] ||
  { cat "$out"; fail "throughput lines"; }
# The device's verdict per policy, in the order run: only none rejected.
grep '^Corruption seen by the device:' "$out" > "$tmpdir/dev"
[ "$(sed -n '1,4p' "$tmpdir/dev" | grep -c ': 0 writes rejected (guard 0, app 0, ref 0 errors)$')" = 4 ] ||
  { cat "$out"; fail "safe policies: device corruption"; }
sed -n 5p "$tmpdir/dev" | grep -qE ': [1-9][0-9]* writes rejected \(guard [1-9]' ||
  { cat "$out"; fail "none: no device corruption"; }
grep -q '^  first failure: page write: stabledif_aio_pwrite: write rejected by device (EIO) at LBA [0-9]*: guard check' "$out" ||
  { cat "$out"; fail "none: first failure"; }
grep -q '^Summary (latencies in ms)' "$out" || fail "summary"
grep -qE '^ policy +in effect +write avg +write p99 +write p99\.9 +write max +MB/sec +waited +dev rej +changed$' "$out" ||
  { cat "$out"; fail "summary: header"; }
# Where a write avg exceeds its p99, a note under the table says why.
awk '/^Summary/ { s = 1; next } s && NF == 10 && $3 ~ /^[0-9.]+$/ && $3 > $4 { found = 1 }
     END { exit !found }' "$out" &&
  { grep -qF ' (write avg above write p99: under 1% of the writes took far longer than the rest,' "$out" ||
      { cat "$out"; fail "summary: no note on avg above p99"; }; }
grep -qE '^ none +none +.* [1-9][0-9]* +[1-9][0-9]*$' "$out" ||
  { cat "$out"; fail "summary: none row"; }
# The SVG: well-formed, one curve per policy in each of three panels,
# the fractions all labelled as percentages; a fourth panel with a bar
# per run whose count is the device's (only none's not 0); legend
# entries that do not run into each other (12px sans-serif text: up to
# 7 px a character).
rejected=$(sed -n 's/^Corruption seen by the device: \([0-9]*\) writes.*/\1/p' "$out")
python3 - "$tmpdir/plot.svg" $rejected <<'EOF' || fail "SVG"
import re, sys, xml.dom.minidom
d = xml.dom.minidom.parse(sys.argv[1])
rejected = sys.argv[2:]
svg = d.documentElement
assert svg.tagName == "svg", svg.tagName
assert len(svg.getElementsByTagName("polyline")) == 15
def texts(node):
    return [t for t in node.getElementsByTagName("text") if t.firstChild]
text = " ".join(t.firstChild.data for t in texts(svg))
for w in ("Write", "Writeback", "Flush", "Corrupted writes", "auto (wait)",
          "wait-sent", "snapshot", "none"):
    assert w in text, w
# y labels: "100%", "10%", ... "0.001%", never "1e-3".
ylabels = [t.firstChild.data for t in texts(svg)
           if t.getAttribute("text-anchor") == "end"
           and t.parentNode == svg]
assert "100%" in ylabels and "0.1%" in ylabels, ylabels
for l in ylabels:
    assert re.fullmatch(r"(100|10|1|0\.0*1)%", l), ylabels
# The corruption panel: its frame, then a bar per run; the counts.
g = [g for g in svg.getElementsByTagName("g")
     if g.getAttribute("id") == "corruption"]
assert len(g) == 1, "no corruption panel"
bars = g[0].getElementsByTagName("rect")[1:]
assert len(bars) == 5 == len(rejected), (len(bars), rejected)
counts = [t.firstChild.data for t in texts(g[0])
          if re.fullmatch(r"[0-9]+", t.firstChild.data)]
assert counts == rejected, (counts, rejected)
assert rejected[:4] == ["0"] * 4 and int(rejected[4]) > 0, rejected
for b, n in zip(bars, rejected):
    assert (float(b.getAttribute("width")) > 0) == (n != "0"), b.toxml()
# Legend: each entry's text ends before the next entry's line starts.
lines = [l for l in svg.getElementsByTagName("line")
         if l.getAttribute("stroke-width") == "3"]
ltext = [t for t in texts(svg) if ": write max " in t.firstChild.data]
assert len(lines) == len(ltext) == 5, (len(lines), len(ltext))
for i in range(4):
    if ltext[i].getAttribute("y") != ltext[i + 1].getAttribute("y"):
        continue                # the next row
    end = float(ltext[i].getAttribute("x")) + 7 * len(ltext[i].firstChild.data)
    assert end < float(lines[i + 1].getAttribute("x1")), ltext[i].toxml()
EOF
# Nothing left behind: nbdkit stopped, its directory removed.
! ls -d "$tmpdir"/stabledif-bench.* 2>/dev/null || fail "temporary directory left"
echo "ok: self-served table and SVG"
# Seven runs: the legend wraps into rows, every entry inside the picture.
TMPDIR=$tmpdir expect_rc 0 --duration 0.1 --working-set 1M \
  -p auto,wait,wait-sent,snapshot,none,wait,snapshot --svg "$tmpdir/seven.svg"
python3 - "$tmpdir/seven.svg" <<'EOF' || fail "SVG legend of seven runs"
import sys, xml.dom.minidom
svg = xml.dom.minidom.parse(sys.argv[1]).documentElement
w, h = float(svg.getAttribute("width")), float(svg.getAttribute("height"))
lines = [l for l in svg.getElementsByTagName("line")
         if l.getAttribute("stroke-width") == "3"]
assert len(lines) == 7, len(lines)
for l in lines:
    for a, lim in (("x1", w), ("x2", w), ("y1", h), ("y2", h)):
        assert 0 <= float(l.getAttribute(a)) <= lim - 10, (a, l.toxml())
EOF
echo "ok: SVG legend of seven runs"

# ---- URI from nbdkit --run, --ctl, --json ----
cat > "$tmpdir/uri.sh" <<'EOF'
set -eu
timeout 120 "$BENCH" --no-progress --json --duration 1 --race-delay-us 5000 \
  --working-set 1M -t 2 --ctl "$CTL" "$1" > "$tmpdir/run.json"
"$CTLBIN" -s "$CTL" --json counters > "$tmpdir/counters.json"
EOF
CTL=$tmpdir/ctl.sock
export CTL
SERVE_LOG=$tmpdir/nbdkit.log serve size=4M ctl="$CTL" -- bash "$tmpdir/uri.sh" '"$uri"' ||
  fail "bench with a URI"
j=$tmpdir/run.json
json $j '[r["policy"] for r in j["runs"]] == ["auto", "wait", "wait-sent", "snapshot", "none"]'
json $j 'j["self_served"] is False and j["ctl"] == "'"$CTL"'"'
json $j 'j["device"]["format"] == "T10-DIF-TYPE1-CRC" and j["device"]["stable_writes"]'
json $j 'j["config"]["threads"] == 2 and j["config"]["race_delay_us"] == 5000'
json $j 'j["config"]["connections"] == 1 and all(r["connections"] == 1 for r in j["runs"])'
json $j 'run("auto")["effective"] == "wait" and run("none")["unsafe"]'
json $j 'all(r["operations"][op]["count"] > 0 for r in j["runs"] for op in ("write", "writeback", "flush"))'
json $j 'all(r["operations"]["write"]["max_ms"] >= r["operations"]["write"]["p99_ms"] >= 0 for r in j["runs"])'
json $j 'all(o["max_ms"] >= o["p999_ms"] >= o["p99_ms"] for r in j["runs"] for o in r["operations"].values())'
json $j 'all(r["throughput_mb_s"] > 0 for r in j["runs"])'
# Safe policies: nothing rejected, nothing changed under the checksum.
for p in auto wait wait-sent snapshot; do
  json $j 'run("'$p'")["corruption"] == {"device": 0, "client": 0}'
  json $j 'run("'$p'")["client"]["rejected_writes"] == 0 and run("'$p'")["device"]["guard_errors"] == 0'
done
json $j 'run("snapshot")["client"]["snapshots"] > 0 and run("snapshot")["client"]["waits"] == 0'
json $j 'run("wait")["client"]["waits"] > 0'
# none: the device rejected writes, the client saw why.
json $j 'run("none")["corruption"]["device"] > 0 and run("none")["corruption"]["client"] > 0'
json $j 'run("none")["device"]["writes_rejected"] == run("none")["client"]["rejected_writes"]'
json $j 'run("none")["device"]["guard_errors"] >= run("none")["device"]["writes_rejected"]'
# The per-run counters add up to the device's own totals.
python3 - "$j" "$tmpdir/counters.json" <<'EOF' || fail "device totals"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
c = json.load(open(sys.argv[2]))["counters"]
rej = sum(r["device"]["writes_rejected"] for r in runs)
guard = sum(r["device"]["guard_errors"] for r in runs)
assert c["writes_rejected"] == rej, (c["writes_rejected"], rej)
assert c["write_errors"]["guard"] == guard, (c["write_errors"], guard)
EOF
echo "ok: URI, --ctl, --json"

# ---- interleaved pages: the library's PI in place, or the writers' ----
# Safe policies stay safe with the buffer itself on the wire; under none
# the device rejects torn pages of the library's PI.
cat > "$tmpdir/layout.sh" <<'EOF'
set -eu
for l in interleaved caller; do
  timeout 120 "$BENCH" --no-progress --json --duration 0.5 --working-set 1M \
    --race-delay-us 2000 --layout $l -p wait,wait-sent,snapshot,none "$1" \
    > "$tmpdir/$l.json"
done
EOF
serve size=4M ctl=none -- bash "$tmpdir/layout.sh" '"$uri"' ||
  fail "bench --layout"
for l in interleaved caller; do
  j=$tmpdir/$l.json
  json $j 'j["config"]["layout"] == "'$l'"'
  for p in wait wait-sent snapshot; do
    json $j 'run("'$p'")["corruption"]["client"] == 0'
    json $j 'run("'$p'")["client"]["rejected_writes"] == 0'
    json $j 'run("'$p'")["operations"]["writeback"]["count"] > 0'
  done
done
json "$tmpdir/interleaved.json" 'run("none")["client"]["rejected_writes"] > 0'
bad '--layout "tiled": want separate, interleaved or caller' --layout tiled
echo "ok: --layout interleaved and caller"

# ---- a device without stable pages ----
cat > "$tmpdir/none.sh" <<'EOF'
set -eu
timeout 120 "$BENCH" --no-progress --json --duration 0.5 --working-set 1M \
  -p auto,none "$1" > "$tmpdir/none.json"
EOF
serve size=4M format=none ctl=none -- bash "$tmpdir/none.sh" '"$uri"' ||
  fail "bench on format=none"
j=$tmpdir/none.json
json $j 'not j["device"]["stable_writes"] and j["device"]["format"] == "none"'
json $j 'run("auto")["effective"] == "none" and run("auto")["client"]["waits"] == 0'
json $j 'not run("none")["unsafe"]'
json $j 'all(r["device"] is None and r["corruption"]["device"] is None for r in j["runs"])'
json $j 'all(r["client"]["write_errors"] == 0 for r in j["runs"])'
echo "ok: format=none"

# ---- self-served under a $TMPDIR that needs escaping in a URI ----
odd="$tmpdir/sp ace#h&a%41$(printf '\xc3\xa9')"
mkdir "$odd"
TMPDIR=$odd expect_rc 0 --duration 0.2 --working-set 1M -p auto
grep -q '^Corruption seen by the device: 0 writes rejected' "$out" ||
  fail "bench under an odd TMPDIR: no report"
[ -z "$(ls -A "$odd")" ] || fail "bench under an odd TMPDIR left files"
echo "ok: odd TMPDIR"
# A plugin path that is not UTF-8 still gives a JSON report.
lat1="$tmpdir/lat$(printf '\xff')"
mkdir "$lat1"
cp "$PLUGIN" "$lat1/p.so"
expect_rc 0 --json --duration 0.2 --working-set 1M -p auto --plugin "$lat1/p.so"
json $out 'j["plugin"].endswith("/lat?/p.so") and j["self_served"]'
echo "ok: --json with a path that is not UTF-8"

# ---- several connections per handle ----
# The memory store advertises multi-conn: the library opens both, and the
# flusher's writes (from its own thread) go over both.
expect_rc 0 --duration 0.3 --working-set 1M -p snapshot,wait --connections 2
grep -qE '^       [0-9.]+ s per policy, race delay 0 us, 2 connections per handle, layout separate$' "$out" ||
  { cat "$out"; fail "--connections 2: model line"; }
grep -qE '^Throughput [0-9.]+ MB/sec' "$out" || { cat "$out"; fail "--connections 2: table"; }
expect_rc 0 --duration 0.3 --working-set 1M -p snapshot --connections 2 --json
cp "$out" "$tmpdir/conn.json"
j=$tmpdir/conn.json
json $j 'j["config"]["connections"] == 2 and run("snapshot")["connections"] == 2'
json $j 'run("snapshot")["operations"]["writeback"]["count"] > 0 and run("snapshot")["client"]["write_errors"] == 0'
echo "ok: --connections"

# ---- the progress line ----
# On a terminal (script(1) gives the bench a pty for stdout and stderr)
# it is there by default, once per policy at least; not with
# --no-progress, nor when stderr is a file; --progress forces it.
pty () { timeout 120 script -qec "$1" /dev/null < /dev/null; }
cmd=$(printf '%q ' "$BENCH" --plugin "$PLUGIN" --duration 0.2 --working-set 1M -p snapshot,wait)
pty "$cmd" > "$tmpdir/tty" || { cat -v "$tmpdir/tty"; fail "progress: bench on a pty failed"; }
for p in '[1/2] snapshot ' '[2/2] wait '; do
  grep -aqF $'\r\033[Kstabledif-bench: '"$p" "$tmpdir/tty" ||
    { cat -v "$tmpdir/tty"; fail "progress: no line $p on a terminal"; }
done
grep -aq '^policy wait' "$tmpdir/tty" || { cat -v "$tmpdir/tty"; fail "progress: no report"; }
pty "$cmd --no-progress" > "$tmpdir/tty" || fail "progress: --no-progress on a pty failed"
grep -aq '^policy wait' "$tmpdir/tty" || { cat -v "$tmpdir/tty"; fail "--no-progress: no report"; }
! grep -aqF '[1/2]' "$tmpdir/tty" || { cat -v "$tmpdir/tty"; fail "--no-progress: progress line"; }
pty "$cmd 2> $(printf %q "$tmpdir/tty-err")" > "$tmpdir/tty" || fail "progress: stderr not a pty: failed"
grep -aq '^policy wait' "$tmpdir/tty" || { cat -v "$tmpdir/tty"; fail "stderr not a pty: no report"; }
! grep -aqF '[1/2]' "$tmpdir/tty" "$tmpdir/tty-err" ||
  { cat -v "$tmpdir/tty" "$tmpdir/tty-err"; fail "stderr not a pty: progress line"; }
timeout 120 "$BENCH" --progress --plugin "$PLUGIN" --duration 0.2 --working-set 1M \
  -p snapshot > "$out" 2> "$err" || { cat "$err"; fail "--progress failed"; }
grep -aqF $'\r\033[Kstabledif-bench: [1/1] snapshot ' "$err" ||
  { cat -v "$err"; fail "--progress: no progress line on a file"; }
echo "ok: progress line"

# ---- devices that cannot be used ----
# nbdkit's messages are relayed, each once prefixed "nbdkit: "; a --svg
# file made for the plot is removed again, one already there is kept.
expect_rc 1 --duration 0.2 --plugin "$tmpdir/no-such-plugin.so" --svg "$tmpdir/new.svg"
grep -q 'nbdkit with plugin .*no-such-plugin.so failed to start' "$err" ||
  { cat "$err"; fail "bad plugin: message"; }
# (nbdkit 1.32 quotes the path with '', later ones with "".)
grep -qE "^  nbdkit: error: cannot open plugin ['\"]$tmpdir/no-such-plugin.so['\"]" "$err" ||
  { cat "$err"; fail "bad plugin: nbdkit's message"; }
! grep -q 'nbdkit: nbdkit:' "$err" || { cat "$err"; fail "bad plugin: doubled prefix"; }
[ ! -e "$tmpdir/new.svg" ] || fail "bad plugin: --svg file left behind"
echo '<old/>' > "$tmpdir/old.svg"
expect_rc 1 --duration 0.2 --svg "$tmpdir/old.svg" "nbd+unix:///dif?socket=$tmpdir/no-such.sock"
grep -q 'policy auto: stabledif_connect_uri: .*no-such.sock' "$err" ||
  { cat "$err"; fail "no server: message"; }
[ "$(cat "$tmpdir/old.svg")" = '<old/>' ] || fail "no server: old --svg file changed"
# A plot that cannot be written: the report is there, exit 1.
expect_rc 1 --duration 0.2 --working-set 1M -p snapshot --svg /dev/full
grep -qx 'stabledif-bench: --svg /dev/full: writing failed: No space left on device' "$err" ||
  { cat "$err"; fail "--svg /dev/full: message"; }
grep -q '^policy snapshot' "$out" || { cat "$out"; fail "--svg /dev/full: no report"; }
# A device at a URI whose interval the pages do not fit: found once
# connected (our own device's is a usage error, above).
cat > "$tmpdir/pages.sh" <<'EOF'
r=0
timeout 120 "$BENCH" --no-progress --duration 0.2 --working-set 1M \
  --page-size 2048 "$1" > "$tmpdir/out" 2> "$tmpdir/err" || r=$?
echo "$r" > "$tmpdir/pages.rc"
EOF
serve size=4M interval=4096 ctl=none -- bash "$tmpdir/pages.sh" '"$uri"' ||
  fail "bench against a 4096-byte interval device"
[ "$(cat "$tmpdir/pages.rc")" = 1 ] ||
  { cat "$err"; fail "page size vs the device's interval: exit $(cat "$tmpdir/pages.rc"), wanted 1"; }
grep -q 'page-size 2048 is not a multiple of the device.s protection interval 4096' "$err" ||
  { cat "$err"; fail "page size vs interval: message"; }
echo "ok: unusable devices"

# ---- SIGINT: partial report, everything cleaned up ----
mkdir "$tmpdir/t"
TMPDIR=$tmpdir/t timeout 60 "$BENCH" --no-progress --plugin "$PLUGIN" \
  --duration 30 --working-set 1M -p snapshot,wait > "$out" 2> "$err" &
pid=$!
for i in $(seq 100); do
  ls "$tmpdir"/t/stabledif-bench.*/nbdkit.pid >/dev/null 2>&1 && break
  sleep 0.1
done
sleep 1
kill -INT $pid
r=0; wait $pid || r=$?
[ "$r" = 130 ] || { cat "$out" "$err"; fail "SIGINT: exit $r, wanted 130"; }
grep -qxF 'policy snapshot  [interrupted]' "$out" || { cat "$out"; fail "SIGINT: report"; }
grep -qF '(interrupted: 1 of 2 policies ran)' "$out" || { cat "$out"; fail "SIGINT: note"; }
[ -z "$(ls -A "$tmpdir/t")" ] || fail "SIGINT: left $(ls -A "$tmpdir/t")"
! ps -eo args | grep -F "$tmpdir/t/" | grep -v grep || fail "SIGINT: nbdkit left running"
echo "ok: SIGINT"
