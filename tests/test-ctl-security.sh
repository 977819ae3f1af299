#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: security of the control socket, with the real plugin.
#
# - ctl= never follows a symbolic link nor replaces a file or directory
#   at its path (the target stays as it was); a stale socket of ours is
#   replaced (a live one is refused: test-ctl-socket); a directory
#   others may write without the sticky bit, or below one, is refused, a
#   sticky one like /tmp is accepted;
# - without XDG_RUNTIME_DIR the default socket goes into the private
#   directory $TMPDIR/stabledif-UID, made 0700, and a private directory
#   that is a link, open to others or (as root) someone else's is
#   refused; stabledif-ctl finds the socket there, and no longer in
#   $TMPDIR itself;
# - as root: another user (setpriv, uid 65534) cannot connect to the
#   socket, though they can connect to a socket of mode 0666 in the same
#   directory (so the check can fail);
# - no verb reads or writes outside the disk: out-of-range, huge and
#   negative arguments get a JSON error and change nothing (data file,
#   PI file, events file, counters), and (with strace) the server opens,
#   creates or removes no file while it answers every verb.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires python3 sha256sum
: "${top_builddir:?top_builddir must be set}"
CTLBIN="$top_builddir/client/stabledif-ctl/stabledif-ctl"
[ -x "$CTLBIN" ] || fail "$CTLBIN not built"
uid=$(id -u)

# A control socket client: "ctlreq.py SOCKET LINE..." sends each line
# and prints each reply line; exit 3 if it cannot connect (the errno
# name on stderr).
cat > "$tmpdir/ctlreq.py" <<'EOF'
import errno, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(30)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno), file=sys.stderr)
    sys.exit(3)
f = s.makefile("rb")
for line in sys.argv[2:]:
    s.sendall(line.encode() + b"\n")
    reply = f.readline()
    assert reply.endswith(b"\n"), "no reply to %r" % line
    sys.stdout.write(reply.decode())
EOF

# ---- ctl= paths that must be refused, untouched ----

# expect_refused PATTERN PATH: nbdkit with ctl=PATH refuses to start,
# naming ctl= and saying PATTERN.
expect_refused () {
  expect_config_error "ctl=.*$1" size=1M ctl="$2"
}

echo keep > "$tmpdir/target"
touch -d '2001-01-01 00:00:00' "$tmpdir/target"
stamp () { stat -c '%s %Y %a %i' "$tmpdir/target"; }
before=$(stamp)

ln -s "$tmpdir/target" "$tmpdir/link"
expect_refused "not a socket" "$tmpdir/link"
[ -L "$tmpdir/link" ] || fail "ctl= replaced a symlink"
[ "$(cat "$tmpdir/target")" = keep ] && [ "$(stamp)" = "$before" ] ||
  fail "ctl= changed the target of a symlink"

ln -s "$tmpdir/created-by-nbdkit" "$tmpdir/dangling"
expect_refused "not a socket" "$tmpdir/dangling"
[ ! -e "$tmpdir/created-by-nbdkit" ] || fail "ctl= followed a dangling link"

cp -p "$tmpdir/target" "$tmpdir/regular"
expect_refused "not a socket" "$tmpdir/regular"
cmp -s "$tmpdir/target" "$tmpdir/regular" || fail "ctl= changed a file"

mkdir "$tmpdir/adir"
expect_refused "not a socket" "$tmpdir/adir"
[ -d "$tmpdir/adir" ] || fail "ctl= removed a directory"
echo "ok: links, files and directories at ctl= are refused and untouched"

# A directory others could write (without the sticky bit): refused,
# nothing created in it.  The same with the sticky bit (like /tmp) is
# fine.  A missing directory is named.
mkdir -m 777 "$tmpdir/world"
chmod 777 "$tmpdir/world"
expect_refused "unsafe directory.*world is writable by group and others" \
  "$tmpdir/world/ctl.sock"
