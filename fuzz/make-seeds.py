#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Write the binary seed corpora of fuzz-ctl-request, fuzz-dif-write and
fuzz-client-read (fuzz/corpus/NAME/), in the input formats the targets
read (see the comments at the top of each fuzz-*.c and fuzz-common.c).

    python3 fuzz/make-seeds.py [FUZZDIR]

The profile seeds are plain text and written by hand.  Rerunning this
rewrites the same files.
"""
import os
import struct
import sys

# Indexes into fuzz_configs[] (fuzz-common.c).
NONE_512, NONE_4K, T1, T2, T3, T1_4K, T1_APP, T3_APP, C64_T1, C64_T3, \
    C64_APP = range(11)
NAMES = ["none-512", "none-4096", "type1-512", "type2-512", "type3-512",
         "type1-4096", "type1-app", "type3-app", "crc64-type1",
         "crc64-type3", "crc64-app"]

# Block modes of fuzz_build_ext.
VALID, ESCAPED, CHANGED, RAW = 0, 1, 2, 3


def block(mode, seed=0x01020304, extra=b""):
    """One block for fuzz_build_ext: mode byte, 32-bit seed, mode's bytes."""
    return bytes([mode]) + struct.pack("<I", seed) + extra


def valid(seed=0x01020304):
    return block(VALID, seed)


def escaped(seed=0x0badf00d):
    return block(ESCAPED, seed)


def changed(what, arg=b"\x00\x00"):
    """Valid, then: what&3 = 0 data bit, 1 guard bit, 2 app tag, 3 ref."""
    return block(CHANGED, 0x55aa55aa, bytes([what]) + arg)


def raw(tuple_bytes):
    return block(RAW, 0x12345678, tuple_bytes)


def write_op(lba, blocks, kind=0):
    """A dif write of the given blocks at LBA (kind bits: see target)."""
    return bytes([kind, lba, len(blocks) - 1]) + b"".join(blocks)


def main():
    top = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    out = {}

    # fuzz-ctl-request: config byte, then request lines.
    ctl = out.setdefault("ctl-request", {})
    ctl["help"] = bytes([T1]) + b"help\n"
    ctl["profile-crc64-app"] = bytes([C64_APP]) + b"profile\n"
    ctl["counters-after-failures"] = (bytes([T1]) + b"\x01\x01\x03\x05\n"
                                      b"\x01\x01\x07\x09\ncounters\n")
    ctl["events-since"] = (bytes([T1]) + b"\x01\x01\x02\x0a\nevents\n"
                           b"events 1\nevents 0x10\n")
    ctl["reset"] = bytes([T1]) + b"\x01\x01\x02\x0a\nreset\nevents\n"
    ctl["inject-each-kind"] = (bytes([T1_APP]) + b"inject data 2\n"
                               b"inject guard 9\ninject app 1\n"
                               b"inject ref 0x3\n\x01\x00\x04\x03\n"
                               b"counters\n")
    ctl["inject-type3"] = (bytes([T3_APP]) + b"inject ref 1\n"
                           b"inject app 15\ninject data 15\n")
    ctl["inject-none"] = bytes([NONE_512]) + b"inject data 0\nprofile\n"
    ctl["bad-requests"] = (bytes([T1]) + b"\nnope\nprofile extra\n"
                           b"inject\ninject bogus 1\ninject data 99\n"
                           b"inject data -1\nevents 18446744073709551616\n"
                           b"events x\r\n\t help \t\n\xff\xfe\n")

    # fuzz-dif-write: config byte, then operations.
    dif = out.setdefault("dif-write", {})
    for cfg in (NONE_512, T1, T2, T3, T1_4K, T1_APP, T3_APP, C64_T1,
                C64_T3, C64_APP):
        dif["valid-" + NAMES[cfg]] = bytes([cfg]) + write_op(
            5, [valid(1), valid(2), valid(0), valid(4)])
    dif["escaped-type1"] = bytes([T1]) + write_op(0, [escaped(), valid()])
    dif["escaped-crc64-type3"] = bytes([C64_T3]) + write_op(
        62, [escaped(), escaped()])
    for what, label in ((0x20, "data"), (0x01, "guard"), (0x02, "app"),
                        (0x03, "ref")):
        for cfg in (T1, T1_APP, C64_APP):
            dif["bad-%s-%s" % (label, NAMES[cfg])] = bytes([cfg]) + \
                write_op(3, [valid(7), changed(what, b"\x10\x00")]) + \
                write_op(3, [valid(7)])
    dif["raw-tuple-type3"] = bytes([T3]) + write_op(
        1, [raw(b"\x00" * 8), raw(b"\xff\xff\xff\xff\xff\xff\xff\xff")])
    dif["misaligned-offset"] = bytes([T1]) + write_op(
        2, [valid()], kind=0x20)[:3] + b"\x07" + valid()
    dif["misaligned-count"] = bytes([C64_T1]) + write_op(
        2, [valid(), valid()], kind=0x40)[:3] + b"\x01" + valid() + valid()
    dif["past-end"] = bytes([T1]) + write_op(0, [valid(), valid()],
                                             kind=0x10)
    dif["zero-after-write"] = (bytes([T1]) +
                               write_op(8, [valid(3), valid(4), valid(5)]) +
                               bytes([3, 9, 0]) + bytes([3 | 0x10, 0, 1]))

    # fuzz-client-read: config, 64-bit LBA, block count - 1, flags, blocks.
    cr = out.setdefault("client-read", {})

    def read_seed(cfg, lba, blocks, flags=0):
        return (bytes([cfg]) + struct.pack("<Q", lba) +
                bytes([len(blocks) - 1, flags]) + b"".join(blocks))

    for cfg in range(len(NAMES)):
        cr["valid-" + NAMES[cfg]] = read_seed(cfg, 7, [valid(1), valid(2)])
    cr["ref-wraps-type1"] = read_seed(T1, 0xfffffffe,
                                      [valid(), valid(), valid()])
    cr["ref-wraps-crc64"] = read_seed(C64_T1, (1 << 48) - 1,
                                      [valid(), valid()])
    cr["lba-max"] = read_seed(T2, (1 << 64) - 1, [valid(), changed(3)])
    cr["mixed-odd-address"] = read_seed(
        T1_APP, 100, [valid(), escaped(), changed(0x01), changed(0x02),
                      changed(0x23), raw(b"\x00" * 8)], flags=1)
    cr["mixed-no-pi-no-callback"] = read_seed(
        C64_APP, 3, [changed(0x02), valid(), escaped()], flags=2 | 4 | 8)
    cr["escaped-type3"] = read_seed(T3, 9, [escaped(), raw(b"\xff" * 8)])

    for name, seeds in out.items():
        d = os.path.join(top, "corpus", name)
        os.makedirs(d, exist_ok=True)
        for fname, data in seeds.items():
            with open(os.path.join(d, fname), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
