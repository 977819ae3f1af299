#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the control socket of the real plugin, driven by nbdsh.
#
# The socket is a mode-0600 socket at ctl=PATH while nbdkit runs and is
# gone afterwards.  Counters move as they should for writes and reads on
# both views, for a rejected dif write (bad guard, bad ref) and for reads
# of injected blocks (EIO on data; on dif the data comes back and the
# client's own guard check sees the corruption).  Events carry the
# connection, view, op, LBA, check and the expected/actual values (checked
# against the test's own CRC), and events=PATH has the same events as
# JSON lines.  Failures are attributed to their connection.  reset zeroes
# counters and events, numbering continues.  ctl=none makes no socket;
# the default path is under $XDG_RUNTIME_DIR; a ctl= path holding a
# regular file or a symlink is refused and left alone.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

cat > "$tmpdir/ctl.py" <<'PY'
import json
import socket
import stat

CTL = os.environ["CTL"]
EVENTS = os.environ["EVENTS"]


class Ctl:
    """One connection to the control socket."""

    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(60)
        self.s.connect(CTL)
        self.buf = b""

    def ask(self, line):
        self.s.sendall(line.encode() + b"\n")
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            assert chunk, "control socket closed"
            self.buf += chunk
        reply, self.buf = self.buf.split(b"\n", 1)
        return json.loads(reply)

    def ok(self, line):
        r = self.ask(line)
        assert r["ok"] is True, (line, r)
        return r

    def counters(self):
        return self.ok("counters")["counters"]


# The socket file: a socket, mode 0600, ours.
st = os.lstat(CTL)
assert stat.S_ISSOCK(st.st_mode), oct(st.st_mode)
assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
assert st.st_uid == os.geteuid()
print("ok: %s is a socket, mode 0600" % CTL)

c = Ctl()
hd = connect("dif", strict=False)
hdata = connect("data", strict=False)
d = Disk(hd)
I, E, T = d.interval, d.ext, d.tuple

# profile: both views, as their export descriptions say.
p = c.ok("profile")
assert p["views"]["dif"]["profile"] == hd.get_export_description(), p
assert p["views"]["data"]["profile"] == hdata.get_export_description(), p
assert p["stable_writes"] is True and p["size"] == hdata.get_size(), p
assert p["views"]["dif"]["size"] == hd.get_size(), p
assert p["views"]["dif"]["format"] == d.format, p
assert p["views"]["dif"]["tuple"] == T and p["views"]["dif"]["interval"] == I
print("ok: profile matches the export descriptions")

z = c.counters()
for view in ("data", "dif"):
    for op in ("read", "write", "trim", "zero", "flush"):
        assert z["requests"][view][op] == 0, (view, op, z)
assert z["writes_rejected"] == 0 and z["reads_failed"] == 0, z


def delta(before, after, *path):
    a, b = after, before
    for k in path:
        a, b = a[k], b[k]
    return a - b


# data view write + read: requests, bytes, blocks generated and verified.
rng = random.Random(5)
before = c.counters()
buf = rand_bytes(rng, 8 * I)
hdata.pwrite(buf, 16 * I)
assert hdata.pread(8 * I, 16 * I) == buf
hdata.flush()
after = c.counters()
assert delta(before, after, "requests", "data", "write") == 1
assert delta(before, after, "bytes", "data", "write") == 8 * I
assert delta(before, after, "requests", "data", "read") == 1
assert delta(before, after, "bytes", "data", "read") == 8 * I
assert delta(before, after, "requests", "data", "flush") == 1
assert delta(before, after, "blocks", "generated") == 8
assert delta(before, after, "blocks", "verified") == 8
assert delta(before, after, "requests", "dif", "write") == 0
print("ok: data write/read/flush counted")

