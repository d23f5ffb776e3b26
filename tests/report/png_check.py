#!/usr/bin/env python3
"""png_check.py FILE.png MIN_COLOURS MIN_INK_PERCENT

Decodes an 8-bit RGB or RGBA PNG with the standard library only (zlib and the five PNG row
filters) and fails (exit 1) unless the picture holds at least MIN_COLOURS distinct colours and
at least MIN_INK_PERCENT of its pixels differ from the most common colour (the background): a
blank or nearly blank screenshot fails. Both are counted on every second pixel of every
second row. Prints the size and both counts.
"""
import struct
import sys
import zlib
from collections import Counter


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("%s: not a PNG" % path)
    pos, idat, width = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour not in (2, 6) or interlace:
                raise SystemExit("%s: only 8-bit RGB/RGBA, non-interlaced (got depth %d type %d)"
                                 % (path, depth, colour))
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    if width is None:
        raise SystemExit("%s: no IHDR" % path)
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(b"".join(idat))
    low = int.from_bytes(b"\x7f" * stride, "big")
    high = int.from_bytes(b"\x80" * stride, "big")
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:  # bytewise sum of two rows without carries between bytes, as big integers
            x, z = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            line = bytearray((((x & low) + (z & low)) ^ ((x ^ z) & high)).to_bytes(stride, "big"))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(bpp):  # no left neighbour: the predictor is the byte above
                line[i] = (line[i] + prev[i]) & 255
            for i in range(bpp, stride):
                a, b, c = line[i - bpp], prev[i], prev[i - bpp]
                if a == b == c:
                    line[i] = (line[i] + a) & 255
                    continue
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif f != 0:
            raise SystemExit("%s: bad filter %d in row %d" % (path, f, y))
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    path, min_colours, min_ink = argv[1], int(argv[2]), float(argv[3])
    width, height, bpp, rows = decode(path)
    counts = Counter()  # every second pixel of every second row: enough to tell blank from drawn
    for row in rows[::2]:
        counts.update(row[i:i + 3] for i in range(0, len(row), 2 * bpp))
    background, bg_count = counts.most_common(1)[0]
    ink = 100.0 * (1 - bg_count / sum(counts.values()))
    print("%s: %dx%d, %d colours, %.1f%% of pixels not the background #%s"
          % (path, width, height, len(counts), ink, background.hex()))
    if len(counts) < min_colours or ink < min_ink:
        print("FAIL: a blank-looking screenshot (want >= %d colours and >= %.1f%% ink)" % (min_colours, min_ink))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
