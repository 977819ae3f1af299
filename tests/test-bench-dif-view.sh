#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: bench/bench-dif-view, briefly, against the real plugin and
# nbdkit's memory plugin.  Not a measurement (no ratio is asserted):
# it proves that both ways of driving libstabledif -- from completion
# callbacks (the default) and from the main thread -- run every request
# to completion under each stable-page policy that copies or waits, with
# one connection per side and with several (libstabledif's connections
# of one handle against as many libnbd handles, each on its own thread),
# that the table has its four rows and names the connections, that the
# caller-thread table (a thread submits, completions hand buffers back)
# follows with its three rows (with --interleaved: the interleaved
# table, then its caller-thread table), and that bad options exit 2.
. "${srcdir:-$(dirname "$0")}/functions.sh"
: "${top_builddir:?top_builddir must be set}"
HELPER="$top_builddir/bench/bench-dif-view"
[ -x "$HELPER" ] || fail "$HELPER not built"
export HELPER NBDKIT
out=$tmpdir/out

# check_rounds FILE ROUNDS ROW...: under every ROW of the throughput
# table of FILE, its "rounds:" line has ROUNDS rounds, each A/B=Q with
# Q the quotient of A and B; the row gives the median of the As, of
# the Bs and of the Qs (the mean of the middle two of an even number).
cat > "$tmpdir/check_rounds.py" <<'EOF'
import re, statistics, sys
text = open(sys.argv[1]).read()
rounds = int(sys.argv[2])
for row in sys.argv[3:]:
    # Each row's target: 0.75 for 128 KiB writes (from callbacks and
    # from the caller's thread), 0.80 for 4 KiB writes from the caller's
    # thread, 0.85 for the rest.
    target = {"write 128 KiB": r"0\.75", "write 128K caller": r"0\.75",
              "write 4K caller": r"0\.80"}.get(row, r"0\.85")
    m = re.search(r"^%s +([0-9.]+) MB/s +([0-9.]+) MB/s +([0-9.]+)x +%sx.*\n"
                  r"  rounds: +(.*)$" % (row, target), text, re.M)
    assert m, ("no row with its rounds", row)
    sd, base, ratio = (float(m.group(i)) for i in (1, 2, 3))
    got = re.findall(r"([0-9]+)/([0-9]+)=([0-9.]+)", m.group(4))
    assert len(got) == rounds and \
        len(m.group(4).split()) == rounds, (row, m.group(4))
    a = [float(x[0]) for x in got]
    b = [float(x[1]) for x in got]
    q = [float(x[2]) for x in got]
    for x, y, z in zip(a, b, q):
        # A and B are rounded to whole MB/s.
        if y > 0:
            assert abs(z - x / y) <= 0.006 + z * (0.5 / max(x, 0.5) + 0.5 / y), \
                (row, x, y, z)
    assert abs(sd - statistics.median(a)) <= 0.51, (row, sd, a)
    assert abs(base - statistics.median(b)) <= 0.51, (row, base, b)
    assert abs(ratio - statistics.median(q)) <= 0.006, (row, ratio, q)
EOF

# run_bench ARGS...: bench-dif-view ARGS against a T10 device and the
# memory plugin (nested --run: each server stops with the command).
run_bench () {
  export BENCH_ARGS="$*"
  serve size=8M format=T10-DIF-TYPE1-CRC ctl=none -- \
    'SD_URI=$uri timeout 120 "$NBDKIT" -U - memory size=8M --run '\''"$HELPER" --span 2M --rounds 1 --round-ms 30 $BENCH_ARGS "$SD_URI" "$uri"'\'
}

for args in "" "--submit thread" "--submit caller" "--policy snapshot" "--policy wait-sent --depth 3" \
            "--connections 2" "--connections 2 --submit thread" \
            "--connections 3 --depth 4 --policy snapshot"; do
  run_bench $args > "$out" 2>&1 || { cat "$out"; fail "bench-dif-view $args failed"; }
  python3 "$tmpdir/check_rounds.py" "$out" 1 \
    "write 4 KiB" "read 4 KiB" "write 128 KiB" "read 128 KiB" \
    "write 128K caller" "read 128K caller" "write 4K caller" ||
    { cat "$out"; fail "bench-dif-view $args: the table or its rounds"; }
  # The client CPU table: every row, its ratio the quotient of its two
  # figures.
  python3 - "$out" <<'EOF' || { cat "$out"; fail "bench-dif-view $args: CPU table"; }
