#!/usr/bin/env bash
# stabledif: bench/bench-dif-view, briefly, against the real plugin and
# nbdkit's memory plugin.  Not a measurement (no ratio is asserted):
# it proves that both ways of driving libstabledif -- from completion
# callbacks (the default) and from the main thread -- run every request
# to completion under each stable-page policy that copies or waits, that
# the table has its four rows, and that bad options exit 2.
. "${srcdir:-$(dirname "$0")}/functions.sh"
: "${top_builddir:?top_builddir must be set}"
HELPER="$top_builddir/bench/bench-dif-view"
[ -x "$HELPER" ] || fail "$HELPER not built"
export HELPER NBDKIT
out=$tmpdir/out

# run_bench ARGS...: bench-dif-view ARGS against a T10 device and the
# memory plugin (nested --run: each server stops with the command).
run_bench () {
  export BENCH_ARGS="$*"
  serve size=8M format=T10-DIF-TYPE1-CRC ctl=none -- \
    'SD_URI=$uri timeout 120 "$NBDKIT" -U - memory size=8M --run '\''"$HELPER" --span 2M --rounds 1 --round-ms 30 $BENCH_ARGS "$SD_URI" "$uri"'\'
}

for args in "" "--submit thread" "--policy snapshot" "--policy wait-sent --depth 3"; do
  run_bench $args > "$out" 2>&1 || { cat "$out"; fail "bench-dif-view $args failed"; }
  for row in "write 4 KiB" "read 4 KiB" "write 128 KiB" "read 128 KiB"; do
    grep -q "^$row .* MB/s .* MB/s .*x" "$out" ||
      { cat "$out"; fail "bench-dif-view $args: no row \"$row\""; }
  done
  grep -q "submits from $([ "$args" = "--submit thread" ] && echo 'the main thread' || echo 'completion callbacks')" "$out" ||
    { cat "$out"; fail "bench-dif-view $args: submission mode not named"; }
done

# One size, one side (the profiling mode).
run_bench --size 8192 --only read --side libstabledif > "$out" 2>&1 ||
  { cat "$out"; fail "bench-dif-view --side"; }
grep -q '^read 8 KiB: .* MB/s' "$out" || { cat "$out"; fail "--side output"; }
if grep -q '^write' "$out"; then cat "$out"; fail "--only read timed writes"; fi

# Bad options: exit 2 with a message naming the option, before any I/O.
for bad in "--submit sideways" "--side both" "--size 1000" "--depth x"; do
  r=0
  "$HELPER" $bad nbd+unix:///?socket=/nonexistent nbd+unix:///?socket=/x \
    > "$out" 2>&1 || r=$?
  [ "$r" = 2 ] || { cat "$out"; fail "$bad: exit $r, wanted 2"; }
  grep -q -e "${bad%% *}" -e "bad number" "$out" ||
    { cat "$out"; fail "$bad: message does not name the option"; }
done
echo "$0: ok"
