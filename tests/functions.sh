# SPDX-License-Identifier: BSD-3-Clause
# Shell helpers for integration tests.  Sourced by tests/*.sh.
#
# Tests run the real nbdkit with the plugin under "nbdkit --run", so the
# server always stops when the client command finishes (bounded, no
# leftover processes), on a private Unix socket (-U -).
#
# The helpers use bash (arrays, local); "make check" may run the tests
# with another /bin/sh, so start again under bash if need be.
if [ -z "${BASH_VERSION:-}" ]; then
  exec bash "$0" "$@"
fi
set -e
set -u

: "${NBDKIT:=nbdkit}"
: "${PLUGIN:?PLUGIN must point at the built plugin .so}"
: "${NBDINFO:=nbdinfo}"
: "${NBDSH:=nbdsh}"
: "${NBDCOPY:=nbdcopy}"
: "${QEMU_IMG:=qemu-img}"
: "${QEMU_IO:=qemu-io}"
: "${FIO:=fio}"
: "${srcdir:=$(dirname "$0")}"
# Python in the tests imports pi_ref.py (the reference PI arithmetic).
PYTHONPATH=$(cd "$srcdir" && pwd)${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH

# Every nbdkit run is cut off after this many seconds (a hung server or
# client fails the test instead of hanging "make check").
: "${STABLEDIF_TEST_TIMEOUT:=300}"

# Skip (exit 77, automake's SKIP) unless every program named is present.
# configure sets missing programs to "no", which is never found.
requires () {
  for p in "$@"; do
    if ! command -v "$p" >/dev/null 2>&1; then
      echo "$0: SKIP: $p not found"
      exit 77
    fi
  done
}

# A private temporary directory, removed at exit.
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/stabledif-test.XXXXXX")
cleanup_hooks=""
# tool_reports DIR WHAT: print every non-empty report file in
# $tmpdir/DIR, written by WHAT, and fail if there is one.  Valgrind mode
# and sanitizer builds send the reports of nbdkit and of what it runs
# there (see run_nbdkit).
tool_reports () {
  local f bad=0
  [ -d "$tmpdir/$1" ] || return 0
  for f in "$tmpdir/$1"/*; do
    [ -s "$f" ] || continue
    echo "$0: FAIL: $2 reported errors (${f##*/}):" >&2
    cat "$f" >&2
    bad=1
  done
  return $bad
}

cleanup () {
  local bad=0
  for h in $cleanup_hooks; do "$h" || :; done
  tool_reports valgrind "valgrind (memcheck)" || bad=1
  tool_reports sanitizer "a sanitizer" || bad=1
  if [ $bad = 1 ]; then
    rm -rf "$tmpdir"
    exit 99                     # automake's ERROR, as for the unit tests
  fi
  rm -rf "$tmpdir"
}
trap cleanup EXIT

# ctl: every nbdkit a test starts makes its default control socket
# (stabledif-PID.sock) here, not in /tmp or the user's runtime directory,
# so tests never see each other's devices or leave sockets behind.
XDG_RUNTIME_DIR="$tmpdir"
export XDG_RUNTIME_DIR