[ -z "$(ls -A "$tmpdir/world")" ] || fail "a socket was made in world/"
mkdir -m 770 "$tmpdir/group"
chmod 770 "$tmpdir/group"
expect_refused "unsafe directory.*writable by group" "$tmpdir/group/c.sock"
mkdir -m 777 "$tmpdir/outer"; chmod 777 "$tmpdir/outer"
mkdir -m 700 "$tmpdir/outer/inner"
expect_refused "unsafe directory.*outer is writable" \
  "$tmpdir/outer/inner/ctl.sock"
if [ -z "$nbdkit_preload" ]; then   # see test-ctl-plugin.sh: strerror
  expect_refused "directory .*no/such: No such file" "$tmpdir/no/such/c.sock"
fi
mkdir -m 1777 "$tmpdir/sticky"
chmod 1777 "$tmpdir/sticky"
serve size=1M ctl="$tmpdir/sticky/ctl.sock" -- \
  "python3 '$tmpdir/ctlreq.py' '$tmpdir/sticky/ctl.sock' help > '$tmpdir/out'"
grep -q '"ok":true' "$tmpdir/out" || fail "sticky directory: no answer"
echo "ok: directories others can write are refused, sticky ones accepted"

# A stale socket of ours (its server is gone) is replaced by the new
# one, which answers, and is removed when nbdkit exits.  (A live one is
# refused: test-ctl-socket.)
python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])" "$tmpdir/stale.sock"
[ -S "$tmpdir/stale.sock" ] || fail "no stale socket made"
python3 "$tmpdir/ctlreq.py" "$tmpdir/stale.sock" help 2>/dev/null &&
  fail "the stale socket answers"
SERVE_LOG="$tmpdir/stale.log" serve size=1M ctl="$tmpdir/stale.sock" -- \
  "python3 '$tmpdir/ctlreq.py' '$tmpdir/stale.sock' help > '$tmpdir/out'" ||
  { cat "$tmpdir/stale.log"; fail "stale socket not replaced"; }
grep -q '"ok":true' "$tmpdir/out" || fail "stale socket: no answer"
[ ! -e "$tmpdir/stale.sock" ] || fail "socket left behind"
echo "ok: a stale socket is replaced"

# ---- the default place without XDG_RUNTIME_DIR ----

# A private TMPDIR stands in for /tmp, so that the test never touches the
# real /tmp/stabledif-UID.
base="$tmpdir/tmpbase"
mkdir -m 700 "$base"
priv="$base/stabledif-$uid"

# default_serve CMD: serve with the default socket, no XDG_RUNTIME_DIR,
# TMPDIR=$base, and run CMD (the same environment) under --run.
default_serve () {
  (
    unset XDG_RUNTIME_DIR
    TMPDIR="$base" SERVE_LOG="$tmpdir/default.log"
    export TMPDIR
    serve size=1M -- "$1"
  )
}

: > "$tmpdir/default.log"
default_serve "ls -l '$priv' > '$tmpdir/ls' &&
  stat -c '%a %u %F' '$priv' > '$tmpdir/privstat' &&
  '$CTLBIN' --json counters > '$tmpdir/out'" ||
  { cat "$tmpdir/default.log"; fail "default socket in the private dir"; }
[ "$(cat "$tmpdir/privstat")" = "700 $uid directory" ] ||
  fail "private directory: $(cat "$tmpdir/privstat"), wanted 700 $uid"
grep -qE "^s.* stabledif-[0-9]+\.sock$" "$tmpdir/ls" ||
  { cat "$tmpdir/ls"; fail "no socket in the private directory"; }
grep -qE "control socket: $priv/stabledif-[0-9]+\.sock$" \
  "$tmpdir/default.log" || fail "default path not announced"
grep -q '"ok": *true' "$tmpdir/out" ||
  { cat "$tmpdir/out"; fail "stabledif-ctl did not find the socket"; }