import re, sys
text = open(sys.argv[1]).read()
assert "client CPU (user + system) per MB moved" in text
for row in ["write 4 KiB", "read 4 KiB", "write 128 KiB", "read 128 KiB"]:
    m = re.search(r"^%s +([0-9.]+) ms/MB +([0-9.]+) ms/MB +([0-9.]+)x$" % row,
                  text, re.M)
    assert m, row
    a, b, q = (float(m.group(i)) for i in (1, 2, 3))
    assert a > 0 and b > 0 and abs(q - a / b) <= 0.006 + q * (0.0005 / a + 0.0005 / b), (row, a, b, q)
# ... and the caller-thread rows' own, after their table.
caller = text.split("client CPU per MB of the caller-thread rows")[1]
for row in ["write 128K caller", "read 128K caller", "write 4K caller"]:
    m = re.search(r"^%s +([0-9.]+) ms/MB +([0-9.]+) ms/MB +([0-9.]+)x$" % row,
                  caller, re.M)
    assert m, row
    a, b, q = (float(m.group(i)) for i in (1, 2, 3))
    assert a > 0 and b > 0 and abs(q - a / b) <= 0.006 + q * (0.0005 / a + 0.0005 / b), (row, a, b, q)
EOF
  case $args in
    *"--submit thread"*) mode='the main thread (a window)' ;;
    *"--submit caller"*) mode='the main thread (buffers handed back' ;;
    *) mode='completion callbacks' ;;
  esac
  grep -q "submits from $mode" "$out" ||
    { cat "$out"; fail "bench-dif-view $args: submission mode not named"; }
  # The memory store advertises multi-conn: the library opens them all.
  case $args in
    *"--connections 2"*) n=2 ;;
    *"--connections 3"*) n=3 ;;
    *) n=1 ;;
  esac
  [ $n = 1 ] && h=handle || h=handles
  grep -qxF "connections: $n per side (libstabledif: $n in use; libnbd: $n $h)" "$out" ||
    { cat "$out"; fail "bench-dif-view $args: connections line"; }
done
grep -q '^queue depth 4 per side (1-2 per connection)' "$out" ||
  { cat "$out"; fail "depth 4 over 3 connections: depth line"; }

# --server-pids: a third table, each server's CPU per MB, with every
# row; a quotient where both figures are above zero (CPU time comes in
# clock ticks: a 30 ms round may use none), n/a otherwise.
# (nbdkit runs --run in a child of a fork: the PIDs come from -P, which
# a loaded machine may write only after --run has started: wait for
# them, 10 s at most.)
export BENCH_ARGS="--rounds 2 --round-ms 200 --only write --size 131072"
export PIDS="$tmpdir/sd.pid" PIDM="$tmpdir/mem.pid"
run_nbdkit -U - -P "$PIDS" --exit-with-parent "$PLUGIN" size=8M ctl=none \
  --run 'SD_URI=$uri timeout 120 "$NBDKIT" -U - -P "$PIDM" memory size=8M --run '\''for i in $(seq 100); do [ -s "$PIDS" ] && [ -s "$PIDM" ] && break; sleep 0.1; done; "$HELPER" --span 2M --server-pids "$(cat "$PIDS"),$(cat "$PIDM")" $BENCH_ARGS "$SD_URI" "$uri"'\' \
  > "$out" 2>&1 || { cat "$out"; fail "bench-dif-view --server-pids"; }
python3 "$tmpdir/check_rounds.py" "$out" 2 "write 128 KiB" ||
  { cat "$out"; fail "bench-dif-view --rounds 2: the row or its rounds"; }
python3 - "$out" <<'EOF' || { cat "$out"; fail "bench-dif-view: server CPU table"; }
import re, sys
text = open(sys.argv[1]).read()
head = "server CPU (user + system, all threads) per MB moved"
assert head in text
server = text.split(head)[1]
m = re.search(r"^write 128 KiB +([0-9.]+) ms/MB +([0-9.]+) ms/MB +(n/a|[0-9.]+x)$",
              server, re.M)