# A plugin built with --enable-sanitizers links the ASan/UBSan runtimes,
# which must be loaded first: nbdkit itself is not instrumented, so it
# gets them through LD_PRELOAD.  Client programs started by --run get
# the environment without it (they are not under test).
nbdkit_preload=""
if ldd "$PLUGIN" 2>/dev/null | grep -q 'libasan'; then
  for _lib in libasan libubsan; do
    _lib_path=$(ldd "$PLUGIN" | awk -v l="$_lib" 'index($1, l) == 1 { print $3 }')
    [ -z "$_lib_path" ] || nbdkit_preload="$nbdkit_preload $_lib_path"
  done
  nbdkit_preload=${nbdkit_preload# }
  # Keeps nbdkit from hanging at exit under ASan (asan-nbdkit-shim.c).
  if [ -f "${top_builddir:-.}/tests/asan-nbdkit-shim.so" ]; then
    nbdkit_preload="$nbdkit_preload $top_builddir/tests/asan-nbdkit-shim.so"
  fi
  # nbdkit --run exits with its command's status, never the server's, so
  # a report of the server (an error in .close or .unload, say) would
  # pass unseen: every process run_nbdkit starts writes its sanitizer
  # reports to $tmpdir/sanitizer/nbdkit.PID, and any report fails the
  # test (sanitizer_reports in cleanup).  The server runs without leak
  # checks: nbdkit 1.32 skips .close for a connection still closing when
  # the --run command ends, so every test whose last client has just
  # disconnected could see that connection's handles "leak" (valgrind
  # mode checks the plugin's leaks).  The --run command's programs keep
  # them (run_cmd).
  mkdir "$tmpdir/sanitizer"
fi
# sanitizer_options VAR: the value of ASAN_OPTIONS or UBSAN_OPTIONS (VAR)
# for run_nbdkit's processes: the caller's, plus log_path.
sanitizer_options () {
  local v=$1
  echo "${!v:+${!v}:}log_path=$tmpdir/sanitizer/nbdkit"
}

# Valgrind mode ("make check-valgrind" sets STABLEDIF_VALGRIND=1, for an
# ordinary build): every nbdkit of run_nbdkit runs under memcheck, so the
# plugin is checked as nbdkit really loads it.  nbdkit --run forks the
# server into a child and exits with the --run command's status, never
# the server's, so valgrind's exit code cannot carry the verdict: every
# process writes its report to $tmpdir/valgrind/PID.log (empty unless
# memcheck found an error or a definite leak) and the test exits 99
# (ERROR) if any report is not empty (valgrind_reports in cleanup).
# Under valgrind nbdkit starts and serves many times slower: the cut-off
# is tripled.
: "${STABLEDIF_VALGRIND:=}"
: "${VALGRIND:=valgrind}"
nbdkit_valgrind=()
if [ -n "$STABLEDIF_VALGRIND" ]; then
  if [ -n "$nbdkit_preload" ]; then
    echo "$0: STABLEDIF_VALGRIND=1: not in a --enable-sanitizers build" >&2
    exit 1
  fi
  requires "$VALGRIND"
  mkdir "$tmpdir/valgrind"
  nbdkit_valgrind=("$VALGRIND" --quiet --tool=memcheck --error-exitcode=99
    --leak-check=full --show-leak-kinds=definite
    --errors-for-leak-kinds=definite --track-origins=no --keep-debuginfo=yes
    --suppressions="$srcdir/valgrind.supp"
    --log-file="$tmpdir/valgrind/%p.log")
  STABLEDIF_TEST_TIMEOUT=$((STABLEDIF_TEST_TIMEOUT * 3))
fi

# run_nbdkit ARGS...: nbdkit (with the preload above if needed, under
# valgrind in valgrind mode), cut off after $STABLEDIF_TEST_TIMEOUT
# seconds.  Use it for every nbdkit run.  "-U -" becomes a socket in the
# test's directory: nbdkit 1.32 makes a directory in /tmp for "-U -"
# (whatever TMPDIR says) before the plugin is configured, and leaves it
# behind when it exits because the configuration failed -- which tests of
# bad parameters do on purpose.
run_nbdkit () {
  local args=()
  while [ $# -gt 0 ]; do
    if [ "$1" = -U ] && [ "${2-}" = - ]; then
      args+=(-U "$(mktemp -u "$tmpdir/nbdkit.XXXXXX")")
      shift 2
    else
      args+=("$1")
      shift
    fi
  done
  set -- ${args[@]+"${args[@]}"}
  if [ -n "$nbdkit_preload" ]; then
    LD_PRELOAD="$nbdkit_preload${LD_PRELOAD:+ $LD_PRELOAD}" \
      STABLEDIF_RUN_ASAN_OPTIONS=$(sanitizer_options ASAN_OPTIONS) \
      ASAN_OPTIONS=$(sanitizer_options ASAN_OPTIONS):detect_leaks=0 \
      UBSAN_OPTIONS=$(sanitizer_options UBSAN_OPTIONS) \
      timeout -k 10 "$STABLEDIF_TEST_TIMEOUT" "$NBDKIT" "$@"
  else
    timeout -k 10 "$STABLEDIF_TEST_TIMEOUT" \
      ${nbdkit_valgrind[@]+"${nbdkit_valgrind[@]}"} "$NBDKIT" "$@"
  fi
}

# nbdkit_wrapper: write "$tmpdir/nbdkit", an nbdkit command that runs
# like run_nbdkit (the sanitizer preload, the cut-off, valgrind mode) and
# gives its --run command the environment without the preload; print its
# path.  For scripts that start nbdkit themselves: NBDKIT=$(nbdkit_wrapper).
nbdkit_wrapper () {
  local w="$tmpdir/nbdkit"
  {
    echo '#!/usr/bin/env bash'
    declare -p nbdkit_preload nbdkit_valgrind STABLEDIF_TEST_TIMEOUT tmpdir
    # Not NBDKIT: the caller exports it as this wrapper, and nbdkit must
    # pass that on to its --run command.
    echo "real_nbdkit=$(printf %q "$NBDKIT")"
    declare -f sanitizer_options
    cat <<'EOF'
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --run) args+=(--run "unset LD_PRELOAD; ASAN_OPTIONS=\${STABLEDIF_RUN_ASAN_OPTIONS-\$ASAN_OPTIONS}; $2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ -n "$nbdkit_preload" ]; then
  LD_PRELOAD="$nbdkit_preload${LD_PRELOAD:+ $LD_PRELOAD}" \
    STABLEDIF_RUN_ASAN_OPTIONS=$(sanitizer_options ASAN_OPTIONS) \
    ASAN_OPTIONS=$(sanitizer_options ASAN_OPTIONS):detect_leaks=0 \
    UBSAN_OPTIONS=$(sanitizer_options UBSAN_OPTIONS) \
    exec timeout -k 10 "$STABLEDIF_TEST_TIMEOUT" "$real_nbdkit" "${args[@]}"
fi
exec timeout -k 10 "$STABLEDIF_TEST_TIMEOUT" \
  ${nbdkit_valgrind[@]+"${nbdkit_valgrind[@]}"} "$real_nbdkit" "${args[@]}"
EOF
  } > "$w"
  chmod +x "$w"
  echo "$w"
}

# The --run command of nbdkit, without the preload and with the leak
# checks the server runs without (run_nbdkit).
run_cmd () {
  if [ -n "$nbdkit_preload" ]; then
    echo "unset LD_PRELOAD; ASAN_OPTIONS=\${STABLEDIF_RUN_ASAN_OPTIONS-\$ASAN_OPTIONS}; $*"
  else
    echo "$*"
  fi
}

# Run nbdkit with the plugin and plugin parameters, serving on a private
# Unix socket, and run the command given after "--" with $uri/$unixsocket
# set (nbdkit --run).  Example:
#   serve size=1M -- nbdinfo '$uri'
# nbdkit's own messages go to stderr; set SERVE_LOG=FILE to collect them
# in FILE instead.
serve () {
  local params=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do params+=("$1"); shift; done
  shift
  if [ -n "${SERVE_LOG:-}" ]; then
    run_nbdkit -U - --exit-with-parent "$PLUGIN" "${params[@]}" \
      --run "$(run_cmd "$*")" 2>>"$SERVE_LOG"
  else
    run_nbdkit -U - --exit-with-parent "$PLUGIN" "${params[@]}" \
      --run "$(run_cmd "$*")"
  fi
}

# serve_killable PARAMS...: the plugin with PARAMS in the background, on
# the socket $tmpdir/sock with its pid in $tmpdir/nbdkit.pid, for tests
# that kill the server.  Returns once both exist (fails the test if they
# do not within 10 s); stopped at cleanup if still running.  $bg is the
# background job.
serve_killable () {
  sock=$tmpdir/sock
  pidfile=$tmpdir/nbdkit.pid
  rm -f "$sock" "$pidfile"
  run_nbdkit -f -U "$sock" -P "$pidfile" --exit-with-parent "$PLUGIN" "$@" &
  bg=$!
  case " $cleanup_hooks " in
    *" stop_bg "*) ;;
    *) cleanup_hooks="$cleanup_hooks stop_bg" ;;
  esac
  for _ in $(seq 100); do
    [ -S "$sock" ] && [ -s "$pidfile" ] && return 0
    sleep 0.1
  done
  fail "nbdkit did not start"
}
# $bg is the shell running run_nbdkit, not nbdkit: stop nbdkit by its pid.
stop_bg () {
  if [ -s "${pidfile:-}" ]; then kill "$(cat "$pidfile")" 2>/dev/null || :; fi
  kill "$bg" 2>/dev/null || :
}