[ -z "$(ls -A "$priv")" ] || fail "default socket left behind"
[ -z "$(ls -A "$base" | grep -v "^stabledif-$uid\$")" ] ||
  fail "something besides the private directory in TMPDIR"
echo "ok: default socket in $priv (0700), found by stabledif-ctl"

# stabledif-ctl no longer looks in TMPDIR itself: a device whose socket
# is there is not found without -s.
serve size=1M ctl="$base/stabledif-99999.sock" -- \
  "env -u XDG_RUNTIME_DIR TMPDIR='$base' '$CTLBIN' counters \
     > '$tmpdir/out' 2> '$tmpdir/err'; echo \$? > '$tmpdir/rc'"
[ "$(cat "$tmpdir/rc")" = 2 ] && grep -q "no running stabledif device" \
  "$tmpdir/err" || { cat "$tmpdir/err"; fail "found a socket in TMPDIR"; }
echo "ok: stabledif-ctl does not search TMPDIR itself"

# A private directory that is not safe is refused and left alone.
expect_default_refused () {
  local what=$1 pattern=$2
  : > "$tmpdir/default.log"
  if default_serve "touch '$tmpdir/ran'"; then
    fail "default socket directory $what: nbdkit started"
  fi
  [ ! -e "$tmpdir/ran" ] || fail "default socket directory $what: served"
  grep -Eq "ctl: the default control socket directory: .*$pattern.*ctl=PATH" \
    "$tmpdir/default.log" ||
    { cat "$tmpdir/default.log"; fail "$what: wrong error"; }
  echo "ok: default directory $what: $(grep -m1 'default control' \
    "$tmpdir/default.log")"
}
chmod 755 "$priv"
expect_default_refused "mode 0755" "$priv has mode 0755"
[ "$(stat -c %a "$priv")" = 755 ] || fail "mode of $priv changed"
chmod 700 "$priv"; mv "$priv" "$base/real"
ln -s "$base/real" "$priv"
expect_default_refused "a symlink" "$priv is a symbolic link"
[ -L "$priv" ] && [ -z "$(ls -A "$base/real")" ] ||
  fail "symlinked default directory was used"
rm "$priv"; echo keep > "$priv"
expect_default_refused "a file" "$priv exists and is not a directory"
[ "$(cat "$priv")" = keep ] || fail "file at the default directory changed"
rm "$priv"
if [ "$uid" = 0 ]; then
  mkdir -m 700 "$priv"; chown 65534:65534 "$priv"
  expect_default_refused "owned by another user" "owned by uid 65534"
  rmdir "$priv"
fi

# ---- other users (root only) ----

if [ "$uid" != 0 ]; then
  echo "SKIP part: other users (needs root)"
elif ! command -v setpriv >/dev/null || [ ! -x /usr/bin/python3 ]; then
  echo "SKIP part: other users (needs setpriv and /usr/bin/python3)"
else
  # Let uid 65534 reach pub/ (and nothing else of $tmpdir): then only the
  # mode of the socket itself can keep them out.
  chmod 711 "$tmpdir"
  mkdir -m 755 "$tmpdir/pub"
  cp "$tmpdir/ctlreq.py" "$tmpdir/pub/ctlreq.py"
  chmod 644 "$tmpdir/pub/ctlreq.py"
  cat > "$tmpdir/others.sh" <<EOF
set -u
as_nobody () {
  setpriv --reuid=65534 --regid=65534 --clear-groups \
    /usr/bin/python3 '$tmpdir/pub/ctlreq.py' "\$1" help
}
# Control: a socket of mode 0666 next to it accepts them.
/usr/bin/python3 -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o666); s.listen(1)
open(sys.argv[2], "w").close()
c, _ = s.accept(); c.recv(100); c.sendall(b"{\"ok\":true}\n")
' '$tmpdir/pub/open.sock' '$tmpdir/pub/ready' &
i=0; while [ ! -e '$tmpdir/pub/ready' ] && [ \$i -lt 300 ]; do
  sleep 0.1; i=\$((i + 1)); done