assert m, "no write 128 KiB row"
a, b = float(m.group(1)), float(m.group(2))
if a > 0 and b > 0:
    q = float(m.group(3)[:-1])
    assert abs(q - a / b) <= 0.01 + 0.002 * q, (a, b, q)
else:
    assert m.group(3) == "n/a", m.group(0)
# Both servers did work (the span was written twice in 2 x 200 ms).
assert a + b > 0, m.group(0)
assert "read 128 KiB" not in server
EOF

# --interleaved: its six rows (library PI, reads, the caller's PI; 4 and
# 128 KiB) with their targets and rounds, and the CPU table per row; the
# writes of the caller's PI went through (a rejected one fails the run).
# Then the caller-thread table of interleaved buffers, with the rows and
# targets of the plain caller-thread table (128 KiB writes held to 0.85
# here: no join) and its own CPU table.
for args in "--interleaved" "--interleaved --connections 2 --policy snapshot"; do
  run_bench $args > "$out" 2>&1 ||
    { cat "$out"; fail "bench-dif-view $args failed"; }
  python3 - "$out" <<'EOF' || { cat "$out"; fail "bench-dif-view $args: table"; }
import re, sys
text = open(sys.argv[1]).read()
# Each of ROWS (label: target) in TABLE with its target and one round,
# and in CPU (the text of its CPU table) with a client figure above 0.
def check_rows(table, cpu, rows):
    for row, target in rows.items():
        m = re.search(r"^%s +([0-9.]+) MB/s +([0-9.]+) MB/s +([0-9.]+)x +%sx.*\n"
                      r"  rounds: +([0-9]+)/([0-9]+)=([0-9.]+)$" % (row, target),
                      table, re.M)
        assert m, row
        assert float(m.group(1)) > 0 and float(m.group(2)) > 0, row
        c = re.search(r"^%s +([0-9.]+) ms/MB +([0-9.]+) ms/MB +([0-9.]+)x$" % row,
                      cpu, re.M)
        assert c and float(c.group(1)) > 0, ("CPU row", row)
check_rows(text, text,
           {"write 4K interleaved": "0.90", "read 4K interleaved": "0.92",
            "write 4K caller-pi": "0.95", "write 128K interleaved": "0.88",
            "read 128K interleaved": "0.92", "write 128K caller-pi": "0.95"})
assert "write 4 KiB" not in text
head = "interleaved buffers from one thread of the caller"
assert head in text, head
caller = text.split(head)[1]
check_rows(caller, caller.split("client CPU")[1],
           {"write 4K caller-il": "0.80", "write 128K caller-il": "0.85",
            "read 128K caller-il": "0.85"})
assert "read 4K caller-il" not in caller and "caller-pi" not in caller
EOF
done

# One size, one side (the profiling mode).
run_bench --size 8192 --only read --side libstabledif > "$out" 2>&1 ||
  { cat "$out"; fail "bench-dif-view --side"; }
grep -q '^read 8 KiB: .* MB/s' "$out" || { cat "$out"; fail "--side output"; }
if grep -q '^write' "$out"; then cat "$out"; fail "--only read timed writes"; fi
if grep -q 'ms/MB' "$out"; then cat "$out"; fail "--side printed a CPU comparison"; fi
# ... and the baseline alone, on two handles.
run_bench --connections 2 --size 8192 --only write --side baseline > "$out" 2>&1 ||
  { cat "$out"; fail "bench-dif-view --side baseline --connections 2"; }
grep -q '^write 8 KiB: .* MB/s' "$out" || { cat "$out"; fail "--side baseline output"; }
if grep -q '^read' "$out"; then cat "$out"; fail "--only write timed reads"; fi

# Bad options: exit 2 with a message naming the option, before any I/O.
for bad in "--submit sideways" "--side both" "--size 1000" "--depth x"; do
  r=0
  "$HELPER" $bad nbd+unix:///?socket=/nonexistent nbd+unix:///?socket=/x \
    > "$out" 2>&1 || r=$?
  [ "$r" = 2 ] || { cat "$out"; fail "$bad: exit $r, wanted 2"; }
  grep -q -e "${bad%% *}" -e "bad number" "$out" ||
    { cat "$out"; fail "$bad: message does not name the option"; }
