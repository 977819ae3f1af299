#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: stabledif-ctl against the real plugin.
#
# status/counters/events/reset/inject/watch/check, as tables and with
# --json; check exits 0 on a clean device and 1 once corruption was seen
# (a rejected dif write, a read of an injected block), 0 again after
# reset; usage and connection errors exit 2, refusals by the device 1;
# events --follow prints new events and ends on SIGINT or when the
# device goes away; watch refreshes in place on a terminal and prints
# plain lines otherwise; the socket is found without -s when exactly one
# device runs, and several are listed.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh python3
: "${top_builddir:?top_builddir must be set}"
CTLBIN="$top_builddir/client/stabledif-ctl/stabledif-ctl"
[ -x "$CTLBIN" ] || fail "$CTLBIN not built"

# The client commands, run by nbdkit --run with the NBD socket as $1.
cat > "$tmpdir/cli.sh" <<'EOF'
set -eu
sock=$1
out=$tmpdir/out
ctl () { "$CTLBIN" -s "$CTL" "$@"; }
fail () { echo "cli.sh: FAIL: $*" >&2; exit 1; }
# nbd EXPORT PYTHON: run PYTHON in nbdsh connected to EXPORT.
nbd () {
  nbdsh -c "h.set_export_name('$1')" -c "h.connect_unix('$sock')" -c "$2"
}
# expect_rc WANT CMD...: CMD must exit with status WANT; its stdout goes
# to $out, its stderr to $err.
err=$tmpdir/err
expect_rc () {
  local want=$1 r=0; shift
  "$@" > $out 2> $err || r=$?
  [ "$r" = "$want" ] || { cat $out $err; fail "$*: exit $r, wanted $want"; }
}
# json FILE EXPR: evaluate python EXPR with j = the JSON in FILE.
json () { python3 -c "import json,sys; j=json.load(open('$1')); sys.exit(0 if ($2) else 1)" ||
            { cat "$1"; fail "json $1: $2"; }; }

"$CTLBIN" --version | grep -qE '^stabledif-ctl [0-9]+\.[0-9]+' || fail --version
"$CTLBIN" --help | grep -q '^Usage: stabledif-ctl' || fail --help

# A fresh device is clean.
expect_rc 0 ctl check
grep -q '^clean' $out || fail "check output: $(cat $out)"
ctl status > $out
grep -qxF 'profile (dif)     stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1' $out ||
  { cat $out; fail "status: no dif profile"; }
grep -qxF 'corruption        none seen' $out || fail "status: corruption"
echo "ok: clean device"

# A workload on both views; the counters follow.
nbd data 'h.pwrite(b"\x5a" * 65536, 0); h.pread(65536, 0); h.flush()'
nbd dif '
import errno, struct
from pi_ref import crc16_t10dif as crc16
blocks = [bytes([i]) * 512 for i in range(4)]
h.pwrite(b"".join(b + struct.pack(">HHI", crc16(b), 0, 200 + i)
                  for i, b in enumerate(blocks)), 200 * 520)
bad = b"".join(b + struct.pack(">HHI", crc16(b) ^ (i == 3), 0, 300 + i)
               for i, b in enumerate(blocks))
try:
    h.pwrite(bad, 300 * 520)
    raise SystemExit("bad guard accepted")
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
'
ctl --json counters > $out
json $out 'j["ok"] and j["counters"]["requests"]["data"]["write"] == 1'
json $out 'j["counters"]["bytes"]["data"]["write"] == 65536'
json $out 'j["counters"]["requests"]["dif"]["write"] == 2'
json $out 'j["counters"]["blocks"]["generated"] == 128'
json $out 'j["counters"]["write_errors"]["guard"] == 1'
json $out 'j["counters"]["writes_rejected"] == 1'
ctl counters > $out
grep -qE '^requests\.data\.write +1$' $out || { cat $out; fail counters; }
grep -qE '^writes_rejected +1$' $out || { cat $out; fail counters; }
echo "ok: counters after a workload"

# The rejected write is corruption: check says so and exits 1.
expect_rc 1 ctl check
grep -q 'SEEN' $out || fail "check output: $(cat $out)"
ctl status > $out
grep -q '^corruption        SEEN' $out || { cat $out; fail "status: SEEN"; }
grep -qE '^writes rejected +1$' $out || { cat $out; fail "status: rejected"; }
grep -qxF 'failures by connection (all 1 event):' $out ||
  { cat $out; fail "status: failures by connection"; }