as_nobody '$tmpdir/pub/open.sock' > '$tmpdir/open.out' 2>&1 ||
  { echo "uid 65534 cannot use the open control socket"; exit 1; }
wait
# The device's socket (0600): permission denied.
if as_nobody '$tmpdir/pub/ctl.sock' > '$tmpdir/nobody.out' 2>&1; then
  echo "uid 65534 talked to the control socket"; exit 1
fi
grep -qx EACCES '$tmpdir/nobody.out' ||
  { cat '$tmpdir/nobody.out'; exit 1; }
# And root still can.
python3 '$tmpdir/ctlreq.py' '$tmpdir/pub/ctl.sock' help > '$tmpdir/out'
EOF
  serve size=1M ctl="$tmpdir/pub/ctl.sock" -- "bash '$tmpdir/others.sh'" ||
    fail "other users"
  grep -q '"ok":true' "$tmpdir/out" || fail "root cannot use the socket"
  chmod 700 "$tmpdir"
  echo "ok: uid 65534 gets EACCES on the socket (and connects to a 0666 one)"
fi

# ---- nothing outside the disk ----

# The client side, run by nbdkit --run: arguments that point outside the
# disk are refused with a JSON error and change nothing; then, under
# strace (if it can attach), every verb is answered without the server
# opening, creating or removing any file.
cat > "$tmpdir/disk.sh" <<'EOF'
set -eu
fail () { echo "disk.sh: FAIL: $*" >&2; exit 1; }
req () { python3 "$tmpdir/ctlreq.py" "$tmpdir/ctl.sock" "$@"; }
snapshot () {
  ( cd "$tmpdir/d" && ls -A && stat -c '%n %s %Y' disk disk.pi events.jsonl &&
    sha256sum disk disk.pi events.jsonl )
}
# refused LINE PATTERN: the reply is {"ok":false} with an error saying
# PATTERN.
refused () {
  req "$1" > "$tmpdir/reply"
  python3 - "$tmpdir/reply" "$2" <<'PY' || fail "'$1': $(cat "$tmpdir/reply")"
import json, re, sys
j = json.loads(open(sys.argv[1]).read())
assert j["ok"] is False and re.search(sys.argv[2], j["error"]), j
PY
}
: > "$tmpdir/d/events.jsonl"
snapshot > "$tmpdir/before"

# The disk has 2048 blocks, 0 to 2047.
refused "inject data 2048" "out of range.*2048 blocks"
refused "inject data 0x800" "out of range"
refused "inject guard 4294967296" "out of range"
refused "inject ref 18446744073709551615" "out of range"
refused "inject guard 18446744073709551616" "too large"
refused "inject guard 99999999999999999999999" "too large"
refused "inject guard -1" "not a number"
refused "inject guard -0" "not a number"
refused "inject data 1e3" "not a number"
refused "inject data /etc/passwd" "not a number"
refused "inject data ../disk" "not a number"
refused "inject /etc/passwd 1" "unknown kind"
refused "events -1" "bad SINCE"
refused "events 18446744073709551616" "too large"
refused "events /etc/passwd" "bad SINCE"
refused "profile /etc/passwd" "too many arguments"
refused "open /etc/passwd" "unknown verb"
refused "load $tmpdir/d/disk" "unknown verb"
# A SINCE beyond every event is not an error: nothing newer, and "next"
# resynchronises the client.
req "events 18446744073709551615" > "$tmpdir/reply"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['ok'] and j['events'] == [] and j['next'] == 0 and not j['more'], j
" "$tmpdir/reply" || fail "events 2^64-1: $(cat "$tmpdir/reply")"
req counters > "$tmpdir/reply"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['ok'] and j['counters']['injections'] == 0, j
" "$tmpdir/reply" || fail "counters: $(cat "$tmpdir/reply")"
snapshot > "$tmpdir/after"
cmp -s "$tmpdir/before" "$tmpdir/after" ||
  { diff "$tmpdir/before" "$tmpdir/after" >&2; fail "files changed"; }