# dif view: a good write (4 blocks) and a read.
before = c.counters()
payload = [rand_bytes(rng, I) for _ in range(4)]
ext = b"".join(d.block(payload[i], 32 + i) for i in range(4))
hd.pwrite(ext, 32 * E)
assert hd.pread(4 * E, 32 * E) == ext
after = c.counters()
assert delta(before, after, "requests", "dif", "write") == 1
assert delta(before, after, "bytes", "dif", "write") == 4 * E
assert delta(before, after, "requests", "dif", "read") == 1
assert delta(before, after, "bytes", "dif", "read") == 4 * E
assert delta(before, after, "blocks", "verified") == 4
assert delta(before, after, "writes_rejected") == 0
print("ok: dif write/read counted")

# A rejected dif write: blocks 40..43, block 42 with a bad guard.  Nothing
# is stored; one rejection, one guard error, one event with the values.
stored = hd.pread(4 * E, 40 * E)
blocks = [rand_bytes(rng, I) for _ in range(4)]
good_guard = d.guard(blocks[2])
bad_guard = good_guard ^ 0x0101
ext = b"".join(d.block(blocks[i], 40 + i,
                       guard=(bad_guard if i == 2 else None))
               for i in range(4))
before = c.counters()
last = c.ok("counters")["last_seq"]
expect_error(errno.EIO, hd.pwrite, ext, 40 * E)
assert hd.pread(4 * E, 40 * E) == stored, "rejected write stored something"
after = c.counters()
assert delta(before, after, "writes_rejected") == 1
assert delta(before, after, "write_errors", "guard") == 1
assert delta(before, after, "write_errors", "ref") == 0
assert delta(before, after, "requests", "dif", "write") == 1
r = c.ok("events %d" % last)
assert len(r["events"]) == 1, r
ev = r["events"][0]
assert ev["seq"] == last + 1 and r["next"] == last + 1, r
assert ev["view"] == "dif" and ev["op"] == "write", ev
assert ev["lba"] == 42 and ev["check"] == "guard", ev
assert int(ev["expected"], 16) == good_guard, (ev, hex(good_guard))
assert int(ev["actual"], 16) == bad_guard, (ev, hex(bad_guard))
assert ev["offset"] == 40 * E and ev["length"] == 4 * E, ev
assert ev["conn"] >= 1, ev
dif_conn = ev["conn"]
print("ok: rejected dif write: event %s" % json.dumps(ev))

# A wrong ref tag (Type 1): a ref error, expected = the LBA.
ext = d.block(blocks[0], 50, ref=7)
before = c.counters()
expect_error(errno.EIO, hd.pwrite, ext, 50 * E)
after = c.counters()
assert delta(before, after, "write_errors", "ref") == 1
assert delta(before, after, "writes_rejected") == 1
ev = c.ok("events %d" % (last + 1))["events"][0]
assert ev["check"] == "ref" and ev["lba"] == 50, ev
assert int(ev["expected"], 16) == 50 and int(ev["actual"], 16) == 7, ev
print("ok: bad ref tag counted")

# Inject into a written block, then read it on data: EIO, counted,
# recorded with the connection of the data handle.
before = c.counters()
seq0 = c.ok("counters")["last_seq"]
r = c.ok("inject data 17")
assert r["kind"] == "data" and r["lba"] == 17, r
expect_error(errno.EIO, hdata.pread, I, 17 * I)
# A read that merely covers the block fails too.
expect_error(errno.EIO, hdata.pread, 4 * I, 15 * I)
assert hdata.pread(I, 16 * I) == buf[:I], "a neighbour changed"
after = c.counters()
assert delta(before, after, "injections") == 1
assert delta(before, after, "reads_failed") == 2
assert delta(before, after, "read_errors", "guard") == 2
r = c.ok("events %d" % seq0)
assert len(r["events"]) == 2, r
for ev in r["events"]:
    assert ev["view"] == "data" and ev["op"] == "read", ev
    assert ev["lba"] == 17 and ev["check"] == "guard", ev
    assert ev["expected"] != ev["actual"], ev
    assert ev["conn"] != dif_conn, ev