grep -qE '^  conn [0-9]+ +1 bad block\(s\) written, 0 read; last event 1$' $out ||
  { cat $out; fail "status: failures of the connection"; }
ctl status > $tmpdir/status-after-workload.txt
ctl events > $out
grep -qE '^ +1 .* dif +write +303 guard ' $out || { cat $out; fail events; }
ctl events -n 1 --json > $out
json $out 'len(j["events"]) == 1 and j["events"][0]["lba"] == 303'
json $out 'j["events"][0]["check"] == "guard" and j["next"] == 1'
echo "ok: check/status/events see the rejected write"

# reset: clean again.
ctl reset | grep -q reset || fail reset
expect_rc 0 ctl check
[ "$(ctl events | wc -l)" = 1 ] || fail "events after reset"   # header only

# inject, then a data read fails; check exits 1; the event has the LBA.
ctl inject data 201 | grep -qx 'injected data corruption into block 201' ||
  fail inject
nbd data '
import errno
try:
    h.pread(512, 201 * 512)
    raise SystemExit("read of an injected block succeeded")
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
'
expect_rc 1 ctl check
ctl --json events > $out
json $out 'j["events"][-1]["lba"] == 201 and j["events"][-1]["op"] == "read"'
json $out 'j["events"][-1]["view"] == "data" and j["events"][-1]["seq"] == 2'
echo "ok: inject + read: check exits 1"

# More failures than the device keeps events for (1024): the heading of
# the failures by connection says they are the last 1024 of them all.
nbd dif '
import errno
bad = (b"\x01" * 512 + bytes(8)) * 100     # guard 0: wrong in every block
for lba in range(0, 1100, 100):
    try:
        h.pwrite(bad, lba * 520)
        raise SystemExit("bad guards accepted")
    except nbd.Error as e:
        assert e.errnum == errno.EIO, e
'
ctl status > $out
grep -qxF 'failures by connection (the last 1024 of 1102 events):' $out ||
  { cat $out; fail "status: failures by connection of a full ring"; }
echo "ok: status says which events the failures by connection count"

# Errors: device refusals exit 1, usage and connection errors 2.
expect_rc 1 ctl inject data 99999999
grep -q 'out of range' $err || fail "inject range message"
expect_rc 1 ctl inject bogus 1
grep -q 'unknown kind' $err || fail "inject kind message"
expect_rc 2 ctl frobnicate
expect_rc 2 ctl inject data
expect_rc 2 ctl events extra
expect_rc 2 ctl --count 2 status
expect_rc 2 ctl watch --interval 0
expect_rc 2 "$CTLBIN" -s "$tmpdir/nonexistent.sock" check
grep -q 'nonexistent.sock' $err || fail "missing socket message"
expect_rc 2 "$CTLBIN"
# The NBD socket given by mistake: stabledif-ctl says so at once (the
# NBD server speaks first), exit 2; so for a server whose reply is not
# JSON.
for cmd in status check counters "events --follow" watch; do
  expect_rc 2 timeout 10 "$CTLBIN" -s "$sock" $cmd
  grep -qxF "stabledif-ctl: $sock: not a stabledif control socket: an NBD server answered (NBDMAGIC); use the path nbdkit prints as \"control socket:\" when it starts" $err ||
    { cat $err; fail "$cmd on the NBD socket: message"; }
done
chatty=$tmpdir/chatty.sock
python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept()
c.sendall(b"220 hello\r\n")
c.recv(100)
' "$chatty" & chatty_pid=$!
for _ in $(seq 100); do [ -S "$chatty" ] && break; sleep 0.1; done
expect_rc 2 timeout 10 "$CTLBIN" -s "$chatty" status
wait $chatty_pid || :
grep -qxF "stabledif-ctl: $chatty: not a stabledif control socket: its reply does not start with a JSON object" $err ||
  { cat $err; fail "a server that is not ours: message"; }
# A one-shot command stops at SIGTERM at once (only watch and --follow
# catch it, to stop cleanly), even while a device keeps it waiting.
silent=$tmpdir/silent.sock
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept()
time.sleep(20)
' "$silent" & silent_pid=$!
for _ in $(seq 100); do [ -S "$silent" ] && break; sleep 0.1; done
"$CTLBIN" -s "$silent" check > /dev/null 2>&1 & ctl_pid=$!
sleep 0.5
t0=$(date +%s%N)
kill -TERM $ctl_pid
rc=0; wait $ctl_pid || rc=$?
t1=$(date +%s%N)
kill $silent_pid 2>/dev/null || :
wait $silent_pid 2>/dev/null || :
[ "$rc" = 143 ] || fail "check after SIGTERM: exit $rc, wanted 143 (killed)"
[ $(( (t1 - t0) / 1000000 )) -lt 3000 ] ||
  fail "check took $(( (t1 - t0) / 1000000 )) ms to stop after SIGTERM"
