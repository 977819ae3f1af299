#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif-attach on the host, without touching the kernel: what it
# reads from real stabledif devices (--dry-run) and the errors a user
# meets before anything is attached.  The attaching itself is tested in
# a guest kernel by test-vm-attach.sh.
source "${srcdir:-$(dirname "$0")}/functions.sh"

attach="$top_builddir/client/stabledif-attach/stabledif-attach"
[ -x "$attach" ] || fail "$attach not built"
requires "$NBDKIT"

out="$tmpdir/out"

# expect_ok OUTPUT-FILE COMMAND...: COMMAND succeeds, output saved.
# expect_err PATTERN COMMAND...: COMMAND exits 1 and its one-line error
# on stderr matches the extended regular expression PATTERN.
expect_err () {
  local pattern=$1 rc=0; shift
  "$@" > "$out" 2> "$out.err" || rc=$?
  [ $rc = 1 ] || fail "$*: exit status $rc, expected 1 ($(cat "$out.err"))"
  grep -Eq -- "$pattern" "$out.err" ||
    fail "$*: error '$(cat "$out.err")' does not match '$pattern'"
  [ "$(wc -l < "$out.err")" = 1 ] ||
    fail "$*: more than one line of error: $(cat "$out.err")"
}
must_say () {
  grep -Fq -- "$1" "$out" || fail "output lacks '$1': $(cat "$out")"
}

# --- what --dry-run reads from real devices ---

serve size=64M ctl=none -- "'$attach' --dry-run \"nbd+unix:///data?socket=\$unixsocket\"" > "$out"
must_say "profile: stabledif/1 view=data format=T10-DIF-TYPE1-CRC interval=512 tuple=8 stable_writes=1"
must_say "size: 67108864 bytes, block size 512"
must_say "would set /sys/block/nbdN/queue/stable_writes = 1 before attaching"

# The default export "" is the data view too.
serve size=1M format=EXT-DIF-TYPE1-CRC64 interval=4096 ctl=none -- \
  "'$attach' --dry-run \"nbd+unix:///?socket=\$unixsocket\"" > "$out"
must_say "format: EXT-DIF-TYPE1-CRC64, interval 4096, tuple 16 bytes"
must_say "size: 1048576 bytes, block size 4096"
must_say "stable_writes = 1 before attaching"

serve size=1M format=none ctl=none -- \
  "'$attach' --dry-run \"nbd+unix:///data?socket=\$unixsocket\"" > "$out"
must_say "format=none"
must_say "would set /sys/block/nbdN/queue/stable_writes = 0 before attaching"

# --- servers it must refuse ---

# The dif view's extended blocks are no disk for the kernel.
serve size=1M ctl=none -- \
  "$(printf %q "$attach") --dry-run \"nbd+unix:///dif?socket=\$unixsocket\" > $out 2> $out.err; echo \$? > $out.rc" || :
[ "$(cat "$out.rc")" = 1 ] || fail "dif view: exit status $(cat "$out.rc")"
grep -q 'is the dif view (extended blocks of 520 bytes); the kernel can only attach the data view' "$out.err" ||
  fail "dif view: $(cat "$out.err")"

# Not a stabledif device: no description at all ...
expect_err 'not a stabledif device: the server sent no export description' \
  "$NBDKIT" -U - memory 1M --run "'$attach' --dry-run \"\$uri\""
# ... someone else's description ...
expect_err 'not a stabledif device: its export description is "a plain disk"' \
  "$NBDKIT" -U - --filter=exportname memory 1M 'exportdesc=fixed:a plain disk' \
  --run "'$attach' --dry-run \"\$uri\""
# ... or a broken profile (required keys missing).
expect_err 'bad stabledif profile "stabledif/1 view=data"' \
  "$NBDKIT" -U - --filter=exportname memory 1M 'exportdesc=fixed:stabledif/1 view=data' \
  --run "'$attach' --dry-run \"\$uri\""
# Nothing listening.
expect_err 'nbd\+unix:///data\?socket=.*/none\.sock: ' \
  "$attach" --dry-run "nbd+unix:///data?socket=$tmpdir/none.sock"

# --- errors before anything is touched ---

expect_err 'TLS URIs cannot be attached: the kernel.s NBD driver has no TLS' \
  "$attach" "nbds+unix:///data?socket=$tmpdir/x.sock"
expect_err "'/dev/sda' is not an NBD device \(expected /dev/nbdN\)" \
  "$attach" -n /dev/sda "nbd+unix:///data?socket=$tmpdir/x.sock"
expect_err "'nbd1x' is not an NBD device" "$attach" -d nbd1x

# Not root.  (As root, drop to nobody to see it.)
if [ "$(id -u)" = 0 ]; then
  if command -v setpriv >/dev/null; then
    expect_err '^stabledif-attach: must be run as root' \
      setpriv --reuid=65534 --regid=65534 --clear-groups \
      "$attach" "nbd+unix:///data?socket=$tmpdir/x.sock"
    expect_err '^stabledif-attach: must be run as root' \
      setpriv --reuid=65534 --regid=65534 --clear-groups "$attach" -d /dev/nbd0
  fi
else
  expect_err '^stabledif-attach: must be run as root' \
    "$attach" "nbd+unix:///data?socket=$tmpdir/x.sock"
fi

# Usage errors: exit 2 and one line on stderr saying what is wrong, in
# the tool's own words (never getopt's, nor the path it was run by);
# nothing on stdout.  --help prints the help on stdout, status 0.
usage_err () {
  local pattern=$1 rc=0; shift
  "$attach" "$@" > "$out" 2> "$out.err" || rc=$?
  [ $rc = 2 ] || fail "'$*': exit status $rc, expected 2 ($(cat "$out.err"))"
  [ ! -s "$out" ] || fail "'$*': output on stdout: $(cat "$out")"
  [ "$(wc -l < "$out.err")" = 1 ] ||
    fail "'$*': not one line of error: $(cat "$out.err")"
  grep -Eq -- "^stabledif-attach: $pattern" "$out.err" ||
    fail "'$*': error '$(cat "$out.err")' does not match '$pattern'"
}
usage_err 'no URI given; see .stabledif-attach --help.$'
usage_err '-n and --dry-run cannot be used together' -n /dev/nbd0 --dry-run nbd://x
usage_err "-d takes no URI \(got 'nbd://x'\)" -d /dev/nbd0 nbd://x
usage_err '-d and -n cannot be used together' -d /dev/nbd0 -n /dev/nbd1
usage_err '-d and --dry-run cannot be used together' -d /dev/nbd0 --dry-run
usage_err "one URI only \(got 'b' after 'a'\)" a b
usage_err "unknown option '--bogus'" --bogus nbd://x
usage_err "unknown option '-x'" -x nbd://x
usage_err "option '-n' needs an argument" -n
usage_err "option '--detach' needs an argument" --detach
usage_err "option '--dry-run=1' takes no argument" --dry-run=1 nbd://x
"$attach" --help > "$out" 2> "$out.err"
must_say "--dry-run"
[ ! -s "$out.err" ] || fail "--help: stderr: $(cat "$out.err")"
"$attach" --version > "$out"
grep -Eq '^stabledif-attach [0-9]' "$out" || fail "--version: $(cat "$out")"
