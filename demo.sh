#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh: what "make demo" runs (README: ./bootstrap && make demo).
#
#   sh demo.sh [BUILDDIR]
#
# Serves a 64 MiB disk with T10 DIF Type 1 protection (memory storage,
# control socket in a private directory) with the stabledif plugin under
# nbdkit, runs stabledif-bench over every stable-page policy against it
# (DEMO_DURATION seconds each, default 3), then shows the device's own
# view with stabledif-ctl: its counters and the last write it rejected.
# The latency plot goes to $DEMO_SVG (default BUILDDIR/demo.svg).
# Everything stops by itself (nbdkit --run); about 20 seconds on 2 CPUs.
set -eu

builddir=$(cd "${1:-.}" && pwd)
: "${NBDKIT:=nbdkit}"
: "${DEMO_DURATION:=3}"
: "${DEMO_SVG:=$builddir/demo.svg}"
plugin=$builddir/stabledif.so
bench=$builddir/client/stabledif-bench/stabledif-bench
ctl=$builddir/client/stabledif-ctl/stabledif-ctl
for f in "$plugin" "$bench" "$ctl"; do
  [ -e "$f" ] || { echo "demo: $f is missing: run make first" >&2; exit 1; }
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/stabledif-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM

cat <<EOF
== stabledif demo ==================================================

A disk that checks protection information, like a T10 DIF/DIX disk:
every block carries a CRC (the guard) computed by the host when it
submits a write; if the page changes before the data is transferred,
the guard no longer matches and the device rejects the write.  Hosts
keep pages stable by waiting for writeback (wait, wait-sent) or by
copying them (snapshot).  stabledif-bench models a page cache on it:
writer threads change hot pages, a flusher writes them back.

Serving: nbdkit stabledif size=64M format=T10-DIF-TYPE1-CRC (memory)
Running: stabledif-bench --duration $DEMO_DURATION, all policies ...
EOF

# The commands run while the disk is served ($1: its URI).  nbdkit's own
# log (one line per rejected write) goes to a file; the bench's progress
# line goes to our stderr (fd 3).
cat > "$dir/run.sh" <<EOF
set -eu
"$bench" --duration "$DEMO_DURATION" --ctl "$dir/ctl.sock" \\
  --svg "$DEMO_SVG" "\$1" 2>&3
echo
echo "== stabledif-ctl status: the device's own counters ====================="
echo
"$ctl" -s "$dir/ctl.sock" status
echo
echo "== stabledif-ctl events -n 1: the last write the device rejected ========"
echo
"$ctl" -s "$dir/ctl.sock" events -n 1
EOF

if ! "$NBDKIT" -U - --exit-with-parent "$plugin" size=64M \
       format=T10-DIF-TYPE1-CRC ctl="$dir/ctl.sock" \
       --run "sh '$dir/run.sh' \"\$uri\"" 3>&2 2>"$dir/nbdkit.log"; then
  echo "demo: failed; nbdkit's log:" >&2
  cat "$dir/nbdkit.log" >&2
  exit 1
fi

cat <<EOF

== what to look at ===================================================

- Write MaxLat: under wait (and auto, which is wait on this disk) a
  writer that touches a page under writeback stalls until the device
  answers; snapshot and none never wait.
- Throughput: the writers' MB/sec, the price of that stalling.
- Corruption: none changes pages under writeback; the device rejects
  those writes (guard errors) and the client sees which blocks changed;
  every other policy sends exactly what it checksummed.
- Latency plot: $DEMO_SVG
- Reproduce: $bench --help, and bench/README.md for the ratios.
EOF