fail () {
  echo "$0: FAIL: $*" >&2
  exit 1
}

# expect_config_error PATTERN PARAMS...
# nbdkit with the plugin and PARAMS must refuse to start (exit non-zero
# without running the client) and say something matching the extended
# regular expression PATTERN (case-insensitive) on stderr.
expect_config_error () {
  local pattern=$1; shift
  local err="$tmpdir/config-error.txt"
  local ran="$tmpdir/config-error.ran"
  rm -f "$ran"
  if run_nbdkit -U - --exit-with-parent "$PLUGIN" "$@" \
       --run "$(run_cmd "touch '$ran'")" 2>"$err"; then
    fail "nbdkit started with bad parameters: $*"
  fi
  [ ! -e "$ran" ] || fail "nbdkit served a client with bad parameters: $*"
  if ! grep -Eiq -- "$pattern" "$err"; then
    cat "$err" >&2
    fail "bad parameters '$*': stderr does not match /$pattern/"
  fi
  echo "ok: $* -> $(head -n1 "$err")"
}

# nbdsh runs "python3 -m nbd": make sure the python3 it finds has the
# libnbd bindings (python3-libnbd installs them for the system python,
# which a python3 earlier in $PATH may not see).  Skips if there is none.
requires_nbdsh () {
  requires "$NBDSH"
  if python3 -c 'import nbd' >/dev/null 2>&1; then
    return 0
  fi
  if [ -x /usr/bin/python3 ] &&
       /usr/bin/python3 -c 'import nbd' >/dev/null 2>&1; then
    mkdir -p "$tmpdir/bin"
    ln -sf /usr/bin/python3 "$tmpdir/bin/python3"
    PATH="$tmpdir/bin:$PATH"
    export PATH
    return 0
  fi
  echo "$0: SKIP: no python3 with the libnbd bindings (python3-libnbd)"
  exit 77
}

