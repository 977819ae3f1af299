# SPDX-License-Identifier: BSD-3-Clause
# stabledif: concurrent overlapping writes on both views, then a full scan.
# Run by test-stress-*.sh through run_nbdsh (functions.sh prelude: connect,
# Disk, CRCs).  Environment: WRITERS (connections writing, half on each
# view; default 8), OPS (requests per writer), SEED, SCAN_ONLY=1 (skip the
# load, only scan: after a restart).
#
# While the writers run, two readers read random ranges of both views:
# every read of the data view must succeed (the device verifies the PI of
# what it returns), and every block read from the dif view must carry PI
# that matches its data, or be escaped with all-zero data.  Afterwards the
# whole disk is scanned the same way, and no block may hold data of a dif
# write the device rejected.
import threading
import time

WRITERS = int(os.environ.get("WRITERS", "8"))
OPS = int(os.environ.get("OPS", "150"))
SEED = int(os.environ.get("SEED", "1"))

h0 = connect("dif")
d = Disk(h0)
I, E, N = d.interval, d.ext, d.nblocks
assert d.tuple > 0, "the stress test needs a format with PI"
HOT = min(N, max(64, (256 * 1024) // I))    # most requests land here
MARK = b"REJECTED-WRITE!!"                  # data of writes meant to fail
failures = []
flock = threading.Lock()
counts = {"writes": 0, "rejected": 0, "zeros": 0, "trims": 0, "flushes": 0,
          "reads": 0}


def record(msg):
    with flock:
        failures.append(msg)


def count(what, n=1):
    with flock:
        counts[what] += n


def pick(rng, maxn):
    """A block range: mostly in the hot region, so requests overlap."""
    n = rng.randrange(1, maxn + 1)
    top = HOT if rng.random() < 0.85 else N
    return rng.randrange(0, top - n + 1), n


def check_dif_blocks(buf, lba, where):
    """Every extended block in BUF (the first at LBA) is consistent."""
    for i in range(len(buf) // E):
        blk = buf[i * E:(i + 1) * E]
        data, t = blk[:I], blk[I:]
        if data.startswith(MARK):
            record("%s: LBA %d holds data of a rejected write" % (
                where, lba + i))
        if t == d.escape_tuple():
            if data != bytes(I):
                record("%s: LBA %d is escaped but its data is not zero" % (
                    where, lba + i))
            continue
        g, app, ref = d.tuple_fields(t)
        if g != d.guard(data):
            record("%s: LBA %d guard 0x%x does not match its data (0x%x)" % (
                where, lba + i, g, d.guard(data)))
        if d.type != 3 and ref != d.ref_for(lba + i):
            record("%s: LBA %d ref %d" % (where, lba + i, ref))


def data_writer(w):
    rng = random.Random(SEED * 1000 + w)
    h = connect("data")
    for k in range(OPS):
        r = rng.random()
        lba, n = pick(rng, 4)
        # Unaligned ranges: partial intervals are read-modify-write.
        off = lba * I + rng.randrange(0, I)
        ln = min(rng.randrange(1, n * I + 1), N * I - off)
        fua = nbd.CMD_FLAG_FUA if rng.random() < 0.1 else 0
        try:
            if r < 0.75:
                h.pwrite(rng.randbytes(ln), off, fua)
                count("writes")
            elif r < 0.85:
                h.zero(ln, off, fua)
                count("zeros")
            elif r < 0.93:
                h.trim(n * I, lba * I, fua)
                count("trims")
            else:
                h.flush()
                count("flushes")
        except nbd.Error as e:
            record("data writer %d op %d: %s" % (w, k, e.string))
    h.shutdown()


def dif_writer(w):
    rng = random.Random(SEED * 1000 + w)
    h = connect("dif")
    for k in range(OPS):
        r = rng.random()
        lba, n = pick(rng, 8)
        fua = nbd.CMD_FLAG_FUA if rng.random() < 0.1 else 0
        try:
            if r < 0.65:
                ext = b"".join(d.block(rng.randbytes(I), lba + i,
                                       app=rng.randrange(0, 0xffff))
                               for i in range(n))
                h.pwrite(ext, lba * E, fua)
                count("writes")
            elif r < 0.8:
                # One bad guard among good blocks: nothing may be stored.
                bad = rng.randrange(n)
                blocks = []
                for i in range(n):
                    data = MARK + rng.randbytes(I - len(MARK))
                    g = d.guard(data) ^ (1 if i == bad else 0)
                    blocks.append(d.block(data, lba + i, guard=g))
                expect_error(errno.EIO, h.pwrite, b"".join(blocks), lba * E,
                             fua)
                count("rejected")
            elif r < 0.88:
                h.zero(n * E, lba * E, fua)
                count("zeros")
            elif r < 0.94:
                h.trim(n * E, lba * E)
                count("trims")
            else:
                h.flush()
                count("flushes")
        except (nbd.Error, AssertionError) as e:
            record("dif writer %d op %d: %s" % (w, k, e))
    h.shutdown()


def reader(w, stop):
    rng = random.Random(SEED * 1000 + 500 + w)
    hdata = connect("data")
    hdif = connect("dif")
    for k in range(100000):         # bounded; normally ends with the writers
        if stop.is_set():
            break
        lba, n = pick(rng, 8)
        try:
            hdata.pread(n * I, lba * I)
            check_dif_blocks(hdif.pread(n * E, lba * E), lba,
                             "concurrent read")
            count("reads")
        except nbd.Error as e:
            record("reader %d: read of LBA %d+%d failed: %s" % (
                w, lba, n, e.string))
    hdata.shutdown()
    hdif.shutdown()


def scan():
    """The whole disk: data view reads (device-verified), dif view checks."""
    hdata = connect("data")
    chunk = 256
    for lba in range(0, N, chunk):
        n = min(chunk, N - lba)
        try:
            hdata.pread(n * I, lba * I)
        except nbd.Error as e:
            record("scan: data view read of LBA %d+%d failed: %s" % (
                lba, n, e.string))
        check_dif_blocks(h0.pread(n * E, lba * E), lba, "scan")


if os.environ.get("SCAN_ONLY") != "1":
    t0 = time.monotonic()
    stop = threading.Event()
    writers = [threading.Thread(target=dif_writer if w % 2 else data_writer,
                                args=(w,)) for w in range(WRITERS)]
    readers = [threading.Thread(target=reader, args=(w, stop))
               for w in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    print("load: %d writers x %d requests in %.1fs: %r" % (
        WRITERS, OPS, time.monotonic() - t0, counts))
    assert counts["writes"] > WRITERS * OPS // 3, counts
    assert counts["rejected"] > 0 and counts["reads"] > 0, counts

scan()
for f in failures[:20]:
    print("FAIL:", f)
assert not failures, "%d failures" % len(failures)
print("ok: %d blocks scanned, every block consistent" % N)
