# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the bad-input matrix of NBD requests and control socket
# lines.  Run by test-bad-input.sh inside nbdsh, after the
# prelude of functions.sh (connect, Disk, expect_error, the CRCs).
#
# Every row of the tables below is one bad input and what it must get:
# the errno the client sees, the exact message nbdkit logs (or none when
# libnbd refuses the request itself), the counters and events it must
# add (and no others), or the exact JSON reply of the control socket.
# The tables: RANGE_ROWS (ranges, alignment, sizes on both views),
# PI_ROWS (bad PI written to dif), STORED_ROWS (stored corruption met
# through the data view), CTL_ROWS (control socket lines).  After every
# row the stored data (data view) and PI (dif view) of the watched
# blocks must be byte-identical to what the model says, and the error
# counters must not have moved except as the row says.
#
# Environment: CTL (control socket), LOG (nbdkit's stderr), EVENTS (the
# events= file), STABLEDIF_CTL (the stabledif-ctl program) and APP (the
# app-tag= parameter, VALUE/MASK, or empty).

import json
import re
import socket
import subprocess

CTL = os.environ["CTL"]
LOG = os.environ["LOG"]
EVENTS = os.environ["EVENTS"]
CTL_PROG = os.environ["STABLEDIF_CTL"]
APP = os.environ.get("APP", "")

rng = random.Random(7)
hd = connect("dif")                     # libnbd strict (the default)
hdata = connect("data")
loose = {"dif": connect("dif", strict=False),
         "data": connect("data", strict=False)}
strict = {"dif": hd, "data": hdata}
d = Disk(hd)
I, E, N, T = d.interval, d.ext, d.nblocks, d.tuple
if APP:
    APP_TAG, APP_MASK = (int(x, 0) for x in APP.split("/"))
else:
    APP_TAG, APP_MASK = 0, 0
MIB64 = 64 * 1024 * 1024                # libnbd's largest payload
REF_ALL = d.ref_mask                    # an all-ones ref tag

# ---- the model: what the watched blocks must hold ----------------------

# Blocks 0-31 and the last 4: every row aims at or next to them.
WATCHED = [(0, 32), (N - 4, 4)]
model = {}                              # lba -> extended block


def good_block(lba, data=None):
    if data is None:
        data = rand_bytes(rng, I)
    return d.block(data, lba, app=APP_TAG) if T else data


def fill():
    """Give every watched block valid random data and PI."""
    for first, n in WATCHED:
        ext = b"".join(good_block(first + i) for i in range(n))
        hd.pwrite(ext, first * E)
        for i in range(n):
            model[first + i] = ext[i * E:(i + 1) * E]


corrupt = set()                         # LBAs with injected faults


def check_unchanged(what):
    """The dif view (data + PI, raw) and the data view (data, verified
    by the device) of every watched block must match the model.  Blocks
    in CORRUPT are only read raw (the data view would fail them)."""
    for first, n in WATCHED:
        got = hd.pread(n * E, first * E)
        want = b"".join(model[first + i] for i in range(n))
        if got != want:
            bad = [first + i for i in range(n)
                   if got[i * E:(i + 1) * E] != want[i * E:(i + 1) * E]]
            raise AssertionError("%s: stored data/PI of LBA %s changed"
                                 % (what, bad))
        lba = first
        while lba < first + n:
            run = 0
            while lba + run < first + n and lba + run not in corrupt:
                run += 1
            if run:
                data = hdata.pread(run * I, lba * I)
                assert data == b"".join(model[lba + i][:I]
                                        for i in range(run)), \
                    "%s: data view differs from the model" % what
            lba += run + 1


# ---- the device's counters, events and log -----------------------------

ERROR_COUNTERS = ["write_errors.guard", "write_errors.app",
                  "write_errors.ref", "read_errors.guard", "read_errors.app",
                  "read_errors.ref", "writes_rejected", "reads_failed",
                  "injections", "last_seq"]


def counters_reply(j):
    """The error counters and the newest event number of a "counters"
    reply J."""
    assert j["ok"] is True, j
    c = j["counters"]
    r = {"last_seq": j["last_seq"]}
    for k in ERROR_COUNTERS[:-1]:
        v = c
        for part in k.split("."):
            v = v[part]
        r[k] = v
    return r