# run_nbdsh SCRIPT PARAMS...
# Serve a disk with PARAMS and run the python file SCRIPT inside nbdsh,
# after the prelude below.  The script finds the socket in $sock and the
# expected profile in the environment variables FORMAT and INTERVAL (if
# set by the test).
run_nbdsh () {
  local script=$1; shift
  cat "$tmpdir/prelude.py" "$script" > "$tmpdir/run.py"
  serve "$@" -- \
    "sock=\"\$unixsocket\" $NBDSH -n -c \"exec(open('$tmpdir/run.py').read())\""
}

# The python prelude of run_nbdsh: our own PI arithmetic (on top of
# pi_ref.py, see there), connection helpers, an error checker and a
# control-socket request.
cat > "$tmpdir/prelude.py" <<'EOF'
import errno
import os
import random
import struct

import nbd

SOCK = os.environ["sock"]


from pi_ref import FORMATS, crc16_t10dif, crc64_nvme


def connect(export, strict=True, meta=None):
    """A handle on EXPORT ("", "data" or "dif") with full info."""
    h = nbd.NBD()
    h.set_export_name(export)
    h.set_full_info(True)
    if meta:
        h.add_meta_context(meta)
    if not strict:
        # Let requests libnbd would refuse itself reach the server.
        h.set_strict_mode(0)
    h.connect_unix(SOCK)
    return h


