# SPDX-License-Identifier: BSD-3-Clause
# stabledif: reference PI arithmetic for the Python parts of the tests,
# written from the T10 and NVMe definitions, independent of common/pi.c
# and of isa-l, so that the device is checked against a second
# implementation.  Plain Python, no libnbd: the NBD test scripts (the
# run_nbdsh prelude, test-ctl-cli.sh) and the test servers
# (nbd-chunky-server.py) import it.  functions.sh puts tests/ on
# PYTHONPATH.
import struct


def _crc16_table():
    # CRC-16/T10-DIF: poly 0x8bb7, not reflected, init 0, xorout 0.
    table = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x8BB7) if c & 0x8000 else (c << 1)
        table.append(c & 0xFFFF)
    return table


def _crc64_table():
    # CRC-64/NVME: poly 0xad93d23594c93659, reflected, init and xorout
    # all ones.  Reflected polynomial:
    rpoly = int("{:064b}".format(0xAD93D23594C93659)[::-1], 2)
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ rpoly if c & 1 else c >> 1
        table.append(c)
    return table


_T16 = _crc16_table()
_T64 = _crc64_table()
_M64 = (1 << 64) - 1


def crc16_t10dif(data):
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _T16[((crc >> 8) ^ b) & 0xFF]
    return crc


def crc64_nvme(data):
    crc = _M64
    for b in data:
        crc = _T64[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ _M64


# The check values of both catalogues.
assert crc16_t10dif(b"123456789") == 0xD0DB
assert crc64_nvme(b"123456789") == 0xAE8B14860A799888

# What each format is: (type, tuple size).  The guard is CRC-16 for
# 8-byte tuples and CRC-64 for 16-byte ones.
FORMATS = {
    "none": (0, 0),
    "T10-DIF-TYPE1-CRC": (1, 8),
    "T10-DIF-TYPE2-CRC": (2, 8),
    "T10-DIF-TYPE3-CRC": (3, 8),
    "EXT-DIF-TYPE1-CRC64": (1, 16),
    "EXT-DIF-TYPE3-CRC64": (3, 16),
}


def t10_tuple(data, app, ref):
    """The 8-byte T10 tuple of DATA: its CRC-16 guard, APP and REF."""
    return struct.pack(">HHI", crc16_t10dif(data), app, ref & 0xFFFFFFFF)
