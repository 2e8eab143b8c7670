"""vocab's binary f32 feature files (`pipeline/src/store`), read and written with numpy, for the
scripts that remake encodings outside vocab (normalise.py, eval/descriptors/concat.py).

A file is a 32-byte header (magic `VOCABFEA`, version, kind 1 for f32 at byte 10, dims at 12,
rows at 16, the payload's CRC-32 at 24, the header's own at 28) and rows of (id u32, row u16,
col u16, dims x f32), all little-endian.
"""
import struct
import zlib

import numpy as np

HEADER = 32


def record(dims):
    return np.dtype([("id", "<u4"), ("row", "<u2"), ("col", "<u2"), ("v", "<f4", (dims,))])


def read(path):
    """The file's header bytes and its rows."""
    head = open(path, "rb").read(HEADER)
    assert head[:8] == b"VOCABFEA" and head[10] == 1, f"{path}: not an f32 vocab feature file"
    dims = struct.unpack("<I", head[12:16])[0]
    return head, np.fromfile(path, dtype=record(dims), offset=HEADER)


def write(path, head, rows):
    """`rows` under `head`'s magic, version and kind, with their own dims, count and CRCs."""
    payload = rows.tobytes()
    top = bytearray(head[:24])
    top[12:16] = struct.pack("<I", rows["v"].shape[1])
    top[16:24] = struct.pack("<Q", len(rows))
    top += struct.pack("<I", zlib.crc32(payload))
    top += struct.pack("<I", zlib.crc32(bytes(top)))
    with open(path, "wb") as f:
        f.write(bytes(top))
        f.write(payload)
