#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the control socket of the real plugin under abuse, while the
# device serves NBD.
#
# Threads throw garbage, over-long lines, partial lines, NUL bytes and
# non-UTF-8 at the socket, open 50 connections at once, and vanish in
# the middle of requests, while the main thread writes and verifies data
# on both views.  Every bad request gets a JSON error on a connection
# that stays usable, every good one its reply; afterwards the NBD data is
# intact, the counters add up, and the socket still answers.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh

cat > "$tmpdir/robust.py" <<'PY'
import json
import socket
import threading
import time

CTL = os.environ["CTL"]
errors = []                     # failures seen by the threads


def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)            # also bounds a connect to a full backlog
    for _ in range(6000):
        try:
            s.connect(CTL)
            return s
        except BlockingIOError:  # backlog full: the server is busy
            time.sleep(0.01)
    raise AssertionError("cannot connect to %s" % CTL)


def read_replies(s, n, buf=b""):
    """N reply lines from S, parsed."""
    out = []
    while len(out) < n:
        while b"\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise AssertionError("closed after %d of %d replies" %
                                     (len(out), n))
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        out.append(json.loads(line))
    return out, buf


def guarded(fn):
    def run(*args):
        try:
            fn(*args)
        except BaseException as e:          # reported by the main thread
            errors.append("%s: %r" % (fn.__name__, e))
    return run


@guarded
def garbage(seed):
    rng = random.Random(seed)
    s = conn()
    for _ in range(20):
        lines = []
        for _ in range(10):
            n = rng.randrange(1, 200)
            lines.append(bytes(rng.choice(b"abc \t\r\x00\xff\x80{}\"\\01")
                               for _ in range(n)))
        s.sendall(b"\n".join(lines) + b"\nhelp\n")
        replies, rest = read_replies(s, 11)
        assert rest == b""
        for r in replies[:10]:
            assert r["ok"] is False and r["error"], r
        assert replies[10]["ok"] is True, replies[10]
    s.close()


@guarded
def long_lines(seed):
    s = conn()
    for n in (4097, 10000, 1 << 20):
        s.sendall(b"x" * n + b"\ncounters\n")
        (err, ok), rest = read_replies(s, 2)
        assert err["ok"] is False and "longer than" in err["error"], err
        assert ok["ok"] is True and "counters" in ok, ok
    s.close()


@guarded
def partial_lines(seed):
    s = conn()
    req = b"events 0\nprofile\n"
    for i in range(len(req)):
        s.sendall(req[i:i + 1])
        time.sleep(0.001)
    (ev, prof), _ = read_replies(s, 2)
    assert "events" in ev and "views" in prof, (ev, prof)
    s.close()


@guarded
def many_clients(seed):
    socks = [conn() for _ in range(50)]
    for i, s in enumerate(socks):
        s.sendall(b"counters\nhe" if i % 2 else b"profile\nhe")
    for s in socks:
        s.sendall(b"lp\n")
    for i, s in enumerate(socks):
        (a, b), _ = read_replies(s, 2)
        assert ("counters" in a) if i % 2 else ("views" in a), a
        assert b["ok"] is True and "verbs" in b, b
    for s in socks:
        s.close()


@guarded
def vanishing(seed):
    for i in range(100):
        s = conn()
        if i % 3 == 1:
            s.sendall(b"events 0\nprofile\ncoun")   # close mid-request
        elif i % 3 == 2:
            s.sendall(b"events")
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                         struct.pack("ii", 1, 0))  # reset
        s.close()


# The NBD side: writes and reads on both views while the threads run.
hd = connect("dif")
hdata = connect("data")
d = Disk(hd)
I, E = d.interval, d.ext
rng = random.Random(3)

threads = [threading.Thread(target=f, args=(k,))
           for k, f in enumerate([garbage, garbage, long_lines,
                                  partial_lines, many_clients, vanishing,
                                  vanishing])]
for t in threads:
    t.start()

expected = {}
rounds = 0
while any(t.is_alive() for t in threads) or rounds < 50:
    lba = rng.randrange(0, d.nblocks - 8)
    if rounds % 2:
        data = rand_bytes(rng, 8 * I)
        hdata.pwrite(data, lba * I)
    else:
        blocks = [rand_bytes(rng, I) for _ in range(8)]
        hd.pwrite(b"".join(d.block(blocks[i], lba + i) for i in range(8)),
                  lba * E)
        data = b"".join(blocks)
    for i in range(8):
        expected[lba + i] = data[i * I:(i + 1) * I]
    assert hdata.pread(8 * I, lba * I) == data
    rounds += 1
    assert rounds < 100000, "threads never finished"
for t in threads:
    t.join(120)
    assert not t.is_alive(), "a control socket client hung"
assert not errors, errors

# Everything written is still there, PI intact (reads verify it).
for lba, data in sorted(expected.items()):
    assert hdata.pread(I, lba * I) == data, lba
print("ok: %d NBD rounds during the abuse, %d blocks verified after" %
      (rounds, len(expected)))

# The socket still answers, and its counters saw no PI failures.
s = conn()
s.sendall(b"counters\n")
(r,), _ = read_replies(s, 1)
cnt = r["counters"]
assert cnt["writes_rejected"] == 0 and cnt["reads_failed"] == 0, cnt
assert cnt["requests"]["data"]["write"] + cnt["requests"]["dif"]["write"] \
    == rounds, (cnt, rounds)
print("ok: control socket answers after the abuse")
PY

export CTL="$tmpdir/ctl.sock"
SERVE_LOG="$tmpdir/nbdkit.log" \
  run_nbdsh "$tmpdir/robust.py" size=4M ctl="$CTL" ||
  { cat "$tmpdir/nbdkit.log" >&2; fail "robustness checks"; }
[ ! -e "$CTL" ] || fail "control socket left behind"