def counters():
    """The error counters now, asked on the control socket (the same
    reply "stabledif-ctl --json counters" prints; the end of the run
    checks that it does)."""
    return counters_reply(json.loads(counters_ctl().ask(b"counters\n")))


_counters_ctl = []


def counters_ctl():
    """A control connection kept for counters()."""
    if not _counters_ctl:
        _counters_ctl.append(Ctl())
    return _counters_ctl[0]


def counters_cli():
    """The same, through "stabledif-ctl --json counters"."""
    out = subprocess.run([CTL_PROG, "-s", CTL, "--json", "counters"],
                         check=True, capture_output=True, text=True).stdout
    return counters_reply(json.loads(out))


def expect_counters(what, before, deltas):
    after = counters()
    for k in ERROR_COUNTERS:
        want = before[k] + deltas.get(k, 0)
        assert after[k] == want, "%s: counter %s is %d, want %d" % (
            what, k, after[k], want)
    return after


log_pos = 0


def log_errors():
    """nbdkit's error lines logged since the last call."""
    global log_pos
    with open(LOG, "rb") as f:
        f.seek(log_pos)
        new = f.read()
    log_pos += len(new)
    return [line for line in new.decode("utf-8", "replace").splitlines()
            if ": error: " in line]


def expect_log(what, message):
    """Exactly one error line, ending in MESSAGE; none if MESSAGE is
    None."""
    lines = log_errors()
    if message is None:
        assert lines == [], "%s: unexpected nbdkit errors %r" % (what, lines)
        return
    assert len(lines) == 1, "%s: want one error line, got %r" % (what, lines)
    assert lines[0].endswith(": error: " + message), \
        "%s: nbdkit said\n  %s\nwant\n  %s" % (what, lines[0], message)


def events_lines():
    with open(EVENTS) as f:
        return [json.loads(line) for line in f]


# ---- control socket connections ----------------------------------------

