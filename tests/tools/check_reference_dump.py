#!/usr/bin/env python3
"""Checks a dump_reference output directory for completeness and consistency, with the
standard library only (used by test_dump_reference.sh; the numerical comparison against
PyTorch is tools/torch_reference.py).

usage: check_reference_dump.py DIR L C NH V T B STEPS
  (the sizes the dump was made with: the index must agree with them)

Checks: the index names the 16 GPT-2 tensors with the shapes those sizes imply, contiguous
and covering num_floats; every file exists with exactly the size the index implies;
tokens lie in [0, V) and targets are the inputs shifted by one (windows of T+1 tokens);
per step the loss is finite and its hex bits decode to its decimal, below ln(V) + 1; the
reported grad norm equals the float64 norm of grads_K.bin (relative 1e-6: detrain sums
in a fixed fp64 order, Python in another); every tensor has a nonzero gradient and moves
in every step; padded wte rows stay exactly zero. Exit 0: all good, 1: a check failed."""
import json
import math
import os
import struct
import sys
from array import array

errors = []


def fail(msg):
    errors.append(msg)


def floats(path, kind="f"):
    a = array(kind)
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    return a


def main():
    d = sys.argv[1]
    L, C, NH, V, T, B, steps = (int(x) for x in sys.argv[2:9])
    Vp = (V + 127) // 128 * 128
    with open(os.path.join(d, "index.json")) as f:
        ix = json.load(f)
    m = ix["model"]
    want_model = {"num_layers": L, "channels": C, "num_heads": NH, "vocab_size": V, "padded_vocab": Vp}
    for k, v in want_model.items():
        if m.get(k) != v:
            fail(f"index model.{k} = {m.get(k)}, expected {v}")
    maxT = m["max_seq_len"]
    if ix["batch"] != B or ix["seq_len"] != T or ix["steps"] != steps or maxT < T:
        fail(f"index batch/seq_len/steps/max_seq_len {ix['batch']}/{ix['seq_len']}/{ix['steps']}/{maxT}")
    shapes = [("wte", [Vp, C]), ("wpe", [maxT, C]), ("ln1w", [L, C]), ("ln1b", [L, C]),
              ("qkvw", [L, 3 * C, C]), ("qkvb", [L, 3 * C]), ("attprojw", [L, C, C]),
              ("attprojb", [L, C]), ("ln2w", [L, C]), ("ln2b", [L, C]),
              ("fcw", [L, 4 * C, C]), ("fcb", [L, 4 * C]), ("fcprojw", [L, C, 4 * C]),
              ("fcprojb", [L, C]), ("lnfw", [C]), ("lnfb", [C])]
    decays = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}
    got = [(t["name"], t["shape"]) for t in ix["tensors"]]
    if got != shapes:
        fail(f"index tensors {got}, expected {shapes}")
    off = 0
    for t in ix["tensors"]:
        if t["offset"] != off or t["numel"] != math.prod(t["shape"]):
            fail(f"tensor {t['name']}: offset {t['offset']} numel {t['numel']}, expected offset {off}")
        if t["decay"] != (t["name"] in decays):
            fail(f"tensor {t['name']}: decay {t['decay']}")
        off += t["numel"]
    n = ix["num_floats"]
    if off != n:
        fail(f"tensors cover {off} floats, num_floats {n}")
    if len(ix["step_log"]) != steps:
        fail(f"step_log has {len(ix['step_log'])} entries")
    if errors:
        return

    expect = {"index.json"} | {"params_0.bin"}
    for k in range(1, steps + 1):
        expect |= {f"tokens_{k}.bin", f"grads_{k}.bin", f"params_{k}.bin"}
    present = set(os.listdir(d))
    if present != expect:
        fail(f"files: missing {sorted(expect - present)}, unexpected {sorted(present - expect)}")
        return
    for name in expect - {"index.json"}:
        size = os.path.getsize(os.path.join(d, name))
        want = 4 * (2 * B * T if name.startswith("tokens") else n)
        if size != want:
            fail(f"{name}: {size} bytes, expected {want}")
    if errors:
        return

    wte = ix["tensors"][0]
    prev = floats(os.path.join(d, "params_0.bin"))
    for k in range(1, steps + 1):
        log = ix["step_log"][k - 1]
        if log["step"] != k:
            fail(f"step_log[{k - 1}].step = {log['step']}")
        loss = struct.unpack("<d", struct.pack("<Q", int(log["loss_hex"], 16)))[0]
        if not (math.isfinite(loss) and 0 < loss < math.log(V) + 1):
            fail(f"step {k}: loss {loss} not finite or above ln(V) + 1")
        if loss != log["loss"]:
            fail(f"step {k}: loss {log['loss']} and loss_hex {log['loss_hex']} disagree")
        tok = floats(os.path.join(d, f"tokens_{k}.bin"), "i")
        inp, tgt = tok[:B * T], tok[B * T:]
        if min(tok) < 0 or max(tok) >= V:
            fail(f"step {k}: token outside [0, {V})")
        for b in range(B):
            if inp[b * T + 1:(b + 1) * T] != tgt[b * T:(b + 1) * T - 1]:
                fail(f"step {k} row {b}: targets are not the inputs shifted by one")
                break
        g = floats(os.path.join(d, f"grads_{k}.bin"))
        p = floats(os.path.join(d, f"params_{k}.bin"))
        if not all(math.isfinite(x) for x in g) or not all(math.isfinite(x) for x in p):
            fail(f"step {k}: non-finite gradient or parameter")
        gn = math.sqrt(math.fsum(x * x for x in g))
        rep = struct.unpack("<d", struct.pack("<Q", int(log["grad_norm_hex"], 16)))[0]
        if abs(gn - rep) > 1e-6 * gn:
            fail(f"step {k}: grad_norm {rep} but the dumped gradients have norm {gn}")
        for t in ix["tensors"]:
            lo = t["offset"]
            hi = lo + (V * C if t["name"] == "wte" else t["numel"])
            if not any(g[lo:hi]):
                fail(f"step {k}: gradient of {t['name']} is all zero")
            if p[lo:hi] == prev[lo:hi]:
                fail(f"step {k}: {t['name']} did not change in the update")
        pad = slice(wte["offset"] + V * C, wte["offset"] + wte["numel"])
        if any(g[pad]) or any(p[pad]):
            fail(f"step {k}: padded wte rows (>= V) are not zero")
        prev = p


if __name__ == "__main__":
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    main()
    for e in errors:
        print(f"check_reference_dump: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)
    print(f"check_reference_dump: {sys.argv[1]} complete and consistent")
