#!/usr/bin/env python3
"""Independent safetensors reader (Python standard library only) used by
tests/ckpt/test_st_pyspec.sh to check files detrain wrote against the format spec:
8-byte little-endian header length, a JSON object header that starts with '{' and is
padded only with trailing spaces, data starting 8-byte aligned, known dtypes, offsets that
tile the data buffer contiguously with no hole, overlap or trailing byte, and
prod(shape) * dtype size == end - begin.

usage: st_spec_check.py FILE.safetensors [--expect-sample]
       st_spec_check.py --hf-dir DIR        (also checks names/shapes against config.json)
Exits non-zero with a message on the first violation."""
import json
import struct
import sys

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
         "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}


def fail(msg):
    print("st_spec_check: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def no_dupes(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        fail("duplicate key in header")
    return dict(pairs)


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        fail(f"{path}: header length {n} exceeds file")
    if (8 + n) % 8 != 0:
        fail(f"{path}: data does not start 8-byte aligned (8 + {n})")
    text = raw[8:8 + n].decode("utf-8")
    if not text.startswith("{"):
        fail(f"{path}: header does not start with '{{'")
    stripped = text.rstrip(" ")
    if not stripped.endswith("}"):
        fail(f"{path}: header padded with something other than spaces")
    header = json.loads(stripped, object_pairs_hook=no_dupes)
    data = raw[8 + n:]
    meta = header.pop("__metadata__", None)
    if meta is not None and not all(isinstance(v, str) for v in meta.values()):
        fail(f"{path}: __metadata__ values must be strings")
    spans = []
    for name, e in header.items():
        if set(e) != {"dtype", "shape", "data_offsets"}:
            fail(f"{path}: {name}: fields {sorted(e)}")
        if e["dtype"] not in SIZES:
            fail(f"{path}: {name}: unknown dtype {e['dtype']}")
        numel = 1
        for d in e["shape"]:
            if not isinstance(d, int) or isinstance(d, bool) or d < 0:
                fail(f"{path}: {name}: bad dim {d!r}")
            numel *= d
        b, en = e["data_offsets"]
        if numel * SIZES[e["dtype"]] != en - b:
            fail(f"{path}: {name}: shape {e['shape']} x {e['dtype']} != offsets [{b}, {en}]")
        spans.append((b, en, name))
    pos = 0
    for b, en, name in sorted(spans):
        if b != pos:
            fail(f"{path}: {name}: begins at {b}, expected {pos} (not contiguous)")
        pos = en
    if pos != len(data):
        fail(f"{path}: tensors cover {pos} bytes of a {len(data)}-byte data buffer")
    return meta, header, data


def tensor(header, data, name, fmt):
    b, en = header[name]["data_offsets"]
    k = (en - b) // struct.calcsize(fmt)
    return list(struct.unpack("<%d%s" % (k, fmt), data[b:en]))


def check_sample(path):
    meta, header, data = read(path)
    if meta != {"format": "pt", "note": "detrain test"}:
        fail(f"sample metadata {meta}")
    order = [n for n, _ in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"])]
    if order != ["w", "b.bf16", "step", "empty", 'filled "q"\u00e9']:
        fail(f"sample tensor order {order}")
    if header["w"]["shape"] != [2, 3] or header["step"]["shape"] != []:
        fail("sample shapes")
    w = tensor(header, data, "w", "f")
    if w[:5] != [1.0, -2.0, 3.5, 0.0, -0.0] or struct.pack("<f", w[5]) != struct.pack("<f", 1e-30):
        fail(f"sample w values {w}")
    if tensor(header, data, "step", "q") != [-1234567890123]:
        fail("sample step value")
    if tensor(header, data, 'filled "q"\u00e9', "f") != [k * 0.5 for k in range(7)]:
        fail("sample filled values")
    if tensor(header, data, "b.bf16", "H") != [0x3f80, 0x4000, 0xbf80, 0x7f80, 0x0001]:
        fail("sample bf16 values")


def check_hf_dir(d):
    with open(d + "/config.json") as f:
        cfg = json.load(f)
    for k, want in [("model_type", "gpt2"), ("activation_function", "gelu_new"),
                    ("tie_word_embeddings", True), ("architectures", ["GPT2LMHeadModel"])]:
        if cfg.get(k) != want:
            fail(f"config.json {k} = {cfg.get(k)!r}, expected {want!r}")
    C, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    if cfg["n_ctx"] != P or C % cfg["n_head"] != 0:
        fail("config.json n_ctx / n_head")
    meta, header, _ = read(d + "/model.safetensors")
    if meta != {"format": "pt"}:
        fail(f"metadata {meta}")
    want = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
            "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for i in range(L):
        h = f"transformer.h.{i}."
        want.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C],
                     h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
                     h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                     h + "ln_2.weight": [C], h + "ln_2.bias": [C],
                     h + "mlp.c_fc.weight": [C, 4 * C], h + "mlp.c_fc.bias": [4 * C],
                     h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C]})
    got = {n: e["shape"] for n, e in header.items()}
    if got != want:
        fail(f"names/shapes differ: missing {sorted(set(want) - set(got))[:5]}, "
             f"extra {sorted(set(got) - set(want))[:5]}, "
             f"wrong {[n for n in want if n in got and got[n] != want[n]][:5]}")
    if any(e["dtype"] != "F32" for e in header.values()):
        fail("a tensor is not F32")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--hf-dir":
        check_hf_dir(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[2] == "--expect-sample":
        check_sample(sys.argv[1])
    elif len(sys.argv) == 2:
        read(sys.argv[1])
    else:
        fail(__doc__)
    print("st_spec_check: ok")