echo "ok: exit statuses"

# --json: an error reply is printed on stdout as it is, one JSON line,
# and its message on stderr; exit 1.
expect_rc 1 ctl --json inject app 0x10
[ "$(wc -l < $out)" = 1 ] || { cat $out; fail "--json refusal: not one line"; }
json $out 'j["ok"] is False and j["error"].startswith("inject app: ")'
msg=$(python3 -c "import json; print(json.load(open('$out'))['error'])")
grep -qxF "stabledif-ctl: $msg" $err || { cat $err; fail "--json refusal: stderr"; }
expect_rc 1 ctl --json inject data 99999999
json $out 'j["ok"] is False and "out of range" in j["error"]'
echo "ok: --json prints error replies"

# usage_err PATTERN ARGS...: stabledif-ctl ARGS is a usage error: exit 2,
# one line on stderr, "stabledif-ctl: " first (never the path it was run
# by, nor getopt's own words), matching the regular expression PATTERN.
usage_err () {
  local pattern=$1; shift
  expect_rc 2 "$CTLBIN" "$@"
  [ "$(wc -l < $err)" = 1 ] || { cat $err; fail "$*: not one line"; }
  grep -q '^stabledif-ctl: ' $err || { cat $err; fail "$*: prefix"; }
  ! grep -qF "$CTLBIN" $err || { cat $err; fail "$*: names argv[0]"; }
  grep -qE -- "$pattern" $err || { cat $err; fail "$*: wanted '$pattern'"; }
}
# The arguments of inject are never options: a bad LBA is named, and
# nothing reaches the device.
injections=$(ctl counters | awk '$1 == "injections" { print $2 }')
usage_err "^stabledif-ctl: inject guard: LBA '-1' is not a number" \
  -s "$CTL" inject guard -1
usage_err "inject data: LBA '12a' is not a number" -s "$CTL" inject data 12a
usage_err "inject ref: LBA '0x' is not a number" -s "$CTL" inject ref 0x
usage_err "inject ref: LBA '' is not a number" -s "$CTL" inject ref ''
usage_err "inject: KIND is not one word" -s "$CTL" inject 'data 1' 2
usage_err "inject takes two arguments" -s "$CTL" inject -j data 1
[ "$(ctl counters | awk '$1 == "injections" { print $2 }')" = "$injections" ] ||
  fail "a refused inject reached the device"
# getopt's errors are the tool's own one-liners.
usage_err "unknown option '--bogus'" --bogus status
usage_err "unknown option '-x'" -x status
usage_err "unknown option '-x'" -s "$CTL" status -x
usage_err "option '-s' needs an argument" status -s
usage_err "option '--count' needs an argument" watch --count
usage_err "--count 0: the number of refreshes must be at least 1" \
  -s "$CTL" watch --count 0
usage_err "option '--json=1' takes no argument" --json=1 status
usage_err "events takes no arguments \(got 'extra'\)" -s "$CTL" events extra -n 1
usage_err "unknown command 'frobnicate'" frobnicate -x
# Options still follow events and watch.
expect_rc 0 ctl events -n 1 --json
json $out 'len(j["events"]) == 1'
echo "ok: usage errors are one line of the tool's own"

# watch: plain lines when not a terminal; --json lines; in place on a tty.
ctl watch --count 3 --interval 0.05 > $out
[ "$(wc -l < $out)" = 3 ] || { cat $out; fail "watch: 3 lines"; }
grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2} data r ' $out || fail "watch format"
! grep -q $'\033' $out || fail "watch: escapes when not a terminal"
ctl --json watch --count 2 --interval 0.05 > $out
[ "$(wc -l < $out)" = 2 ] || fail "watch --json: 2 lines"
python3 -c "import json; [json.loads(l) for l in open('$out')]" ||
  fail "watch --json: not JSON lines"
if command -v script >/dev/null; then
  script -qec "'$CTLBIN' -s '$CTL' watch --count 2 --interval 0.05" /dev/null \
    > $out < /dev/null
  [ "$(grep -c $'\033\\[H\033\\[2J' $out)" = 2 ] ||
    { cat -v $out; fail "watch on a tty: no refresh in place"; }
  grep -q 'bad blocks read' $out || fail "watch screen"
