#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the bad-input matrix.  Every kind of bad input
# with the exact error it gets, and nothing stored changes:
#
#  1. plugin parameters: nbdkit must exit 1 before serving anything,
#     with exactly the message of the table below, and leave existing
#     disk files byte-identical;
#  2. NBD requests on both views and control socket lines, for every PI
#     family (test-bad-input.py: its tables, run once per device below,
#     with log-limit=none: every rejected request has its line);
#  3. libstabledif calls with bad arguments (test-bad-input-lib.c).
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

: "${top_builddir:=..}"
STABLEDIF_CTL=$top_builddir/client/stabledif-ctl/stabledif-ctl
[ -x "$STABLEDIF_CTL" ] || fail "$STABLEDIF_CTL not built"
export STABLEDIF_CTL

# ---- 1. plugin parameters ----------------------------------------------

# One row per line: the exact message after "nbdkit: error: ", a tab,
# then the parameters.  @D@ stands for a scratch directory, in which
# "disk" is an existing 1M Type 1 disk (disk + disk.pi), "lone.pi" a PI
# file without its data file, "small" a 5-byte file and "dir" a
# directory; @SP@ stands for a space inside a parameter.
params_table () {
  cat <<'EOF'
size: must not be 0	size=0
size: must be a multiple of the interval (512), 1000 is not	size=1000
size: must be a multiple of the interval (4096), 1048064 is not	size=1048064 format=EXT-DIF-TYPE1-CRC64
size: '1x' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=1x
size: '-1' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=-1
size: 'abc' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=abc
size: '' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=
size: '1MB' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=1MB
size: '0x10' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=0x10
size: ' 1M' is not a size (want a number of bytes with an optional suffix: b, s (512-byte sectors), K, M, G, T, P or E)	size=@SP@1M
size: 8E is too large (want at most 2^63-1 bytes)	size=8E
size: 99999999999999999999 is too large (want at most 2^63-1 bytes)	size=99999999999999999999
size: 9223372036854775296 is too large (the dif view would exceed 2^63-1 bytes)	size=9223372036854775296
format: unknown PI format 'T10-DIF-TYPE4-CRC' (known: none,T10-DIF-TYPE1-CRC,T10-DIF-TYPE2-CRC,T10-DIF-TYPE3-CRC,EXT-DIF-TYPE1-CRC64,EXT-DIF-TYPE3-CRC64)	format=T10-DIF-TYPE4-CRC
format: unknown PI format 't10-dif-type1-crc' (known: none,T10-DIF-TYPE1-CRC,T10-DIF-TYPE2-CRC,T10-DIF-TYPE3-CRC,EXT-DIF-TYPE1-CRC64,EXT-DIF-TYPE3-CRC64)	format=t10-dif-type1-crc
format: unknown PI format '' (known: none,T10-DIF-TYPE1-CRC,T10-DIF-TYPE2-CRC,T10-DIF-TYPE3-CRC,EXT-DIF-TYPE1-CRC64,EXT-DIF-TYPE3-CRC64)	format=
interval: must be 512 or 4096 (not 1000)	interval=1000
interval: must be 512 or 4096 (not 0)	interval=0
interval: negative numbers are not allowed	interval=-512
format: EXT-DIF-TYPE1-CRC64 needs interval=4096	format=EXT-DIF-TYPE1-CRC64 interval=512
format: EXT-DIF-TYPE3-CRC64 needs interval=4096	format=EXT-DIF-TYPE3-CRC64 interval=512
app-tag: 0x10000 is out of range (want a 16-bit number, 0 to 0xffff)	app-tag=0x10000
app-tag: 0x12345 is out of range (want a 16-bit number, 0 to 0xffff)	app-tag=0x12345
app-tag: 65536 is out of range (want a 16-bit number, 0 to 0xffff)	app-tag=65536
app-tag: 99999999999999999999999 is out of range (want a 16-bit number, 0 to 0xffff)	app-tag=99999999999999999999999
app-tag: '0x' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=0x
app-tag: 'abc' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=abc
app-tag: '-1' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=-1
app-tag: '12ab' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=12ab
app-tag: expected VALUE[/MASK], got ''	app-tag=
app-tag: expected VALUE[/MASK], got '/0xff'	app-tag=/0xff
app-tag mask: 'x' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=5/x
app-tag mask: '' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=5/
app-tag mask: '2/3' is not a number (want a 16-bit number, decimal or 0x hex)	app-tag=1/2/3
app-tag mask: 0x10000 is out of range (want a 16-bit number, 0 to 0xffff)	app-tag=0x1234/0x10000
app-tag: mask 0 would check no bits of the app tag	app-tag=0x1234/0
app-tag: 0xffff is the escape value (blocks carrying it are never checked)	app-tag=0xffff
app-tag: format none has no app tag	format=none app-tag=5
unknown parameter 'bogus' (see nbdkit stabledif --help)	bogus=1
unknown parameter 'Size' (see nbdkit stabledif --help)	Size=1M
file: empty path (want file=PATH)	file=
file=@D@/dir: opening @D@/dir: Is a directory	file=@D@/dir size=1M
file=@D@/nodir/disk: opening @D@/nodir/disk: No such file or directory	file=@D@/nodir/disk size=1M
file=@D@/lone: @D@/lone.pi exists but the data file @D@/lone does not; restore it, or remove @D@/lone.pi to start a new disk	file=@D@/lone size=1M
file=@D@/small: @D@/small exists (5 bytes) without @D@/small.pi, and size=1M does not match it; give size=5 to use it as a disk (its blocks read unchecked until written), or choose another file	file=@D@/small size=1M
file=@D@/disk: existing geometry size=1M format=T10-DIF-TYPE1-CRC interval=512 (recorded in @D@/disk.pi) does not match size=2M format=T10-DIF-TYPE1-CRC interval=512 (size differs); give the recorded parameters, or remove @D@/disk and @D@/disk.pi to start a new disk	file=@D@/disk size=2M
file=@D@/disk: existing geometry size=1M format=T10-DIF-TYPE1-CRC interval=512 (recorded in @D@/disk.pi) does not match size=1M format=T10-DIF-TYPE3-CRC interval=512 (format differs); give the recorded parameters, or remove @D@/disk and @D@/disk.pi to start a new disk	file=@D@/disk size=1M format=T10-DIF-TYPE3-CRC
file=@D@/disk: existing geometry size=1M format=T10-DIF-TYPE1-CRC interval=512 (recorded in @D@/disk.pi) does not match size=1M format=T10-DIF-TYPE1-CRC interval=4096 (interval differs); give the recorded parameters, or remove @D@/disk and @D@/disk.pi to start a new disk	file=@D@/disk size=1M interval=4096
events: empty path (want events=PATH)	events=
events=@D@/dir: Is a directory	events=@D@/dir
events=@D@/nodir/events: No such file or directory	events=@D@/nodir/events
ctl: empty path (want ctl=PATH)	ctl=
ctl=@D@/nodir/sock: directory @D@/nodir: No such file or directory	ctl=@D@/nodir/sock
log-limit: 'x' is not a limit (want N/SECONDS, such as 10/5, or none)	log-limit=x
log-limit: '5' is not a limit (want N/SECONDS, such as 10/5, or none)	log-limit=5
log-limit: '/5' is not a limit (want N/SECONDS, such as 10/5, or none)	log-limit=/5
log-limit: SECONDS must be at least 1 (or log-limit=none to log every PI failure)	log-limit=5/0
log-limit N: negative numbers are not allowed	log-limit=-1/5
EOF
}