done
# --connections: 1 to 16, and no more than the requests in flight;
# --server-pids: two process IDs of processes that exist.  Each message
# exactly.
for bad in "--connections 0:--connections 0: out of range (1 to 16)" \
           "--connections 17:--connections 17: out of range (1 to 16)" \
           "--connections x:--connections \"x\": not a number (1 to 16)" \
           "--depth 2 --connections 3:--depth 2 is less than --connections 3" \
           "--server-pids 12:want two process IDs" \
           "--server-pids 1,x:want two process IDs" \
           "--server-pids 0,1:want two process IDs" \
           "--server-pids 999999999,1:server process 999999999: /proc/999999999/stat"; do
  r=0
  "$HELPER" ${bad%%:*} nbd+unix:///?socket=/nonexistent nbd+unix:///?socket=/x \
    > "$out" 2>&1 || r=$?
  [ "$r" = 2 ] || { cat "$out"; fail "${bad%%:*}: exit $r, wanted 2"; }
  grep -qF -- "${bad#*:}" "$out" ||
    { cat "$out"; fail "${bad%%:*}: message: wanted ${bad#*:}"; }
done
# bench/dif-view.sh with RUNS: the table RUNS times, then per row the
# lowest, median and highest ratio of the runs, checked against the
# target (MISSED and exit 1 exactly when a median is below it).  Short
# rounds: the figures mean nothing, the arithmetic must be right.
script=$srcdir/../bench/dif-view.sh
r=0
RUNS=2 CONNECTIONS=1 SPAN=2M NBDKIT=$(nbdkit_wrapper) \
  bash "$script" "$top_builddir" -- --rounds 1 --round-ms 30 > "$out" 2>&1 || r=$?
[ "$r" = 0 ] || [ "$r" = 1 ] || { cat "$out"; fail "dif-view.sh RUNS=2: exit $r"; }
[ "$(grep -c '^-- run [12] of 2$' "$out")" = 2 ] ||
  { cat "$out"; fail "dif-view.sh RUNS=2: not two runs"; }
python3 - "$out" "$r" <<'EOF' || { cat "$out"; fail "dif-view.sh RUNS=2: summary"; }
import re, statistics, sys
text = open(sys.argv[1]).read()
runs, summary = text.split("2 runs, the target applies to the medians")
# Each run's client and server CPU tables, apart.
client = server = ""
for part in runs.split("-- run ")[1:]:
    before, after = part.split("server CPU (user")
    client += before.split("client CPU (user")[1]
    server += after