def parse_profile(line):
    """The profile line as a dict; checks the magic first token."""
    tokens = line.split(" ")
    assert tokens[0] == "stabledif/1", "bad profile magic: %r" % line
    return dict(t.split("=", 1) for t in tokens[1:])


class Disk:
    """The PI arithmetic of one device, from its dif-view profile."""

    def __init__(self, h_dif):
        prof = parse_profile(h_dif.get_export_description())
        assert prof["view"] == "dif", prof
        self.format = prof["format"]
        self.interval = int(prof["interval"])
        self.type, self.tuple = FORMATS[self.format]
        assert int(prof["tuple"]) == self.tuple, prof
        assert prof["stable_writes"] == ("1" if self.type else "0"), prof
        if "FORMAT" in os.environ:
            assert self.format == os.environ["FORMAT"], prof
        if "INTERVAL" in os.environ:
            assert self.interval == int(os.environ["INTERVAL"]), prof
        self.ext = self.interval + self.tuple
        self.nblocks = h_dif.get_size() // self.ext
        assert h_dif.get_size() == self.nblocks * self.ext
        self.ref_mask = (1 << (32 if self.tuple == 8 else 48)) - 1

    def guard(self, data):
        assert len(data) == self.interval
        if self.tuple == 8:
            return crc16_t10dif(data)
        return crc64_nvme(data)

    def tuple_bytes(self, guard, app, ref):
        if self.tuple == 8:
            return struct.pack(">HHI", guard, app, ref)
        return (guard.to_bytes(8, "big") + app.to_bytes(2, "big")
                + ref.to_bytes(6, "big"))

    def tuple_fields(self, t):
        if self.tuple == 8:
            return struct.unpack(">HHI", t)
        return (int.from_bytes(t[0:8], "big"), int.from_bytes(t[8:10], "big"),
                int.from_bytes(t[10:16], "big"))

    def ref_for(self, lba):
        """The ref tag the device checks and inserts (0 for type 3)."""
        return 0 if self.type == 3 else lba & self.ref_mask

    def escape_tuple(self):
        return b"\xff" * self.tuple

    def block(self, data, lba, app=0, guard=None, ref=None):
        """One extended block: DATA and a correct tuple for LBA, with the
        fields given overriding the correct ones."""
        if guard is None:
            guard = self.guard(data)
        if ref is None:
            ref = self.ref_for(lba)
        return data + self.tuple_bytes(guard, app, ref)

    def split(self, ext):
        """Extended blocks -> (data, [tuples])."""
        n = len(ext) // self.ext
        assert len(ext) == n * self.ext
        data = b"".join(ext[i * self.ext:i * self.ext + self.interval]
                        for i in range(n))
        tuples = [ext[i * self.ext + self.interval:(i + 1) * self.ext]
                  for i in range(n)]
        return data, tuples


def expect_error(err, fn, *args):
    """FN(*ARGS) must fail with errno ERR (one errno or a tuple)."""
    errs = err if isinstance(err, tuple) else (err,)
    try:
        fn(*args)
    except nbd.Error as e:
        if e.errnum not in errs:
            raise AssertionError("expected %s, got errno %s (%s)" % (
                "/".join(errno.errorcode[x] for x in errs),
                e.errnum, e.string))
        return e
    raise AssertionError("%s%r succeeded, expected %s" % (
        fn.__name__, args, "/".join(errno.errorcode[x] for x in errs)))


def rand_bytes(rng, n):
    return rng.randbytes(n)


def ctl(line, path=None):
    """One request LINE on the control socket PATH (default $CTL); its
    JSON reply, which must say ok."""
    import json
    import socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(path or os.environ["CTL"])
        s.sendall(line.encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(65536)
            assert chunk, "control socket closed"
            reply += chunk
    j = json.loads(reply)
    assert j["ok"] is True, (line, j)
    return j
EOF
