#!/usr/bin/env python3
"""Check that TensorBoard itself reads detrain's event files exactly.

usage: check_tensorboard.py LOG_DIR

Loads LOG_DIR with tensorboard's EventAccumulator (every event kept: size guidance 0) and
checks, for every step of LOG_DIR/metrics.jsonl and every metric on it:
  - Scalars(<metric>) has the step, with the double rounded to float32 (NaN stays NaN);
  - Tensors(<metric>/f64) has the step, with a rank-0 float64 equal bit for bit to the
    metric's _hex field (integer metrics: the integer as a double);
  - the f64 tag carries scalars-plugin metadata;
  - no tag has steps that metrics.jsonl lacks.
metrics.jsonl is read with detrain's resume rule (a step that does not increase discards
every earlier entry with a step >= it); EventAccumulator purges out-of-order steps the same
way, and where a step still appears twice the last value is taken.
Exit 0 when everything matches, 1 on any mismatch (each one printed), 2 on usage errors.
Needs tensorboard (and numpy, which it depends on); not part of the CPU test suite.
"""
import json
import os
import struct
import sys


def read_metrics(path):
    rows = []
    for n, line in enumerate(open(path), 1):
        d = json.loads(line)
        step = d["step"]
        while rows and rows[-1]["step"] >= step:
            rows.pop()
        rows.append(d)
    return rows


def expected(row):
    """{metric: double bits} for one metrics.jsonl line."""
    out = {}
    for k, v in row.items():
        if k in ("step", "resumed") or k.endswith("_hex"):  # resumed: the resume marker
            continue
        if k + "_hex" in row:
            out[k] = int(row[k + "_hex"], 16)
        elif isinstance(v, int):
            out[k] = struct.unpack("<Q", struct.pack("<d", float(v)))[0]
    return out


def f32_bits_of(double_bits):
    x = struct.unpack("<d", struct.pack("<Q", double_bits))[0]
    if x != x:
        return None
    try:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return 0x7F800000 if x > 0 else 0xFF800000


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    log_dir = argv[1]
    metrics_path = os.path.join(log_dir, "metrics.jsonl")
    if not os.path.isfile(metrics_path):
        sys.stderr.write("check_tensorboard: no %s\n" % metrics_path)
        return 2
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.util import tensor_util

    acc = ea.EventAccumulator(log_dir, size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    tags = acc.Tags()
    scalars = {t: {e.step: e.value for e in acc.Scalars(t)} for t in tags.get("scalars", [])}
    tensors = {t: {e.step: e.tensor_proto for e in acc.Tensors(t)} for t in tags.get("tensors", [])}

    rows = read_metrics(metrics_path)
    bad, checked, steps_of = [], 0, {}
    for row in rows:
        step = row["step"]
        for k, bits in expected(row).items():
            steps_of.setdefault(k, set()).add(step)
            # float32 dashboard value
            got = scalars.get(k, {}).get(step)
            want = f32_bits_of(bits)
            if got is None:
                bad.append("step %d %s: no scalar" % (step, k))
            else:
                gb = struct.unpack("<I", struct.pack("<f", got))[0] if got == got else None
                if want is None and got == got:
                    bad.append("step %d %s: scalar %r, want NaN" % (step, k, got))
                elif want is not None and gb != want:
                    bad.append("step %d %s: scalar 0x%08x, want 0x%08x" % (step, k, gb, want))
            # exact float64 copy
            tp = tensors.get(k + "/f64", {}).get(step)
            if tp is None:
                bad.append("step %d %s/f64: no tensor" % (step, k))
            else:
                arr = tensor_util.make_ndarray(tp)
                if arr.dtype.name != "float64" or arr.shape != ():
                    bad.append("step %d %s/f64: dtype %s shape %s" % (step, k, arr.dtype, arr.shape))
                else:
                    tb = struct.unpack("<Q", arr.tobytes())[0]
                    if tb != bits:
                        bad.append("step %d %s/f64: 0x%016x, want 0x%016x" % (step, k, tb, bits))
            checked += 2
    for k, steps in steps_of.items():
        try:
            md = acc.SummaryMetadata(k + "/f64")
        except KeyError:
            md = None
        if md is None or md.plugin_data.plugin_name != "scalars":
            bad.append("%s/f64: no scalars-plugin metadata" % k)
        for tag in (k, k + "/f64"):
            extra = set((scalars if tag == k else tensors).get(tag, {})) - steps
            if extra:
                bad.append("%s: steps not in metrics.jsonl: %s" % (tag, sorted(extra)[:10]))
    for b in bad:
        print("MISMATCH", b)
    print("check_tensorboard: %d values over %d steps checked, %d mismatches"
          % (checked, len(rows), len(bad)))
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
