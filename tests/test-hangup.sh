#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: a client that hangs up with requests in flight never takes
# the disk down.
#
# One nbdkit serves the plugin for the whole test.  A block is made to
# fail its guard check (stabledif-ctl inject guard LBA), then:
#
#  (a) 20 rounds of nbdcopy (its default settings: several connections,
#      many requests each) copying the data view to null: -- it fails
#      with EIO on the read that covers the block and exits with its
#      other requests in flight;
#  (b) 20 rounds of a libnbd client that issues 16 reads across the
#      block, then 16 reads of 2 MiB elsewhere whose replies it never
#      reads, waits until the device has counted the 16 failures, and
#      kills itself with SIGKILL: nbdkit is still sending the large
#      replies when the socket goes away.
#
# After every round the same nbdkit process must be alive; at the end it
# still serves, and the device's counters and events account for every
# failed read: one per nbdcopy round, 16 per killed client, all of them
# guard failures of that one block on the data view.  nbdkit before
# 1.33.10 aborts here ("raw_send_socket: Assertion 'sock >= 0' failed"):
# within the first few nbdcopy rounds, and without those in the first
# killed-client round.  bootstrap installs a newer nbdkit.
. "${srcdir:-$(dirname "$0")}/functions.sh"
requires_nbdsh
requires "$NBDCOPY"

CTLBIN="$top_builddir/client/stabledif-ctl/stabledif-ctl"
ctl="$tmpdir/ctl.sock"
events="$tmpdir/events.jsonl"

# nbdkit's log (every failed read, every reply it could not send) goes
# to a file, shown if the test fails.
log="$tmpdir/nbdkit.log"
serve_killable 8M ctl="$ctl" events="$events" 2>"$log"
pid=$(cat "$pidfile")
echo "nbdkit $("$NBDKIT" --version | awk '{ print $2 }'), pid $pid"

cat > "$tmpdir/hangup.py" <<'PY'
# After functions.sh's prelude (ctl() is there).
import json
import signal
import subprocess
import time
import traceback

CTL, EVENTS, PID = (os.environ[v] for v in ("CTL", "EVENTS", "NBDKIT_PID"))
CTLBIN, NBDCOPY = os.environ["CTLBIN"], os.environ["NBDCOPY"]
ROUNDS = 20
INTERVAL = 512
SIZE = 8 << 20
LBA = 5000                      # the block that fails, 2.4 MiB in
BAD_READS = 16                  # reads across LBA per killed client
BIG_READS = 16                  # 2 MiB reads whose replies are never read
BIG = 2 << 20
URI = "nbd+unix:///data?socket=" + SOCK


def failed():
    """The device's failed read requests and guard failures on read."""
    c = ctl("counters")["counters"]
    return c["reads_failed"], c["read_errors"]["guard"]


def alive(what):
    """The nbdkit of the test still runs (not a zombie)."""
    try:
        with open("/proc/%s/stat" % PID) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state not in ("gone", "Z", "X"), \
        "nbdkit (pid %s) died: %s" % (PID, what)


def inject():
    """stabledif-ctl makes LBA fail its guard check (again)."""
    subprocess.run([CTLBIN, "-s", CTL, "inject", "guard", str(LBA)],
                   check=True, stdout=subprocess.DEVNULL)


# Every block written, so that nbdcopy reads the whole disk.
h = nbd.NBD()
h.connect_uri(URI)
for off in range(0, SIZE, 1 << 20):
    h.pwrite(os.urandom(1 << 20), off)
h.shutdown()
expected = 0

# (a) nbdcopy: one failed read per round.
for r in range(ROUNDS):
    inject()
    p = subprocess.run([NBDCOPY, URI, "null:"], stderr=subprocess.PIPE,
                       text=True, timeout=120)
    assert p.returncode != 0, "nbdcopy read across a bad block and succeeded"
    assert "Input/output error" in p.stderr, p.stderr
    alive("nbdcopy round %d" % (r + 1))
    expected += 1
    assert failed() == (expected, expected), (r + 1, failed(), expected)
print("ok: %d rounds of nbdcopy failing with EIO" % ROUNDS)


def killed_client():
    """In a child: BAD_READS reads across LBA, BIG_READS large reads
    elsewhere, wait until the device counted the bad ones, SIGKILL."""
    before = failed()[0]
    h = nbd.NBD()
    h.connect_uri(URI)
    base = LBA * INTERVAL
    for i in range(BAD_READS):
        h.aio_pread(nbd.Buffer(4096), base - 512 * (i % 8))
    for i in range(BIG_READS):
        h.aio_pread(nbd.Buffer(BIG), (4 << 20) + (i % 2) * BIG)
    for _ in range(3000):
        if failed()[0] >= before + BAD_READS:
            break
        time.sleep(0.01)
    os.kill(os.getpid(), signal.SIGKILL)


# (b) killed clients: BAD_READS failed reads per round.
for r in range(ROUNDS):
    inject()
    child = os.fork()
    if child == 0:
        try:
            killed_client()
        except BaseException:
            traceback.print_exc()
        os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, \
        "the client did not die by SIGKILL (status %#x)" % status
    alive("killed client round %d" % (r + 1))
    expected += BAD_READS
    assert failed() == (expected, expected), (r + 1, failed(), expected)
print("ok: %d clients killed with %d requests in flight"
      % (ROUNDS, BAD_READS + BIG_READS))

# The same nbdkit still serves: good blocks read, the bad one fails.
h = nbd.NBD()
h.connect_uri(URI)
h.pread(1 << 20, 0)
try:
    h.pread(INTERVAL, LBA * INTERVAL)
    raise AssertionError("the injected block read back")
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
h.shutdown()
expected += 1
alive("the last reads")
assert failed() == (expected, expected), (failed(), expected)

# Every failure is an event: a guard failure of LBA on the data view.
c = ctl("counters")
assert c["counters"]["injections"] == 2 * ROUNDS, c
with open(EVENTS) as f:
    evs = [json.loads(l) for l in f]
assert len(evs) == expected, (len(evs), expected)
for ev in evs:
    assert (ev["lba"], ev["check"], ev["op"], ev["view"]) == \
        (LBA, "guard", "read", "data"), ev
conns = {}
for ev in evs:
    conns[ev["conn"]] = conns.get(ev["conn"], 0) + 1
assert sorted(conns.values()).count(BAD_READS) == ROUNDS, conns
print("ok: pid %s alive; %d failed reads, each counted once and an event"
      % (PID, expected))
PY

cat "$tmpdir/prelude.py" "$tmpdir/hangup.py" > "$tmpdir/run.py"
status=0
sock=$sock CTL=$ctl EVENTS=$events NBDKIT_PID=$pid CTLBIN=$CTLBIN \
  NBDCOPY=$NBDCOPY timeout 600 python3 "$tmpdir/run.py" || status=$?
if ! kill -0 "$pid" 2>/dev/null; then
  # The end of the log, without the replies nbdkit could not send.
  echo "$0: the end of nbdkit's log:" >&2
  grep -vE 'Broken pipe|Bad file descriptor|Connection reset' "$log" |
    tail -n 10 >&2
  fail "nbdkit (pid $pid) died when a client hung up"
fi
[ $status = 0 ] || fail "the hang-up rounds failed (status $status)"
