# SPDX-License-Identifier: BSD-3-Clause
# stabledif: the write load and the checker of test-crash-file.sh.  Run
# through nbdsh with the functions.sh prelude (connect, Disk, CRCs).
#
# MODE=write: THREADS threads, each owning a disjoint region of the disk
# and one connection to each view, write whole blocks (data view and dif
# view, some with FUA), zero some, and flush now and then -- alternating
# the connection the flush goes to, so multi-conn is relied on -- until
# the server goes away (it is killed) or DURATION seconds pass.  Each
# thread logs to LOGDIR/t<T>.log, before issuing a request "W seq kind
# lba n fua", after its reply "A seq", after a flush reply "F seq" (every
# request up to seq is durable).  Every block written carries its own
# identity (round, thread, seq, lba), so the checker can tell which write
# it came from.
#
# MODE=check (after a restart): the whole data view must read without an
# error (the device verifies all PI it returns), and per block:
#  - its data is that of the newest durable write covering it (flushed,
#    or FUA and acknowledged), or, if there is none, what the block held
#    at the start of the round (SNAP, the image the previous check saw),
#    or that of a later write that may have been in flight;
#  - all-ones PI over non-zero data only where a write was in flight
#    (never for a block whose newest write was durable);
#  - other PI matches the data (guard, ref).
# Then the dif view image is saved to SNAP for the next round.
import struct
import threading
import time

MODE = os.environ["MODE"]
LOGDIR = os.environ["LOGDIR"]
ROUND = int(os.environ["ROUND"])
THREADS = int(os.environ.get("THREADS", "4"))
SNAP = os.environ["SNAP"]

h0 = connect("dif")
d = Disk(h0)
I, E, N = d.interval, d.ext, d.nblocks
REGION = N // THREADS
MAGIC = b"CRASHTST"


def content(rnd, t, seq, lba):
    unit = struct.pack(">8sIIQQ", MAGIC, rnd, t, seq, lba)
    return unit * (I // len(unit))


def writer(t):
    rng = random.Random(ROUND * 100 + t)
    log = open(os.path.join(LOGDIR, "t%d.log" % t), "w")
    hdata = connect("data")
    hdif = connect("dif")
    base = t * REGION
    deadline = time.monotonic() + float(os.environ.get("DURATION", "10"))
    seq = 0
    try:
        while time.monotonic() < deadline:
            seq += 1
            r = rng.random()
            if r < 0.12:
                (hdata if seq % 2 else hdif).flush()
                log.write("F %d\n" % (seq - 1))
                log.flush()
                continue
            n = rng.randrange(1, 17)
            lba = base + rng.randrange(0, REGION - n + 1)
            fua = rng.random() < 0.15
            flags = nbd.CMD_FLAG_FUA if fua else 0
            kind = "data" if r < 0.6 else "dif" if r < 0.9 else "zero"
            log.write("W %d %s %d %d %d\n" % (seq, kind, lba, n, int(fua)))
            log.flush()
            if kind == "data":
                buf = b"".join(content(ROUND, t, seq, lba + i)
                               for i in range(n))
                hdata.pwrite(buf, lba * I, flags)
            elif kind == "dif":
                buf = b"".join(d.block(content(ROUND, t, seq, lba + i),
                                       lba + i, app=t)
                               for i in range(n))
                hdif.pwrite(buf, lba * E, flags)
            elif seq % 2:
                hdata.zero(n * I, lba * I, flags)
            else:
                hdif.zero(n * E, lba * E, flags)
            log.write("A %d\n" % seq)
            log.flush()
    except nbd.Error:
        pass                    # the server was killed
    log.close()


def check():
    failures = []
    stats = {"durable": 0, "newer": 0, "torn-escaped": 0, "baseline": 0}

    # 1. The data view reads without a single PI error.
    hdata = connect("data")
    for lba in range(0, N, 256):
        n = min(256, N - lba)
        try:
            hdata.pread(n * I, lba * I)
        except nbd.Error:
            for b in range(lba, lba + n):
                try:
                    hdata.pread(I, b * I)
                except nbd.Error as e:
                    failures.append("LBA %d: data view read fails: %s" % (
                        b, e.string))

    img = h0.pread(N * E, 0)
    if os.path.exists(SNAP):
        snap = open(SNAP, "rb").read()
    else:
        snap = (bytes(I) + d.escape_tuple()) * N
    assert len(snap) == len(img)

    # 2. Per thread, what each block may hold.
    for t in range(THREADS):
        writes = {}
        acked = set()
        last_flush = 0
        for line in open(os.path.join(LOGDIR, "t%d.log" % t)):
            f = line.split()
            if f[0] == "W":
                writes[int(f[1])] = (f[2], int(f[3]), int(f[4]), f[5] == "1")
            elif f[0] == "A":
                acked.add(int(f[1]))
            elif f[0] == "F":
                last_flush = max(last_flush, int(f[1]))
        durable = {s for s, w in writes.items()
                   if s <= last_flush or (w[3] and s in acked)}
        cover = {}
        for s in sorted(writes):
            kind, lba, n, _ = writes[s]
            for b in range(lba, lba + n):
                cover.setdefault(b, []).append(s)

        for b in range(t * REGION, (t + 1) * REGION):
            blk = img[b * E:(b + 1) * E]
            data, tup = blk[:I], blk[I:]
            seqs = cover.get(b, [])
            dur = [s for s in seqs if s in durable]
            newest = max(dur) if dur else None

            def of(s):
                kind = writes[s][0]
                return bytes(I) if kind == "zero" else content(ROUND, t, s, b)
            if newest is None:
                ok = [snap[b * E:b * E + I]]
            else:
                ok = [of(newest)]
            later = [s for s in seqs if newest is None or s > newest]
            ok += [of(s) for s in later]
            if data not in ok:
                if newest is not None:
                    failures.append(
                        "LBA %d: lost durable write %d (%s%s): holds %r" % (
                            b, newest, writes[newest][0],
                            " FUA" if writes[newest][3] else "",
                            data[:32]))
                else:
                    failures.append("LBA %d: unexpected data %r" % (
                        b, data[:32]))
                continue
            if newest is not None and data == ok[0]:
                stats["durable"] += 1
            elif newest is None and data == ok[0]:
                stats["baseline"] += 1
            else:
                stats["newer"] += 1

            if tup == d.escape_tuple():
                if data == bytes(I):
                    continue
                was_escaped = (newest is None and
                               snap[b * E + I:(b + 1) * E] == tup)
                if later or was_escaped:
                    stats["torn-escaped"] += 1
                else:
                    failures.append("LBA %d: durable write %d lost its PI" %
                                    (b, newest))
                continue
            g, app, ref = d.tuple_fields(tup)
            if g != d.guard(data) or ref != d.ref_for(b):
                failures.append("LBA %d: PI %s does not match its data" % (
                    b, tup.hex()))

    for f in failures[:20]:
        print("FAIL:", f)
    assert not failures, "%d failures" % len(failures)
    open(SNAP, "wb").write(img)
    print("ok: round %d: %d blocks checked: %r" % (ROUND, N, stats))
    assert stats["durable"] > 0, "no durable write was checked"


if MODE == "write":
    threads = [threading.Thread(target=writer, args=(t,))
               for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
else:
    check()
