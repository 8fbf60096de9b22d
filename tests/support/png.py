"""Just enough PNG decoding (8-bit RGB/RGBA, no interlace) to check a screenshot is not blank."""

from __future__ import annotations

import struct
import zlib

import numpy as np


def decode_png(data: bytes) -> np.ndarray:
    """Pixels as a (height, width, channels) uint8 array."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unsupported PNG {header}"
    channels = 3 if color == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prior = out[y - 1] if y else np.zeros_like(line)
        if kind == 0:
            out[y] = line
        elif kind == 2:
            out[y] = (line + prior) & 0xFF
        else:  # Sub, Average and Paeth depend on the pixel to the left: go pixel by pixel
            row = np.zeros_like(line)
            for x in range(len(line)):
                left = row[x - channels] if x >= channels else 0
                up, corner = prior[x], (prior[x - channels] if x >= channels else 0)
                if kind == 1:
                    pred = left
                elif kind == 3:
                    pred = (left + up) // 2
                else:
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    pred = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                row[x] = (line[x] + pred) & 0xFF
            out[y] = row
    return out.astype(np.uint8).reshape(height, width, channels)