data_conn = r["events"][0]["conn"]
assert r["events"][0]["offset"] == 17 * I and r["events"][1]["offset"] == 15 * I

# The same block on dif: the device returns it (no EIO), and our own
# guard check finds that the data no longer matches its guard.
data, tuples = d.split(hd.pread(E, 17 * E))
g, app, ref = d.tuple_fields(tuples[0])
assert d.guard(data) != g, "injected block passes the client's guard check"
assert data[1:] == buf[I + 1:2 * I] and data[0] == buf[I] ^ 1
assert ref == 17
print("ok: injected data: EIO on data, guard mismatch seen on dif")

# inject guard and ref: the matching check fails on read.
for kind, lba in (("guard", 18), ("ref", 19)):
    before = c.counters()
    c.ok("inject %s %d" % (kind, lba))
    expect_error(errno.EIO, hdata.pread, I, lba * I)
    after = c.counters()
    assert delta(before, after, "read_errors", kind) == 1, (kind, after)
    data, tuples = d.split(hd.pread(E, lba * E))
    g, app, ref = d.tuple_fields(tuples[0])
    if kind == "guard":
        assert g != d.guard(data) and ref == lba
    else:
        assert g == d.guard(data) and ref != lba
print("ok: inject guard/ref")

# Errors are JSON and leave the connection usable.
assert "out of range" in c.ask("inject data %d" % d.nblocks)["error"]
assert "unknown verb" in c.ask("format none")["error"]
assert "too many" in c.ask("reset now")["error"]
assert c.ok("help")["verbs"]

# Per-connection attribution: failures of two connections.
fb = {e["conn"]: e for e in c.ok("counters")["failures_by_conn"]}
assert fb[dif_conn]["write_errors"] == 2, fb
assert fb[data_conn]["read_errors"] >= 2, fb
print("ok: failures by connection %s" % json.dumps(list(fb.values())))

# events=PATH holds every event so far, as JSON lines, in order.
ring = c.ok("events 0")["events"]
with open(EVENTS) as f:
    lines = [json.loads(l) for l in f]
assert lines == ring, (lines, ring)
print("ok: events file has %d events, same as the ring" % len(lines))

# reset: counters and events gone, numbering continues, nothing else
# changed (the profile, the data, the injected corruption).
last = c.ok("counters")["last_seq"]
c.ok("reset")
z = c.ok("counters")
assert z["last_seq"] == last and z["failures_by_conn"] == [], z
assert all(v == 0 for v in z["counters"]["write_errors"].values())
assert z["counters"]["requests"]["data"]["write"] == 0
assert c.ok("events 0")["events"] == []
assert c.ok("profile") == p
expect_error(errno.EIO, hdata.pread, I, 17 * I)
r = c.ok("events 0")
assert len(r["events"]) == 1 and r["events"][0]["seq"] == last + 1, r
print("ok: reset")

# stable_writes is still on, as the devices's description says.
assert parse_profile(hd.get_export_description())["stable_writes"] == "1"
print("ok: all control socket checks passed")
PY

export CTL="$tmpdir/ctl.sock" EVENTS="$tmpdir/events.jsonl"
SERVE_LOG="$tmpdir/nbdkit.log" \
  run_nbdsh "$tmpdir/ctl.py" size=1M ctl="$CTL" events="$EVENTS" ||
  { cat "$tmpdir/nbdkit.log" >&2; fail "control socket checks"; }

# The socket is gone once nbdkit has exited; nbdkit announced it.
[ ! -e "$CTL" ] || fail "control socket $CTL left behind"
grep -qF "nbdkit: stabledif: control socket: $CTL" "$tmpdir/nbdkit.log" ||
  { cat "$tmpdir/nbdkit.log" >&2; fail "control socket not announced"; }
[ "$(wc -l < "$EVENTS")" -eq 7 ] || fail "events file: wanted 7 lines"
echo "ok: socket removed on exit, path announced"

