#!/usr/bin/env bash
# Independent check of the C TensorBoard writer: tools/read_tfevents.py (its own CRC-32C,
# framing and protobuf decoder, standard library only) reads an event file written by the
# library, and every value must match metrics.jsonl exactly: the f64 copy bit for bit, the
# float32 dashboard value as the double rounded to float32 (NaN stays NaN). A flipped byte
# and a truncated file must make the tool fail naming the offset.
set -u
: "${DETRAIN:?run through tests/run.sh or set DETRAIN}"
cd "$(dirname "$0")/../.."
GEN="$(dirname "$DETRAIN")/tests/metrics/test_metrics_log"
[ -x "$GEN" ] || { echo "missing $GEN (make first)"; exit 1; }
T=$(mktemp -d /tmp/dt_test_read_tfevents_XXXXXX)
trap 'rm -rf "$T"' EXIT

"$GEN" --write "$T/run" 1 12 --special || exit 1
# a resumed run (checkpoint at step 7) appends to the same directory with a slower clock:
# its event file starts with a restart marker at step 8
sleep 1  # event file names carry the second: keep the resumed file sorting after
"$GEN" --write "$T/run" 8 15 --special --resume --wall-offset 5 || exit 1
python3 tools/read_tfevents.py "$T/run" >"$T/records.jsonl" || { echo "reader failed"; exit 1; }

python3 - "$T/run/metrics.jsonl" "$T/records.jsonl" <<'EOF' || exit 1
import json, math, struct, sys
sys.path.insert(0, "tools")
from read_tfevents import crc32c
assert crc32c(b"123456789") == 0xE3069283, "python CRC-32C check value"

metrics = []
for l in open(sys.argv[1]):  # detrain's resume rule (src/metrics/metrics.h)
    d = json.loads(l)
    metrics = [m for m in metrics if m["step"] < d["step"]] + [d]
recs = [json.loads(l) for l in open(sys.argv[2])]
versions = [r for r in recs if "file_version" in r]
assert [r["file_version"] for r in versions] == ["brain.Event:2"] * 2, versions
restarts = [(r["step"], r["session_log"]) for r in recs if "session_log" in r]
assert restarts == [(8, 1)], restarts
# TensorBoard's rule: a START marker at step N drops every earlier value with step >= N
kept = []
for r in recs:
    if "session_log" in r:
        kept = [k for k in kept if k["step"] < r["step"]]
    elif "tag" in r:
        kept.append(r)
recs = kept

def f32_of(bits):
    """float32 rounding of the double with these bits, as hex (None for NaN)."""
    x = struct.unpack("<d", struct.pack("<Q", bits))[0]
    if x != x:
        return None
    try:
        return "0x%08x" % struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return "0x7f800000" if x > 0 else "0xff800000"

checked, bad = 0, []
by_step = {}
for r in recs:
    by_step.setdefault(r["step"], {})[(r["tag"], r["kind"])] = r
assert sorted(by_step) == [m["step"] for m in metrics], (sorted(by_step), "steps")
for m in metrics:
    step, got = m["step"], by_step[m["step"]]
    want = {}
    for k, v in m.items():
        if k in ("step", "resumed") or k.endswith("_hex"):  # resumed: the resume marker
            continue
        if k + "_hex" in m:
            want[k] = int(m[k + "_hex"], 16)
        else:
            assert isinstance(v, int), (k, v)
            want[k] = struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    tags = {(k, "simple") for k in want} | {(k + "/f64", "f64") for k in want}
    if set(got) != tags:
        bad.append("step %d tags: extra %s missing %s" % (step, set(got) - tags, tags - set(got)))
        continue
    for k, bits in want.items():
        exact = got[(k + "/f64", "f64")]["f64_hex"]
        if exact != "0x%016x" % bits:
            bad.append("step %d %s/f64: %s != %s" % (step, k, exact, "0x%016x" % bits))
        simple = int(got[(k, "simple")]["f32_hex"], 16)
        w = f32_of(bits)
        if w is None:
            if not ((simple >> 23) & 0xFF == 0xFF and simple & 0x7FFFFF):
                bad.append("step %d %s: float32 0x%08x is not NaN" % (step, k, simple))
        elif "0x%08x" % simple != w:
            bad.append("step %d %s: float32 0x%08x != %s" % (step, k, simple, w))
        checked += 2
for b in bad:
    print("MISMATCH", b)
print("checked %d values over %d steps" % (checked, len(metrics)))
assert len(metrics) == 15 and checked > 300 and not bad
EOF

# corruption: the tool must refuse, naming the offset
f=$(ls "$T"/run/events.out.tfevents.* | head -n 1)
size=$(stat -c %s "$f")
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0xFF
open(sys.argv[2], "wb").write(b)' "$f" "$T/flip"
if python3 tools/read_tfevents.py "$T/flip" >/dev/null 2>"$T/flip.err"; then
  echo "FAIL: flipped byte not detected"; exit 1
fi
grep -q "CRC in record at byte" "$T/flip.err" || { echo "FAIL: $(cat "$T/flip.err")"; exit 1; }
head -c $((size - 7)) "$f" >"$T/cut"
if python3 tools/read_tfevents.py "$T/cut" >/dev/null 2>"$T/cut.err"; then
  echo "FAIL: truncation not detected"; exit 1
fi
grep -q "truncated record at byte" "$T/cut.err" || { echo "FAIL: $(cat "$T/cut.err")"; exit 1; }
echo "read_tfevents: all checks passed"