fi
echo "ok: watch"

# events --follow: new events appear; SIGINT ends it with status 0.
"$CTLBIN" -s "$CTL" events --follow --interval 0.05 > $tmpdir/follow.out 2>&1 &
fpid=$!
nbd dif 'h.pwrite(b"\0" * 520, 400 * 520)' 2>/dev/null && fail "zero guard accepted"
for i in $(seq 200); do
  grep -qE ' dif +write +400 ' $tmpdir/follow.out && break
  sleep 0.05
done
grep -qE ' dif +write +400 ' $tmpdir/follow.out ||
  { cat $tmpdir/follow.out; fail "follow: new event not shown"; }
kill -INT $fpid
for i in $(seq 200); do
  kill -0 $fpid 2>/dev/null || break
  sleep 0.05
done
kill -0 $fpid 2>/dev/null && { kill -9 $fpid; fail "follow: still running after SIGINT"; }
r=0; wait $fpid || r=$?
[ $r = 0 ] || fail "follow: exit status $r after SIGINT"
echo "ok: events --follow, SIGINT"

# A follower still running when the device stops: it must end by itself.
( ctl events --follow --interval 0.05 > $tmpdir/follow2.out 2>&1
  echo $? > $tmpdir/follow2.rc ) &
for i in $(seq 200); do
  grep -q 'SEQ' $tmpdir/follow2.out 2>/dev/null && break
  sleep 0.05
done
EOF

export CTL="$tmpdir/ctl.sock" CTLBIN tmpdir
SERVE_LOG="$tmpdir/nbdkit.log" \
  serve size=1M ctl="$CTL" -- "bash '$tmpdir/cli.sh' \"\$unixsocket\"" ||
  { cat "$tmpdir/nbdkit.log" >&2; fail "stabledif-ctl checks"; }

for i in $(seq 400); do
  [ -s "$tmpdir/follow2.rc" ] && break
  sleep 0.05
done
[ -s "$tmpdir/follow2.rc" ] || fail "follow did not end when the device stopped"
[ "$(cat "$tmpdir/follow2.rc")" = 0 ] || fail "follow: exit status $(cat "$tmpdir/follow2.rc")"
grep -q 'closed' "$tmpdir/follow2.out" || fail "follow: no closed message"
echo "ok: events --follow ends when the device stops"

echo "--- stabledif-ctl status after the workload:"
cat "$tmpdir/status-after-workload.txt"

# Finding the socket: exactly one device under $XDG_RUNTIME_DIR (a stale
# socket there is ignored); two devices are listed, exit 2.
probe=$(XDG_RUNTIME_DIR= "$CTLBIN" status 2>&1 >/dev/null || :)
if ! echo "$probe" | grep -q 'no running stabledif device'; then
  echo "SKIP (finding the socket): devices outside the test run in /tmp"
  exit 0
fi
xdg="$tmpdir/xdg"
mkdir -m 700 "$xdg"
python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('$xdg/stabledif-1.sock')"
export XDG_RUNTIME_DIR="$xdg"
serve size=1M -- "'$CTLBIN' check > '$tmpdir/find.out'" ||
  fail "check without -s: $(cat "$tmpdir/find.out")"
grep -q '^clean' "$tmpdir/find.out" || fail "found socket: $(cat "$tmpdir/find.out")"
cat > "$tmpdir/two.sh" <<EOF2
unset LD_PRELOAD
r=0
'$CTLBIN' status 2> '$tmpdir/two.err' || r=\$?
echo \$r > '$tmpdir/two.rc'
EOF2
serve size=1M -- \
  "LD_PRELOAD='$nbdkit_preload' '$NBDKIT' -U - '$PLUGIN' size=1M --run 'bash $tmpdir/two.sh'"
[ "$(cat "$tmpdir/two.rc")" = 2 ] || fail "two devices: exit $(cat "$tmpdir/two.rc")"
grep -q '2 stabledif devices are running' "$tmpdir/two.err" ||
  fail "two devices: $(cat "$tmpdir/two.err")"
[ "$(grep -c "^  $xdg/stabledif-[0-9]*\.sock$" "$tmpdir/two.err")" = 2 ] ||
  fail "two devices not listed: $(cat "$tmpdir/two.err")"
unset XDG_RUNTIME_DIR
echo "ok: finding the socket"
