#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the main job ("make demo", README's first command) does what
# README promises: it serves a T10 DIF disk, runs stabledif-bench over
# every policy against it, and prints the table and the device's status
# -- with the corruption that policy none lets through, and only there.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires "$NBDKIT"

out="$tmpdir/demo.txt"
svg="$tmpdir/demo.svg"

# "make demo" as README has it, at the top of the build tree (the make
# of the test run not passed on).  A short run (the bench's duration is
# per policy); the plot goes to the test's directory, not the build
# tree; demo.sh's nbdkit runs as the other tests' (run_nbdkit): NBDKIT
# on make's command line, since the Makefile's own NBDKIT (configure's)
# would win over the environment's.
: "${top_builddir:=..}"
if ! (cd "$top_builddir" &&
      unset MAKEFLAGS MFLAGS MAKELEVEL &&
      DEMO_DURATION=1 DEMO_SVG=$svg \
      timeout "$STABLEDIF_TEST_TIMEOUT" make demo NBDKIT="$(nbdkit_wrapper)") \
     > "$out" 2> "$tmpdir/demo.err"; then
  cat "$out" "$tmpdir/demo.err" >&2
  fail "make demo failed"
fi
cat "$out"

# Only the demo: its banner is the first line, nothing on stderr (the
# build, current here, prints nothing).
head -n1 "$out" | grep -q '^== stabledif demo ==' ||
  fail "make demo printed something before the demo: $(head -n1 "$out")"
[ ! -s "$tmpdir/demo.err" ] ||
  { cat "$tmpdir/demo.err" >&2; fail "make demo wrote to stderr"; }

# Every policy ran, auto as wait (the disk requires stable writes).
grep -q "^policy auto (in effect: wait)" "$out" ||
  fail "no table for policy auto in effect as wait"
for p in wait wait-sent snapshot none; do
  grep -q "^policy $p\b" "$out" || fail "no table for policy $p"
done

# The summary: "dev rej" and "changed" are the last two columns.  Only
# none has either, and then the device rejected exactly the writes the
# client saw change (the same guard, computed on both sides).
row () {
  awk -v p="$1" '/^Summary/ { s = 1 } s && $1 == p { print; exit }' "$out"
}
for p in auto wait wait-sent snapshot; do
  r=$(row "$p")
  [ -n "$r" ] || fail "no summary row for $p"
  set -- $r
  [ "${*: -2:1}" = 0 ] && [ "${*: -1}" = 0 ] ||
    fail "policy $p: corruption in the summary: $r"
done
r=$(row none)
[ -n "$r" ] || fail "no summary row for none"
set -- $r
rej=${*: -2:1} changed=${*: -1}
[ "$rej" -gt 0 ] || fail "policy none: the device rejected nothing: $r"
[ "$rej" = "$changed" ] ||
  fail "policy none: $rej writes rejected by the device, $changed changed"

# The device's own view agrees: its writes-rejected counter is the
# summary's, its guard errors are what corrupted them, and the last
# event is a rejected dif write failing the guard check.
grep -q "^== stabledif-ctl status" "$out" || fail "no stabledif-ctl status"
dev=$(awk '$1 == "writes" && $2 == "rejected" { print $3; exit }' "$out")
[ "$dev" = "$rej" ] ||
  fail "stabledif-ctl status: $dev writes rejected, summary says $rej"
grep -Eq "^corruption +SEEN: [1-9][0-9]* bad block\(s\) written \(guard [1-9]" \
  "$out" || fail "stabledif-ctl status does not report the guard errors"
awk '/^== stabledif-ctl events/ { s = 1; next } /^== / { s = 0 }
     s && $4 == "dif" && $5 == "write" && $7 == "guard" { found = 1 }
     END { exit !found }' "$out" ||
  fail "stabledif-ctl events: no rejected dif write failing the guard"

# The latency plot was drawn where it was asked to go.
[ -s "$svg" ] && grep -q "<svg" "$svg" || fail "no latency plot at $svg"
for p in auto wait wait-sent snapshot none; do
  grep -Eq ">$p( \(|:)" "$svg" || fail "the plot's legend does not name policy $p"
done
echo "ok: demo: every policy, corruption only under none ($rej writes)"