class Ctl:
    """One connection to the control socket."""

    def __init__(self):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(30)
        self.s.connect(CTL)
        self.buf = b""

    def send(self, raw):
        self.s.sendall(raw)

    def reply(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise AssertionError("control socket closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def ask(self, raw):
        self.send(raw)
        return self.reply()

    def closed(self):
        """Whether the server closed the connection (after our EOF)."""
        return self.buf == b"" and self.s.recv(1) == b""


def events_since(seq):
    c = Ctl()
    r = json.loads(c.ask(b"events %d\n" % seq))
    c.s.close()
    assert r["ok"] is True, r
    return r["events"]


# ---- NBD requests on the views: ranges, alignment, size ----------------
#
# name, views, strict, op, offset, count, errno, nbdkit's message (None:
# libnbd refuses the request before sending it), formats.
# Offsets and counts are expressions in
#   B  the view's block (interval on data, interval + tuple on dif)
#   S  the view's size in bytes   I, E  interval, extended block
#   M  64 MiB (libnbd's largest payload)
# Messages are formats over {op} {off} {cnt} {B} {I} {T} and {cmd} (the
# NBD command name).  "formats": "pi" = formats with PI, "all" = every.

OOR = ("invalid request: {cmd}: offset and count are out of range: "
       "offset={off} count={cnt}")
MISALIGNED = ("dif view {op}: offset {off} and count {cnt} must be "
              "multiples of the extended block size {B} (interval {I} + "
              "tuple {T})")
RANGE_ROWS = [
    # beyond the end, as nbdkit answers (libnbd strict mode off)
    ("read past end",        "data dif", False, "read",  "S-B", "2*B",
     errno.EINVAL, OOR, "all"),
    ("read at end",          "data dif", False, "read",  "S",   "B",
     errno.EINVAL, OOR, "all"),
    ("write past end",       "data dif", False, "write", "S-B", "2*B",
     errno.ENOSPC, OOR, "all"),
    ("trim past end",        "data dif", False, "trim",  "S-B", "2*B",
     errno.EINVAL, OOR, "all"),
    ("zero past end",        "data dif", False, "zero",  "S-B", "2*B",
     errno.ENOSPC, OOR, "all"),
    ("read offset+len wraps", "data dif", False, "read", "2**64-B", "B",
     errno.EINVAL, OOR, "all"),
    ("write offset+len wraps", "data dif", False, "write", "2**64-B", "B",
     errno.ENOSPC, OOR, "all"),
    ("zero offset+len wraps", "data dif", False, "zero", "2**64-B", "B",
     errno.ENOSPC, OOR, "all"),
    ("trim offset+len wraps", "data dif", False, "trim", "2**64-B", "B",
     errno.EINVAL, OOR, "all"),
    # zero length, as nbdkit answers
    ("read 0 bytes",         "data dif", False, "read",  "0", "0",
     errno.EINVAL, OOR, "all"),
    ("write 0 bytes",        "data dif", False, "write", "0", "0",
     errno.ENOSPC, OOR, "all"),
    ("trim 0 bytes",         "data dif", False, "trim",  "0", "0",
     errno.EINVAL, OOR, "all"),
    ("zero 0 bytes",         "data dif", False, "zero",  "0", "0",
     errno.ENOSPC, OOR, "all"),
    # the same refused by libnbd itself (strict mode, the default)
    ("read past end (libnbd)",  "data dif", True, "read",  "S-B", "2*B",
     errno.EINVAL, None, "all"),
    ("write past end (libnbd)", "data dif", True, "write", "S-B", "2*B",
     errno.ENOSPC, None, "all"),
    ("trim past end (libnbd)",  "data dif", True, "trim",  "S-B", "2*B",
     errno.ENOSPC, None, "all"),
    ("zero past end (libnbd)",  "data dif", True, "zero",  "S-B", "2*B",
     errno.ENOSPC, None, "all"),
    ("write 0 bytes (libnbd)",  "data dif", True, "write", "0", "0",
     errno.EINVAL, None, "all"),
    # larger than any NBD payload: libnbd refuses, strict or not
    ("read > 64 MiB",  "data dif", False, "read",  "0", "(M//B+1)*B",
     errno.ERANGE, None, "all"),
    ("write > 64 MiB", "data dif", False, "write", "0", "(M//B+1)*B",
     errno.ERANGE, None, "all"),
    # dif view: whole extended blocks only (EINVAL from the plugin)
    ("dif read offset not aligned",  "dif", False, "read",  "1", "E",
     errno.EINVAL, MISALIGNED, "all"),
    ("dif write offset not aligned", "dif", False, "write", "E+I", "E",
     errno.EINVAL, MISALIGNED, "pi"),
    ("dif write count not aligned",  "dif", False, "write", "E", "I",
     errno.EINVAL, MISALIGNED, "pi"),
    ("dif write count +1",           "dif", False, "write", "E", "E+1",
     errno.EINVAL, MISALIGNED, "all"),
    ("dif trim not aligned",         "dif", False, "trim",  "E", "I",
     errno.EINVAL, MISALIGNED, "pi"),
    ("dif zero not aligned",         "dif", False, "zero",  "2", "E",
     errno.EINVAL, MISALIGNED, "all"),
    ("dif write aligned to 512 only", "dif", False, "write", "512", "2*E",
     errno.EINVAL, MISALIGNED, "pi"),
]

NBD_CMD = {"read": "NBD_CMD_READ", "write": "NBD_CMD_WRITE",
           "trim": "NBD_CMD_TRIM", "zero": "NBD_CMD_WRITE_ZEROES"}


def run_range_row(row):
    name, views, is_strict, op, off_e, cnt_e, err, msg, formats = row
    if formats == "pi" and T == 0:
        return
    for view in views.split():
        h = (strict if is_strict else loose)[view]
        B = E if view == "dif" else I
        env = {"B": B, "S": h.get_size(), "I": I, "E": E, "M": MIB64}
        off, cnt = eval(off_e, env), eval(cnt_e, env)
        what = "%s on %s (offset %d count %d)" % (name, view, off, cnt)
        before = counters()
        if op == "read":
            e = expect_error(err, h.pread, cnt, off)
        elif op == "write":
            # Valid PI where the request is whole blocks, so only the
            # range or alignment can be at fault.
            buf = b"".join(good_block(off // B + i)
                           for i in range(cnt // B)) \
                if view == "dif" and cnt <= 16 * B else b""
            buf = (buf + bytes(cnt))[:cnt]
            e = expect_error(err, h.pwrite, buf, off)
        elif op == "trim":
            e = expect_error(err, h.trim, cnt, off)
        else:
            e = expect_error(err, h.zero, cnt, off)
        expect_log(what, msg and msg.format(
            op=op, off=off, cnt=cnt, B=B, I=I, T=T, cmd=NBD_CMD[op]))
        expect_counters(what, before, {})
        check_unchanged(what)
        expect_counters(what + " (read back)", before, {})
        print("ok: %s -> %s: %s" % (what, errno.errorcode[e.errnum],
                                    e.string))


# ---- bad PI on dif writes ----------------------------------------------
#
# name, first LBA, blocks, tampering {block index: kind}, and per format
# family the blocks that must fail, with the check each fails: the family
# is the PI type, with "a" added when app-tag= is set ("1a", "3a"); a
# family not listed takes the entry of its type without "a".  An empty
# list means every block passes and the write must be stored (the model
# follows); any failing block rejects the whole request with EIO and
# stores nothing.
#
# Tampering kinds:
#   guard      guard ^ 1
#   guard+app  guard ^ 1 and a wrong app tag (the guard is checked first)
#   app        an app tag that differs in a bit the mask checks
#   app-out    an app tag that differs only in bits the mask ignores
#   ref        ref ^ 1
#   esc-app    app 0xffff, the correct ref tag, guard ^ 1
#   esc-all    app 0xffff, ref all ones, guard ^ 1
#   esc-good   app 0xffff, the correct ref tag, correct guard
PI_ROWS = [
    ("bad guard",              5, 1, {0: "guard"},
     {"1": [(0, "guard")], "2": [(0, "guard")], "3": [(0, "guard")]}),
    ("bad app tag",            6, 1, {0: "app"},
     {"1": [], "1a": [(0, "app")], "2": [], "2a": [(0, "app")], "3": [],
      "3a": [(0, "app")]}),
    ("app tag outside mask",   7, 1, {0: "app-out"},
     {"1": [], "2": [], "3": []}),
    ("bad ref tag",            8, 1, {0: "ref"},
     {"1": [(0, "ref")], "2": [(0, "ref")], "3": []}),
    ("bad ref, last block",    N - 1, 1, {0: "ref"},
     {"1": [(0, "ref")], "2": [(0, "ref")], "3": []}),
    ("app escape, bad guard",  9, 1, {0: "esc-app"},
     {"1": [], "2": [], "3": [(0, "guard")]}),
    ("full escape, bad guard", 10, 1, {0: "esc-all"},
     {"1": [], "2": [], "3": []}),
    ("app escape, good guard", 11, 1, {0: "esc-good"},
     {"1": [], "2": [], "3": [], "3a": [(0, "app")]}),
    ("bad guard and app",      12, 1, {0: "guard+app"},
     {"1": [(0, "guard")], "2": [(0, "guard")], "3": [(0, "guard")]}),
    ("one bad block of five",  13, 5, {2: "guard"},
     {"1": [(2, "guard")], "2": [(2, "guard")], "3": [(2, "guard")]}),
    ("bad guard and ref of five", 18, 5, {1: "guard", 3: "ref"},
     {"1": [(1, "guard"), (3, "ref")], "2": [(1, "guard"), (3, "ref")],
      "3": [(1, "guard")]}),
    ("bad ref in the last of four", N - 4, 4, {3: "ref"},
     {"1": [(3, "ref")], "2": [(3, "ref")], "3": []}),
]


def family():
    return str(d.type) + ("a" if APP else "")


def tamper(lba, kind):
    """An extended block for LBA with the PI tampered as KIND, and the
    (check, expected, actual) it fails with if it is checked."""
    data = rand_bytes(rng, I)
    g = d.guard(data)
    ref = d.ref_for(lba)
    app = APP_TAG
    if kind == "guard":
        return d.block(data, lba, app=app, guard=g ^ 1), ("guard", g, g ^ 1)
    if kind == "guard+app":
        bad = app ^ ((APP_MASK & -APP_MASK) or 1)
        return (d.block(data, lba, app=bad, guard=g ^ 1),
                ("guard", g, g ^ 1))
    if kind == "app":
        bad = app ^ ((APP_MASK & -APP_MASK) or 1)
        return d.block(data, lba, app=bad), ("app", APP_TAG, bad)
    if kind == "app-out":
        ignored = ~APP_MASK & 0xFFFF
        bad = app ^ ((ignored & -ignored) if APP else 1)
        return d.block(data, lba, app=bad), None
    if kind == "ref":
        return (d.block(data, lba, app=app, ref=ref ^ 1),
                ("ref", ref, ref ^ 1))
    if kind == "esc-app":
        return (d.block(data, lba, app=0xFFFF, guard=g ^ 1),
                ("guard", g, g ^ 1))
    if kind == "esc-all":
        return (d.block(data, lba, app=0xFFFF, ref=REF_ALL, guard=g ^ 1),
                ("guard", g, g ^ 1))
    if kind == "esc-good":
        return d.block(data, lba, app=0xFFFF), ("app", APP_TAG, 0xFFFF)
    raise AssertionError("unknown tampering " + kind)


def run_pi_row(row):
    name, first, n, tampered, fails = row
    fam = family()
    fails = fails.get(fam, fails.get(fam[0]))
    blocks, how = [], {}
    for i in range(n):
        if i in tampered:
            blk, how[i] = tamper(first + i, tampered[i])
        else:
            blk = good_block(first + i)
        blocks.append(blk)
    failing = []
    for i, check in fails:
        assert how[i][0] == check, (name, how[i], check)
        failing.append((first + i,) + how[i])
    buf = b"".join(blocks)
    off, cnt = first * E, n * E
    what = "%s (LBA %d-%d, %s)" % (name, first, first + n - 1, family())
    before = counters()
    nevents = len(events_lines())
    if not failing:
        hd.pwrite(buf, off)
        for i in range(n):
            model[first + i] = blocks[i]
        expect_log(what, None)
        expect_counters(what, before, {})
        check_unchanged(what)
        print("ok: %s -> accepted and stored" % what)
        return
    e = expect_error(errno.EIO, hd.pwrite, buf, off)
    lba, chk, want, got = failing[0]
    expect_log(what, "dif view write rejected: LBA %d fails the %s check: "
               "expected 0x%x, found 0x%x (%d of %d blocks failed; offset %d "
               "count %d); nothing was stored"
               % (lba, chk, want, got, len(failing), n, off, cnt))
    deltas = {"writes_rejected": 1, "last_seq": len(failing)}
    for f in failing:
        deltas["write_errors." + f[1]] = deltas.get("write_errors." + f[1],
                                                    0) + 1
    after = expect_counters(what, before, deltas)
    # One event per failing block, in LBA order, in the ring and the file.
    evs = events_since(before["last_seq"])
    assert [(ev["lba"], ev["check"], int(ev["expected"], 16),
             int(ev["actual"], 16)) for ev in evs] == \
        [f for f in failing], (what, evs, failing)
    for ev in evs:
        assert (ev["view"], ev["op"], ev["offset"], ev["length"]) == \
            ("dif", "write", off, cnt), (what, ev)
    assert len(events_lines()) == nevents + len(failing), what
    check_unchanged(what)
    expect_counters(what + " (read back)", after, {})
    print("ok: %s -> %s: %s" % (what, errno.errorcode[e.errnum],
                                e.string))


# ---- stored corruption met through the data view ----------------------
#
# name, fault injected first (kind, LBA) or None, op on the data view,
# first LBA, offset into it and count (expressions in I), the LBA and
# check that must fail, how many blocks the request touches, and the
# counters: read_errors.<check> always, reads_failed for reads.
# Requests touching a corrupted block fail with EIO and store nothing,
# not even the blocks of the request that are fine; a trim that covers
# only part of a block is advisory and does nothing.

STORED_ROWS = [
    ("read a block with a bad stored guard", ("guard", 24), "read",
     24, "0", "I", (24, "guard"), 1),
    ("read across it", None, "read", 23, "0", "2*I", (24, "guard"), 2),
    ("write part of it", None, "write", 24, "100", "50", (24, "guard"), 1),
    ("write a good block and part of it", None, "write", 23, "0", "I+10",
     (24, "guard"), 2),
    ("zero part of it", None, "zero", 24, "8", "8", (24, "guard"), 1),
    ("trim part of it", None, "trim", 24, "8", "8", None, 1),
    ("read a block with bad stored data", ("data", 25), "read",
     25, "0", "I", (25, "guard"), 1),
    ("read a block with a bad stored app tag", ("app", 26), "read",
     26, "0", "I", (26, "app"), 1),
    ("read a block with a bad stored ref tag", ("ref", 27), "read",
     27, "0", "I", (27, "ref"), 1),
]

def inject(kind, lba):
    """Inject a fault with stabledif-ctl; the stored block must differ
    from the model in exactly the part KIND names."""
    subprocess.run([CTL_PROG, "-s", CTL, "inject", kind, str(lba)],
                   check=True, capture_output=True)
    got = hd.pread(E, lba * E)
    old = model[lba]
    g0, a0, r0 = d.tuple_fields(old[I:])
    g1, a1, r1 = d.tuple_fields(got[I:])
    changed = [name for name, x, y in (("data", old[:I], got[:I]),
                                       ("guard", g0, g1), ("app", a0, a1),
                                       ("ref", r0, r1)) if x != y]
    assert changed == [kind], (kind, lba, changed)
    model[lba] = got
    corrupt.add(lba)


def run_stored_row(row):
    name, fault, op, first, off_e, cnt_e, fails, nblocks = row
    if fault and fault[0] == "app" and not APP:
        return
    if fault and fault[0] == "ref" and d.type == 3:
        return
    env = {"I": I}
    off = first * I + eval(off_e, env)
    cnt = eval(cnt_e, env)
    what = "%s (offset %d count %d)" % (name, off, cnt)
    if fault:
        before = counters()
        inject(*fault)
        expect_counters("inject " + what, before, {"injections": 1})
    before = counters()
    if fails is None:
        getattr(hdata, op)(cnt, off)
        expect_log(what, None)
        expect_counters(what, before, {})
        check_unchanged(what)
        print("ok: %s -> nothing done" % what)
        return
    lba, check = fails
    stored = model[lba]
    g, a, r = d.tuple_fields(stored[I:])
    want, got = {"guard": (d.guard(stored[:I]), g), "app": (APP_TAG, a),
                 "ref": (d.ref_for(lba), r)}[check]
    failure = ("stored LBA %d fails the %s check: expected 0x%x, found 0x%x "
               "(1 of %d blocks failed; offset %d count %d)"
               % (lba, check, want, got, nblocks, off, cnt))
    if op == "read":
        e = expect_error(errno.EIO, hdata.pread, cnt, off)
        message = "data view read: " + failure
        deltas = {"reads_failed": 1}
    else:
        if op == "write":
            e = expect_error(errno.EIO, hdata.pwrite,
                             rand_bytes(rng, cnt), off)
        else:
            e = expect_error(errno.EIO, hdata.zero, cnt, off)
        message = ("data view %s: cannot merge a partial block: %s; "
                   "nothing was stored" % (op, failure))
        deltas = {}
    expect_log(what, message)
    deltas.update({"read_errors." + check: 1, "last_seq": 1})
    after = expect_counters(what, before, deltas)
    (ev,) = events_since(before["last_seq"])
    assert (ev["view"], ev["op"], ev["lba"], ev["check"], ev["offset"],
            ev["length"]) == ("data", op, lba, check, off, cnt), (what, ev)
    check_unchanged(what)
    expect_counters(what + " (read back)", after, {})
    print("ok: %s -> %s: %s" % (what, errno.errorcode[e.errnum], e.string))


def heal():
    """Give the corrupted blocks good PI again."""
    for lba in sorted(corrupt):
        model[lba] = good_block(lba)
        hd.pwrite(model[lba], lba * E)
    corrupt.clear()
    check_unchanged("healed")


# ---- control socket lines ----------------------------------------------
#
# name, bytes sent, exact reply line ({nb} = the number of blocks,
# {last} = the last LBA, {fmt} = the format name), formats ("all", "pi",
# "none", "noapp" = PI without app-tag=, "t3" = Type 3).

VERBS = "(verbs: profile, counters, events, reset, inject, help)"
CTL_ROWS = [
    ("garbage", b"%$#@! garbage\n",
     '{"ok":false,"error":"unknown verb \'%$#@!\' ' + VERBS + '"}', "all"),
    ("empty line", b"\n",
     '{"ok":false,"error":"empty request (try \'help\')"}', "all"),
    ("blanks only", b" \t \r\n",
     '{"ok":false,"error":"empty request (try \'help\')"}', "all"),
    ("over-long line", b"x" * 5000 + b"\n",
     '{"ok":false,"error":"request line longer than 4096 bytes; the rest '
     'of the line is ignored"}', "all"),
    ("unknown verb", b"frobnicate 1\n",
     '{"ok":false,"error":"unknown verb \'frobnicate\' ' + VERBS + '"}',
     "all"),
    ("verb in capitals", b"PROFILE\n",
     '{"ok":false,"error":"unknown verb \'PROFILE\' ' + VERBS + '"}', "all"),
    ("binary bytes", b"\xff\xfe\x01\x7f\n",
     '{"ok":false,"error":"unknown verb \'\\\\xff\\\\xfe\\\\x01\\\\x7f\' '
     + VERBS + '"}', "all"),
    ("NUL byte", b"profile\x00\n",
     '{"ok":false,"error":"request contains a NUL byte"}', "all"),
    ("quote in verb", b"it's\n",
     '{"ok":false,"error":"unknown verb \'it\\\\x27s\' ' + VERBS + '"}',
     "all"),
    ("extra argument", b"profile now\n",
     '{"ok":false,"error":"profile: too many arguments (usage: profile)"}',
     "all"),
    ("extra arguments to reset", b"reset all now\n",
     '{"ok":false,"error":"reset: too many arguments (usage: reset)"}',
     "all"),
    ("inject: extra argument", b"inject guard 1 2\n",
     '{"ok":false,"error":"inject: too many arguments (usage: inject '
     'data|guard|app|ref LBA)"}', "all"),
    ("inject: many arguments", b"inject guard 1 2 3 4 5\n",
     '{"ok":false,"error":"inject: too many arguments (usage: inject '
     'data|guard|app|ref LBA)"}', "all"),
    ("inject: no LBA", b"inject guard\n",
     '{"ok":false,"error":"inject: missing arguments (usage: inject '
     'data|guard|app|ref LBA)"}', "all"),
    ("inject: bad kind", b"inject bits 1\n",
     '{"ok":false,"error":"inject: unknown kind \'bits\' (kinds: data, '
     'guard, app, ref)"}', "all"),
    ("inject: negative LBA", b"inject guard -1\n",
     '{"ok":false,"error":"inject: bad LBA \'-1\': not a number"}', "all"),
    ("inject: LBA not a number", b"inject guard ten\n",
     '{"ok":false,"error":"inject: bad LBA \'ten\': not a number"}', "all"),
    ("inject: LBA with suffix", b"inject guard 1k\n",
     '{"ok":false,"error":"inject: bad LBA \'1k\': not a number"}', "all"),
    ("inject: bare 0x", b"inject guard 0x\n",
     '{"ok":false,"error":"inject: bad LBA \'0x\': not a number"}', "all"),
    ("inject: LBA beyond 2^64", b"inject guard 99999999999999999999\n",
     '{"ok":false,"error":"inject: bad LBA \'99999999999999999999\': too '
     'large"}', "all"),
    ("inject: LBA = blocks", b"inject guard {nb}\n",
     '{"ok":false,"error":"inject: LBA {nb} out of range (the disk has {nb} '
     'blocks, 0 to {last})"}', "all"),
    ("inject: LBA 2^64-1", b"inject data 0xffffffffffffffff\n",
     '{"ok":false,"error":"inject: LBA 18446744073709551615 out of range '
     '(the disk has {nb} blocks, 0 to {last})"}', "all"),
    ("inject on format none", b"inject guard 1\n",
     '{"ok":false,"error":"inject: format none has no protection '
     'information to corrupt"}', "none"),
    ("inject app without app-tag=", b"inject app 1\n",
     '{"ok":false,"error":"inject app: the app tag is not checked on this '
     'device (start it with app-tag=)"}', "noapp"),
    ("inject ref on Type 3", b"inject ref 1\n",
     '{"ok":false,"error":"inject ref: format {fmt} does not check the ref '
     'tag"}', "t3"),
    ("events: bad SINCE", b"events -5\n",
     '{"ok":false,"error":"events: bad SINCE \'-5\': not a number (want a '
     'sequence number, 0 for all)"}', "all"),
    ("events: extra argument", b"events 1 2\n",
     '{"ok":false,"error":"events: too many arguments (usage: events '
     '[SINCE])"}', "all"),
]


def ctl_applies(formats):
    return (formats == "all" or (formats == "pi" and T > 0)
            or (formats == "none" and T == 0)
            or (formats == "noapp" and T > 0 and not APP)
            or (formats == "t3" and d.type == 3))


def run_ctl_row(c, row):
    name, raw, want, formats = row
    if not ctl_applies(formats):
        return
    subst = {"{nb}": str(N), "{last}": str(N - 1), "{fmt}": d.format}
    for k, v in subst.items():
        raw = raw.replace(k.encode(), v.encode())
        want = want.replace(k, v)
    before = counters()
    got = c.ask(raw)
    assert got == want, "ctl %s: got\n  %s\nwant\n  %s" % (name, got, want)
    # The same connection still works.
    prof = json.loads(c.ask(b"profile\n"))
    assert prof["ok"] is True and prof["nblocks"] == N, (name, prof)
    expect_log("ctl " + name, None)
    expect_counters("ctl " + name, before, {})
    check_unchanged("ctl " + name)
    print("ok: ctl %s -> %s" % (name, got))


def run_ctl_eof_rows():
    """Lines cut off by the end of input are still answered, then the
    server closes the connection."""
    for raw, want in [
            (b"profile", None),
            (b"bogus", '{"ok":false,"error":"unknown verb \'bogus\' '
             + VERBS + '"}'),
            (b"inject guard", '{"ok":false,"error":"inject: missing '
             'arguments (usage: inject data|guard|app|ref LBA)"}')]:
        before = counters()
        c = Ctl()
        c.send(raw)
        c.s.shutdown(socket.SHUT_WR)
        got = c.reply()
        if want is None:
            assert json.loads(got)["ok"] is True, got
        else:
            assert got == want, "ctl %r then EOF: got %s" % (raw, got)
        assert c.closed(), "ctl %r then EOF: connection left open" % raw
        c.s.close()
        expect_counters("ctl EOF", before, {})
        check_unchanged("ctl %r then EOF" % raw)
        print("ok: ctl %r then EOF -> %s" % (raw, got))


# ---- run the matrix ----------------------------------------------------

print("format %s interval %d tuple %d blocks %d app-tag %s" % (
    d.format, I, T, N, APP or "-"))
fill()
log_errors()                            # skip nbdkit's start-up lines
check_unchanged("fill")
for row in RANGE_ROWS:
    run_range_row(row)
if T > 0:
    for row in PI_ROWS:
        run_pi_row(row)
    for row in STORED_ROWS:
        run_stored_row(row)
    heal()
ctl = Ctl()
for row in CTL_ROWS:
    run_ctl_row(ctl, row)
ctl.s.close()
run_ctl_eof_rows()
# stabledif-ctl reports the counters the socket does, and they add up
# to what the rows caused.
final = counters()
assert counters_cli() == final, (counters_cli(), final)
assert final["writes_rejected"] == sum(
    1 for r in PI_ROWS if r[4].get(family(), r[4].get(family()[0]))) \
    if T else final["writes_rejected"] == 0, final
# Nothing of the above may have disturbed the connections used.
for h in list(strict.values()) + list(loose.values()):
    assert h.aio_is_ready(), "an NBD connection did not survive"
check_unchanged("end")
print("ok: matrix done")
