#!/usr/bin/env python3
"""Print the scalar records of TensorBoard event files as JSON lines (standard library only).

usage: read_tfevents.py PATH [PATH ...]
  PATH is an event file or a directory (its events.out.tfevents.* files, in name order).

An independent reader for detrain's C writer (src/metrics/tfevents.c): its own CRC-32C,
TFRecord framing and a minimal protobuf decoder. Every CRC is checked; a bad CRC or a
truncated record is an error (exit 1) naming the file and byte offset. Output, one line
per summary value:
  {"file": ..., "step": 7, "wall_time": ..., "tag": "loss", "kind": "simple",
   "f32_hex": "0x...", "value": 1.23}
  {"file": ..., "step": 7, "wall_time": ..., "tag": "loss/f64", "kind": "f64",
   "f64_hex": "0x...", "value": 1.23}
one {"file": ..., "file_version": "brain.Event:2"} line per file version record, and
one {"file": ..., "step": N, "session_log": 1} line per SessionLog event (1 = START: a
resumed run; TensorBoard drops earlier values with step >= N).
Values are also given as hex bits so comparisons can be exact (NaN payloads included).
"""
import json
import os
import struct
import sys


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class DecodeError(Exception):
    pass


def varint(buf, i):
    x, shift = 0, 0
    while True:
        if i >= len(buf) or shift > 63:
            raise DecodeError("bad varint")
        b = buf[i]
        i += 1
        x |= (b & 0x7F) << shift
        if not b & 0x80:
            return x, i
        shift += 7


def fields(buf):
    """Yields (field, wire, value) where value is int for varint/fixed, bytes for LEN."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            if i + 8 > len(buf):
                raise DecodeError("truncated fixed64")
            v = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        elif wire == 5:
            if i + 4 > len(buf):
                raise DecodeError("truncated fixed32")
            v = struct.unpack_from("<I", buf, i)[0]
            i += 4
        elif wire == 2:
            n, i = varint(buf, i)
            if i + n > len(buf):
                raise DecodeError("truncated length-delimited field")
            v = bytes(buf[i:i + n])
            i += n
        else:
            raise DecodeError("unsupported wire type %d" % wire)
        yield field, wire, v


def f64(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def decode_tensor(buf):
    """(kind, bits) for a rank-0 DT_FLOAT/DT_DOUBLE tensor, else None."""
    dtype, dims, vals = 0, 0, []
    for f, w, v in fields(buf):
        if f == 1 and w == 0:
            dtype = v
        elif f == 2 and w == 2:
            dims += sum(1 for f2, _, _ in fields(v) if f2 == 2)
        elif f in (4, 5, 6) and w == 2:
            if len(v) == 8:
                vals.append(struct.unpack("<Q", v)[0])
            elif len(v) == 4:
                vals.append(struct.unpack("<I", v)[0])
            else:
                vals.extend([None, None])
        elif f == 5 and w == 5 or f == 6 and w == 1:
            vals.append(v)
    if dims or len(vals) != 1:
        return None
    if dtype == 2:
        return "f64", vals[0]
    if dtype == 1:
        return "f32tensor", vals[0]
    return None


def jnum(x):
    """JSON has no NaN/Inf: spell them as strings (the hex field is exact anyway)."""
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return x


def read_file(path):
    data = open(path, "rb").read()
    off, out = 0, []
    while off < len(data):
        if len(data) - off < 12:
            raise DecodeError("%s: truncated record header at byte %d" % (path, off))
        (length,) = struct.unpack_from("<Q", data, off)
        (lcrc,) = struct.unpack_from("<I", data, off + 8)
        if masked(crc32c(data[off:off + 8])) != lcrc:
            raise DecodeError("%s: bad length CRC in record at byte %d" % (path, off))
        if off + 12 + length + 4 > len(data):
            raise DecodeError("%s: truncated record at byte %d" % (path, off))
        payload = data[off + 12:off + 12 + length]
        (dcrc,) = struct.unpack_from("<I", data, off + 12 + length)
        if masked(crc32c(payload)) != dcrc:
            raise DecodeError("%s: bad payload CRC in record at byte %d" % (path, off))
        try:
            out.extend(decode_event(path, payload))
        except DecodeError as e:
            raise DecodeError("%s: record at byte %d: %s" % (path, off, e))
        off += 12 + length + 4
    return out


def decode_event(path, payload):
    wall, step, summaries, recs = 0.0, 0, [], []
    for f, w, v in fields(payload):
        if f == 1 and w == 1:
            wall = f64(v)
        elif f == 2 and w == 0:
            step = v - (1 << 64) if v >= 1 << 63 else v
        elif f == 3 and w == 2:
            recs.append({"file": path, "file_version": v.decode("utf-8", "replace")})
        elif f == 5 and w == 2:
            summaries.append(v)
        elif f == 7 and w == 2:
            status = dict((f2, v2) for f2, w2, v2 in fields(v) if w2 == 0).get(1, 0)
            recs.append({"file": path, "step": step, "session_log": status})
    for s in summaries:
        for f, w, v in fields(s):
            if f != 1 or w != 2:
                continue
            tag, simple, tensor = "", None, None
            for f2, w2, v2 in fields(v):
                if f2 == 1 and w2 == 2:
                    tag = v2.decode("utf-8", "replace")
                elif f2 == 2 and w2 == 5:
                    simple = v2
                elif f2 == 8 and w2 == 2:
                    tensor = decode_tensor(v2)
            rec = {"file": path, "step": step, "wall_time": wall, "tag": tag}
            if simple is not None:
                rec.update(kind="simple", f32_hex="0x%08x" % simple, value=jnum(f32(simple)))
            elif tensor and tensor[0] == "f64":
                rec.update(kind="f64", f64_hex="0x%016x" % tensor[1], value=jnum(f64(tensor[1])))
            elif tensor:
                rec.update(kind="f32", f32_hex="0x%08x" % tensor[1], value=jnum(f32(tensor[1])))
            else:
                continue
            recs.append(rec)
    return recs


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    paths = []
    for p in argv[1:]:
        if os.path.isdir(p):
            paths += sorted(os.path.join(p, n) for n in os.listdir(p) if "tfevents" in n)
        else:
            paths.append(p)
    try:
        for p in paths:
            for rec in read_file(p):
                print(json.dumps(rec, sort_keys=True))
    except (DecodeError, OSError) as e:
        sys.stderr.write("read_tfevents: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