rows = ["write 4 KiB", "read 4 KiB", "write 128 KiB", "read 128 KiB"]
missed = False
for row in rows:
    got = [float(x) for x in re.findall(
        r"^%s +\S+ MB/s +\S+ MB/s +([0-9.]+)x" % row, runs, re.M)]
    assert len(got) == 2, (row, got)
    # 128 KiB writes are held to their guard level, the rest to 0.85.
    target = "0.75" if row == "write 128 KiB" else "0.85"
    m = re.search(r"^%s +2 +([0-9.]+)x +([0-9.]+)x +([0-9.]+)x +target %sx(  MISSED)?$"
                  % (row, re.escape(target)), summary, re.M)
    assert m, row
    lo, med, hi = (float(m.group(i)) for i in (1, 2, 3))
    assert abs(lo - min(got)) < 0.006 and abs(hi - max(got)) < 0.006, row
    assert abs(med - statistics.median(got)) < 0.006, (row, med, got)
    t = float(target)
    assert bool(m.group(4)) == (statistics.median(got) < t - 0.006) or \
        abs(statistics.median(got) - t) < 0.006, row
    missed = missed or bool(m.group(4))
    # The client CPU ratios of the runs: lowest, median, highest.
    cpu = [float(x) for x in re.findall(
        r"^%s +\S+ ms/MB +\S+ ms/MB +([0-9.]+)x$" % row, client, re.M)]
    assert len(cpu) == 2, (row, cpu)
    m = re.search(r"^%s +2 +([0-9.]+)x +([0-9.]+)x +([0-9.]+)x$" % row,
                  summary.split("client CPU per MB")[1], re.M)
    assert m, ("cpu", row)
    lo, med, hi = (float(m.group(i)) for i in (1, 2, 3))
    assert abs(lo - min(cpu)) < 0.006 and abs(hi - max(cpu)) < 0.006, row
    assert abs(med - statistics.median(cpu)) < 0.006, (row, med, cpu)
    # The servers' CPU ratios (those the short rounds could measure).
    scpu = [float(x) for x in re.findall(
        r"^%s +\S+ ms/MB +\S+ ms/MB +([0-9.]+)x$" % row, server, re.M)]
    m = re.search(r"^%s +%d +([0-9.]+)x +([0-9.]+)x +([0-9.]+)x$"
                  % (row, len(scpu)),
                  summary.split("server CPU per MB")[1], re.M)
    if scpu:
        assert m, ("server cpu", row, scpu)
        lo, med, hi = (float(m.group(i)) for i in (1, 2, 3))
        assert abs(lo - min(scpu)) < 0.006 and abs(hi - max(scpu)) < 0.006, row
        assert abs(med - statistics.median(scpu)) < 0.006, (row, med, scpu)
    else:
        assert not re.search(r"^%s " % row,
                             summary.split("server CPU per MB")[1], re.M)
# The caller-thread rows: medians and MISSED like the others (no CPU
# table of their own).
for row, target in (("write 128K caller", "0.75"), ("read 128K caller", "0.85"),
                    ("write 4K caller", "0.80")):
    got = [float(x) for x in re.findall(
        r"^%s +\S+ MB/s +\S+ MB/s +([0-9.]+)x" % row, runs, re.M)]
    assert len(got) == 2, (row, got)
    m = re.search(r"^%s +2 +([0-9.]+)x +([0-9.]+)x +([0-9.]+)x +target %sx(  MISSED)?$"
                  % (row, re.escape(target)), summary, re.M)
    assert m, row
    med = float(m.group(2))
    assert abs(med - statistics.median(got)) < 0.006, (row, med, got)
    t = float(target)
    assert bool(m.group(4)) == (statistics.median(got) < t - 0.006) or \
        abs(statistics.median(got) - t) < 0.006, row
    missed = missed or bool(m.group(4))
assert missed == (sys.argv[2] == "1"), "exit status and MISSED disagree"
EOF
for bad in 0 x 2x; do
  r=0
  RUNS=$bad bash "$script" "$top_builddir" > "$out" 2>&1 || r=$?
  [ "$r" = 2 ] && grep -q "RUNS=$bad: not a number of runs" "$out" ||
    { cat "$out"; fail "dif-view.sh RUNS='$bad': exit $r"; }
done

# The fill before the timed rounds writes the whole span, so that reads
# verify real PI: after --only read over 4 MiB (128 KiB requests, 2 in
# flight) the last block of the span carries a real tuple, not the
# all-ones one of a block never written.  (Last: it needs nbdsh.)
requires_nbdsh
export NBDSH
export SPAN_BLOCK=$(( (4 << 20) / 512 - 1 ))
serve size=8M format=T10-DIF-TYPE1-CRC ctl=none -- \
  'SD_URI=$uri timeout 120 "$NBDKIT" -U - memory size=8M --run '\''"$HELPER" --span 4M --depth 2 --size 131072 --only read --side libstabledif --rounds 1 --round-ms 30 "$SD_URI" "$uri" && $NBDSH -c "h.connect_uri(\"nbd+unix:///dif?socket=${SD_URI#*socket=}\")" -c "b = h.pread(520, $SPAN_BLOCK * 520); assert b[512:] != b\"\\xff\" * 8, b[512:]; print(\"last block written\")"'\' \
  > "$out" 2>&1 || { cat "$out"; fail "bench-dif-view: the fill did not write the whole span"; }
grep -q '^last block written$' "$out" || { cat "$out"; fail "span check did not run"; }
echo "$0: ok"