D=$tmpdir/params
mkdir -p "$D/dir"
echo "junk" > "$D/small"
echo "lonely" > "$D/lone.pi"
# An existing disk with something on it.
serve file="$D/disk" size=1M ctl=none -- \
  "$NBDSH -u \"\$uri\" -c 'h.pwrite(b\"stabledif\" * 1000, 4096)'" ||
  fail "cannot make the file disk"
sums () { (cd "$D" && sha256sum disk disk.pi small lone.pi); }
sums_before=$(sums)

n=0
while IFS=$'\t' read -r message params; do
  message=${message//@D@/$D}
  params=${params//@D@/$D}
  read -r -a args <<< "$params"
  args=("${args[@]//@SP@/ }")
  err=$tmpdir/params.err
  ran=$tmpdir/params.ran
  rm -f "$ran"
  set +e
  run_nbdkit -U - --exit-with-parent "$PLUGIN" "${args[@]}" \
    --run "$(run_cmd "touch '$ran'")" 2>"$err"
  status=$?
  set -e
  [ "$status" -eq 1 ] ||
    { cat "$err" >&2; fail "$params: exit status $status, want 1"; }
  [ ! -e "$ran" ] || fail "$params: nbdkit served a client"
  grep -qFx -- "nbdkit: error: $message" "$err" ||
    { cat "$err" >&2; fail "$params: want exactly 'nbdkit: error: $message'"; }
  # Reported once: one error line.
  [ "$(grep -c 'error:' "$err")" -eq 1 ] ||
    { cat "$err" >&2; fail "$params: more than one error line"; }
  [ "$(sums)" = "$sums_before" ] || fail "$params: a disk file changed"
  echo "ok: $params -> $message"
  n=$((n + 1))
done < <(params_table)
[ "$n" -ge 40 ] || fail "only $n parameter rows ran"
[ ! -e "$D/nodir" ] && [ ! -e "$D/dir/disk" ] ||
  fail "a refused parameter created a file"

# ---- 2. NBD requests and control socket lines, per device --------------

matrix () {
  local app=$1; shift
  local log=$tmpdir/matrix.log out=$tmpdir/matrix.out
  : > "$log"
  rm -f "$tmpdir/events.jsonl"
  export CTL=$tmpdir/ctl.sock LOG=$log EVENTS=$tmpdir/events.jsonl APP=$app
  if ! SERVE_LOG=$log run_nbdsh "$srcdir/test-bad-input.py" \
       ctl="$CTL" events="$EVENTS" log-limit=none "$@" > "$out"; then
    cat "$out" "$log" >&2
    fail "matrix $*${app:+ (app-tag $app)}"
  fi
  cat "$out"
  grep -q '^ok: matrix done$' "$out" || fail "matrix $*: did not finish"
}

matrix 0x1200/0xff00 size=16M format=T10-DIF-TYPE1-CRC app-tag=0x1200/0xff00
matrix ""     size=16M format=T10-DIF-TYPE1-CRC
matrix ""     size=16M format=T10-DIF-TYPE2-CRC
matrix 0x1234/0xffff size=16M format=T10-DIF-TYPE2-CRC app-tag=0x1234
matrix ""     size=16M format=T10-DIF-TYPE3-CRC
matrix 0x0042/0xffff size=16M format=T10-DIF-TYPE3-CRC app-tag=0x42
matrix ""     size=64M format=EXT-DIF-TYPE1-CRC64
matrix 0x0042/0x00ff size=64M format=EXT-DIF-TYPE3-CRC64 app-tag=0x42/0xff
matrix ""     size=64M format=EXT-DIF-TYPE3-CRC64
matrix ""     size=16M format=none
matrix ""     size=16M format=T10-DIF-TYPE1-CRC interval=4096 file="$tmpdir/f"

# ---- 3. libstabledif -----------------------------------------------------

serve size=1M ctl=none -- ./test-bad-input-lib '$uri' ||
  fail "test-bad-input-lib"
