#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# stabledif: a tiny NBD server that answers reads with structured reply
# chunks shaped on purpose -- out of order, leaving bytes out, or filling
# some twice -- for test-client-failures.sh: libstabledif does not have
# libnbd zero its read buffers, so it must itself notice a reply that
# does not fill every byte exactly once (client/libstabledif/libstabledif-cover.c).
#
#   nbd-chunky-server.py SOCKET MODE
#
# It serves one export, "dif", that looks like the dif view of a
# T10-DIF-TYPE1-CRC disk of NBLOCKS 512-byte blocks: its description is
# the stabledif profile, and block LBA holds DATA(LBA) followed by a
# correct tuple (guard, app tag 0, ref tag LBA), so a complete reply
# verifies.  MODE shapes the reply to every read:
#   split    two chunks, the second half first (complete: the read works)
#   short    the first half only
#   overlap  the first half and one block more, then the second half
# It serves one client and exits when that client disconnects.
import os
import socket
import struct
import sys

from pi_ref import t10_tuple

NBLOCKS = 64
IV, TUPLE = 512, 8
EXT = IV + TUPLE
PROFILE = ("stabledif/1 view=dif format=T10-DIF-TYPE1-CRC interval=512 "
           "tuple=8 stable_writes=1")


def block(lba):
    """Extended block LBA: data (a pattern of the LBA) and its tuple."""
    data = bytes((lba * 7 + i * 13) & 0xFF for i in range(IV))
    return data + t10_tuple(data, 0, lba)


DISK = b"".join(block(lba) for lba in range(NBLOCKS))


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        got = conn.recv(n - len(buf))
        if not got:
            raise EOFError
        buf += got
    return buf


def opt_reply(conn, opt, rtype, data=b""):
    conn.sendall(struct.pack(">QIII", 0x3E889045565A9, opt, rtype, len(data))
                 + data)


def negotiate(conn):
    conn.sendall(b"NBDMAGIC" + b"IHAVEOPT" + struct.pack(">H", 1 | 2))
    recv_exact(conn, 4)                         # client flags
    structured = False
    while True:
        _, opt, length = struct.unpack(">QII", recv_exact(conn, 16))
        data = recv_exact(conn, length)
        if opt == 8:                            # STRUCTURED_REPLY
            structured = True
            opt_reply(conn, opt, 1)
        elif opt in (6, 7):                     # INFO, GO
            (nlen,) = struct.unpack(">I", data[:4])
            name = data[4:4 + nlen]
            if name not in (b"", b"dif"):
                opt_reply(conn, opt, 0x80000006)   # ERR_UNKNOWN
                continue
            flags = 1 | 2                       # HAS_FLAGS, READ_ONLY
            opt_reply(conn, opt, 3, struct.pack(">HQH", 0, len(DISK), flags))
            opt_reply(conn, opt, 3, struct.pack(">H", 1) + b"dif")
            opt_reply(conn, opt, 3, struct.pack(">H", 2) + PROFILE.encode())
            opt_reply(conn, opt, 3, struct.pack(">HIII", 3, 1, EXT, 1 << 20))
            opt_reply(conn, opt, 1)
            if opt == 7:
                return structured
        elif opt == 2:                          # ABORT
            raise EOFError
        else:
            opt_reply(conn, opt, 0x80000001)    # ERR_UNSUP


def chunk(conn, handle, offset, data, done):
    conn.sendall(struct.pack(">IHHQIQ", 0x668E33EF, 1 if done else 0, 1,
                             handle, 8 + len(data), offset) + data)


def serve(conn, mode):
    if not negotiate(conn):
        sys.exit("nbd-chunky-server: the client did not ask for "
                 "structured replies")
    while True:
        magic, _, ctype, handle, offset, length = struct.unpack(
            ">IHHQQI", recv_exact(conn, 28))
        if magic != 0x25609513:
            sys.exit("nbd-chunky-server: bad request magic")
        if ctype == 2:                          # DISC
            return
        if ctype != 0:                          # only reads: EINVAL
            conn.sendall(struct.pack(">IIQ", 0x67446698, 22, handle))
            continue
        half = (length // 2) // EXT * EXT
        a, b = offset, offset + half
        if mode == "split":
            chunk(conn, handle, b, DISK[b:offset + length], False)
            chunk(conn, handle, a, DISK[a:b], True)
        elif mode == "short":
            chunk(conn, handle, a, DISK[a:b], True)
        elif mode == "overlap":
            chunk(conn, handle, a, DISK[a:b + EXT], False)
            chunk(conn, handle, b, DISK[b:offset + length], True)
        else:
            sys.exit("nbd-chunky-server: unknown mode " + mode)


def main():
    path, mode = sys.argv[1], sys.argv[2]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    srv.settimeout(60)                          # bounded: never hang a test
    conn, _ = srv.accept()
    conn.settimeout(60)
    try:
        serve(conn, mode)
    except EOFError:
        pass
    conn.close()
    srv.close()
    os.unlink(path)


if __name__ == "__main__":
    main()