# ctl=none: no socket anywhere; default: under $XDG_RUNTIME_DIR.
mkdir -m 700 "$tmpdir/xdg"
XDG_RUNTIME_DIR="$tmpdir/xdg" serve size=1M ctl=none -- \
  "test -z \"\$(ls '$tmpdir/xdg')\"" || fail "ctl=none made a socket"
XDG_RUNTIME_DIR="$tmpdir/xdg" SERVE_LOG="$tmpdir/default.log" \
  serve size=1M -- "ls '$tmpdir/xdg' > '$tmpdir/xdg.ls'"
grep -qxE 'stabledif-[0-9]+\.sock' "$tmpdir/xdg.ls" ||
  { cat "$tmpdir/xdg.ls"; fail "no default socket in \$XDG_RUNTIME_DIR"; }
grep -qE "control socket: $tmpdir/xdg/stabledif-[0-9]+\.sock" \
  "$tmpdir/default.log" || fail "default path not announced"
[ -z "$(ls "$tmpdir/xdg")" ] || fail "default socket left behind"
echo "ok: ctl=none and the default path"

# A ctl= path that is a regular file or a symlink is refused, untouched.
echo keep > "$tmpdir/file"
expect_config_error "not a socket" size=1M ctl="$tmpdir/file"
[ "$(cat "$tmpdir/file")" = keep ] || fail "ctl= overwrote a file"
ln -s "$tmpdir/file" "$tmpdir/link"
expect_config_error "not a socket" size=1M ctl="$tmpdir/link"
[ -L "$tmpdir/link" ] && [ "$(cat "$tmpdir/file")" = keep ] ||
  fail "ctl= replaced a symlink"
# (Not under the sanitizers: nbdkit with libasan preloaded hangs in its
# exit handlers after any error message that includes strerror -- nbdkit's
# own file plugin too -- so the run would only end at the timeout.)
if [ -z "$nbdkit_preload" ]; then
  expect_config_error "ctl=.*directory .*No such file" size=1M \
    ctl="$tmpdir/no/such/dir/s.sock"
fi
echo "ok: bad ctl= paths refused"

# nbdkit failing after the plugin made its control socket (nbdkit's own
# NBD socket path is taken: by a regular file, by a live socket) leaves
# no control socket behind, at ctl=PATH or at the default path.
# (Not under the sanitizers, for the reason above: nbdkit's message
# includes strerror.)
if [ -z "$nbdkit_preload" ]; then
  echo taken > "$tmpdir/taken"
  live=$tmpdir/live.sock
  python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(1)
time.sleep(60)
' "$live" & live_pid=$!
  for _ in $(seq 100); do [ -S "$live" ] && break; sleep 0.1; done
  mkdir -m 700 "$tmpdir/xdg2"
  for nbd in "$tmpdir/taken" "$live"; do
    for ctl in "ctl=$tmpdir/stale.sock" ""; do
      if XDG_RUNTIME_DIR="$tmpdir/xdg2" run_nbdkit -f -U "$nbd" \
           --exit-with-parent "$PLUGIN" size=1M $ctl 2> "$tmpdir/stale.err"
      then
        fail "nbdkit started on a taken socket path $nbd"
      fi
      grep -q "$nbd: Address already in use" "$tmpdir/stale.err" &&
        grep -q "control socket: " "$tmpdir/stale.err" ||
        { cat "$tmpdir/stale.err"; fail "-U $nbd $ctl: messages"; }
      [ ! -e "$tmpdir/stale.sock" ] && [ -z "$(ls "$tmpdir/xdg2")" ] ||
        fail "-U $nbd ${ctl:-(default ctl)}: control socket left behind"
    done
  done
  kill $live_pid 2>/dev/null || :
  wait $live_pid 2>/dev/null || :
  [ "$(cat "$tmpdir/taken")" = taken ] || fail "the taken path was changed"
  echo "ok: no control socket left behind when nbdkit fails to start"
fi