echo "ok: out-of-disk and malformed arguments refused, nothing changed"

# Control: an injection into the last block does change the PI file
# (so the comparison above can see a change), and nothing else.
sha_pi=$(sha256sum < "$tmpdir/d/disk.pi")
sha_data=$(sha256sum < "$tmpdir/d/disk")
req "inject guard 2047" | grep -q '"ok":true' || fail "inject guard 2047"
[ "$(sha256sum < "$tmpdir/d/disk.pi")" != "$sha_pi" ] ||
  fail "inject guard 2047 did not change the PI file"
[ "$(sha256sum < "$tmpdir/d/disk")" = "$sha_data" ] ||
  fail "inject guard changed the data file"
echo "ok: a valid injection changes the PI file of that block"

# Under strace: every verb, and no file system call by the server.
if ! command -v strace >/dev/null; then
  echo "SKIP part: no file opened (strace not installed)"
  exit 0
fi
pid=$PPID i=0
while [ "$(cat /proc/$pid/comm)" != nbdkit ] && [ $i -lt 10 ]; do
  pid=$(awk '{ print $4 }' /proc/$pid/stat); i=$((i + 1))
done
[ "$(cat /proc/$pid/comm)" = nbdkit ] || fail "nbdkit process not found"
# nbdkit --run runs the command in its first process and serves from a
# child: that child has the control socket.
server=""
for st in /proc/[0-9]*/stat; do
  read -r p comm state ppid rest 2>/dev/null < "$st" || continue
  [ "$ppid" = "$pid" ] && [ "$comm" = "(nbdkit)" ] && server=$p
done
[ -n "$server" ] || fail "nbdkit server process not found"
pid=$server
strace -f -p "$pid" -o "$tmpdir/strace.log" \
  -e trace=open,openat,openat2,creat,truncate,mkdir,mkdirat,rmdir,unlink,unlinkat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,chmod,fchmodat,chown,fchownat,lchown,mknod,mknodat,accept,accept4 \
  2> "$tmpdir/strace.err" &
spid=$! i=0
until grep -q attached "$tmpdir/strace.err" 2>/dev/null || [ $i -ge 300 ]; do
  kill -0 $spid 2>/dev/null || break
  sleep 0.1; i=$((i + 1))
done
if ! grep -q attached "$tmpdir/strace.err"; then
  kill $spid 2>/dev/null || :; wait $spid 2>/dev/null || :
  echo "SKIP part: no file opened (strace cannot attach:" \
    "$(head -n1 "$tmpdir/strace.err"))"
  exit 0
fi
req help profile counters "events 0" "events 1" reset "inject data 5" \
  "inject guard 6" "inject ref 7" "inject data 2048" "events -1" bogus \
  > "$tmpdir/replies"
[ "$(grep -c '"ok":true' "$tmpdir/replies")" = 9 ] ||
  { cat "$tmpdir/replies"; fail "verbs under strace"; }
kill -INT $spid; wait $spid || :
grep -Eq '^[0-9]+ +accept4?\(' "$tmpdir/strace.log" ||
  { cat "$tmpdir/strace.err" "$tmpdir/strace.log"; fail "strace saw nothing"; }
if grep -Ev '^[0-9]+ +(accept4?\(|<\.\.\. accept4? resumed>|\+\+\+|---)' \
     "$tmpdir/strace.log" | grep -q .; then
  cat "$tmpdir/strace.log"; fail "the control socket touched the file system"
fi
echo "ok: every verb answered without a file system call (strace)"
EOF
export tmpdir
mkdir "$tmpdir/d"
serve size=1M file="$tmpdir/d/disk" events="$tmpdir/d/events.jsonl" \
  ctl="$tmpdir/ctl.sock" -- "bash '$tmpdir/disk.sh'" ||
  fail "nothing outside the disk"
