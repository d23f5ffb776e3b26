#!/usr/bin/env python3
"""Cross-check detrain's GPT-2 against Hugging Face `transformers` (run on a machine with
PyTorch and transformers; not part of CI).

Subcommands
  check DIR [--logits FILE]
      Loads DIR with GPT2LMHeadModel.from_pretrained (DIR holds the model.safetensors and
      config.json that detrain exported), runs the token ids of DIR/logits_check.bin (or
      FILE) through it and compares its logits and loss with the values detrain wrote.
  make-init DIR [--seed S --n-layer L --n-head NH --n-embd C --vocab-size V
                 --n-positions P --batch B --seq T]
      Saves a randomly initialised GPT-2 (every parameter, biases and LayerNorm included,
      perturbed so a misplaced tensor cannot go unnoticed) to DIR with save_pretrained
      (safetensors), for `detrain --init-from-hf DIR`, and writes DIR/logits_check.bin
      holding seeded random tokens and the logits/loss transformers computes for them.
  compare-files REF OTHER
      Compares two logits check files on the same tokens (the reverse direction: REF from
      make-init, OTHER written by detrain after importing DIR).

logits_check.bin (little-endian; written by dt_logits_check_write, src/ckpt/hf_gpt2.h):
  0 char[8] "DTLOGIT1" | 8 u32 version=1 | 12 u32 B | 16 u32 T | 20 u32 V | 24 f64 loss
  32 i32 inputs[B*T] | i32 targets[B*T] | f32 logits[B*T*V]
  loss = mean over B*T of -log softmax(logits[b,t])[targets[b,t]].

Tolerance (both fp32, different summation orders, so not bitwise):
  max |logit_a - logit_b| <= --logit-tol * max(1, max |logit_ref|)   (default 1e-4)
  |loss_a - loss_b|       <= --loss-tol  * max(1, |loss_ref|)        (default 1e-5)
TF32 is switched off so the GPU matmuls are true fp32. Exit 0: match, 1: mismatch,
2: usage or input error.

Recorded result (tools/hf_check_gpu.sh, 2026-11-30, H200, torch 2.11.0+cu130,
transformers 5.17.0; detrain forward on the CPU, fp32; both directions pass):
  L=2 NH=4 C=64 V=300, B=2 T=32:          max |dlogit| 9.5e-07 (max |logit| 1.86),
                                          |dloss| 2.5e-08 (loss 5.867230)
  GPT-2 124M shapes (L=12 C=768 V=50257), B=1 T=64, random weights:
                                          max |dlogit| 1.4e-05 (max |logit| 7.58),
                                          |dloss| 1.5e-08 (loss 11.641070)
The weights themselves round-trip bit for bit (tests/ckpt/test_hf_gpt2.c); the residual
logit difference is fp32 summation order (CPU OpenBLAS vs cuBLAS)."""
import argparse
import struct
import sys

MAGIC = b"DTLOGIT1"


def read_check(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 32 or raw[:8] != MAGIC:
        sys.exit(f"hf_compare: {path}: not a logits check file (magic {MAGIC!r})")
    version, B, T, V = struct.unpack_from("<4I", raw, 8)
    (loss,) = struct.unpack_from("<d", raw, 24)
    BT = B * T
    want = 32 + 8 * BT + 4 * BT * V
    if version != 1 or len(raw) != want:
        sys.exit(f"hf_compare: {path}: version {version}, {len(raw)} bytes; expected v1, {want} bytes")
    inputs = list(struct.unpack_from(f"<{BT}i", raw, 32))
    targets = list(struct.unpack_from(f"<{BT}i", raw, 32 + 4 * BT))
    return {"B": B, "T": T, "V": V, "loss": loss, "inputs": inputs, "targets": targets,
            "logits_raw": raw[32 + 8 * BT:]}


def write_check(path, B, T, V, loss, inputs, targets, logits_f32_bytes):
    with open(path, "wb") as f:
        f.write(MAGIC + struct.pack("<4Id", 1, B, T, V, loss))
        f.write(struct.pack(f"<{B * T}i", *inputs))
        f.write(struct.pack(f"<{B * T}i", *targets))
        f.write(logits_f32_bytes)


def torch_setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    return torch, dev


def hf_forward(torch, dev, model, B, T, inputs, targets):
    ids = torch.tensor(inputs, dtype=torch.long, device=dev).view(B, T)
    tg = torch.tensor(targets, dtype=torch.long, device=dev).view(-1)
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()  # (B, T, V)
    V = logits.shape[-1]
    loss = torch.nn.functional.cross_entropy(logits.double().view(-1, V), tg).item()
    return logits.cpu().contiguous(), loss


def compare(torch, ref_logits, ref_loss, got_logits, got_loss, args, what):
    diff = (ref_logits.double() - got_logits.double()).abs()
    scale = max(1.0, ref_logits.double().abs().max().item())
    worst = diff.max().item()
    at = divmod(int(diff.argmax().item()), ref_logits.shape[-1])
    loss_err = abs(ref_loss - got_loss)
    ok_logits = worst <= args.logit_tol * scale
    ok_loss = loss_err <= args.loss_tol * max(1.0, abs(ref_loss))
    print(f"{what}: max |dlogit| = {worst:.3e} at (row {at[0]}, vocab {at[1]}); max |logit| = {scale:.3f}; "
          f"tolerance {args.logit_tol * scale:.3e} -> {'ok' if ok_logits else 'MISMATCH'}")
    print(f"{what}: loss ref {ref_loss:.9f} other {got_loss:.9f} |dloss| = {loss_err:.3e}; "
          f"tolerance {args.loss_tol * max(1.0, abs(ref_loss)):.3e} -> {'ok' if ok_loss else 'MISMATCH'}")
    return ok_logits and ok_loss


def to_tensor(torch, chk):
    return torch.frombuffer(bytearray(chk["logits_raw"]), dtype=torch.float32).view(chk["B"], chk["T"], chk["V"])


def cmd_check(args):
    torch, dev = torch_setup()
    from transformers import GPT2LMHeadModel
    chk = read_check(args.logits or f"{args.dir}/logits_check.bin")
    try:
        model = GPT2LMHeadModel.from_pretrained(args.dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:  # transformers before `dtype` replaced `torch_dtype`
        model = GPT2LMHeadModel.from_pretrained(args.dir, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.to(dev).eval()
    if model.config.vocab_size != chk["V"]:
        sys.exit(f"hf_compare: vocab_size {model.config.vocab_size} in config.json, {chk['V']} in the logits file")
    logits, loss = hf_forward(torch, dev, model, chk["B"], chk["T"], chk["inputs"], chk["targets"])
    ok = compare(torch, logits, loss, to_tensor(torch, chk), chk["loss"], args,
                 "transformers vs detrain")
    return 0 if ok else 1


def cmd_make_init(args):
    torch, dev = torch_setup()
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(args.seed)
    cfg = GPT2Config(vocab_size=args.vocab_size, n_positions=args.n_positions, n_embd=args.n_embd,
                     n_layer=args.n_layer, n_head=args.n_head, activation_function="gelu_new",
                     layer_norm_epsilon=1e-5, tie_word_embeddings=True, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=args.vocab_size - 1, eos_token_id=args.vocab_size - 1)
    cfg._attn_implementation = "eager"
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model = model.to(dev).eval()
    try:
        model.save_pretrained(args.dir, safe_serialization=True)
    except TypeError:  # newer transformers always write safetensors
        model.save_pretrained(args.dir)
    g = torch.Generator().manual_seed(args.seed + 1)
    B, T = args.batch, args.seq
    toks = torch.randint(0, args.vocab_size, (B, T + 1), generator=g)
    inputs = toks[:, :T].reshape(-1).tolist()
    targets = toks[:, 1:].reshape(-1).tolist()
    logits, loss = hf_forward(torch, dev, model, B, T, inputs, targets)
    flat = logits.reshape(-1).tolist()
    write_check(f"{args.dir}/logits_check.bin", B, T, args.vocab_size, loss, inputs, targets,
                struct.pack(f"<{len(flat)}f", *flat))
    print(f"make-init: wrote {args.dir} (L={args.n_layer} NH={args.n_head} C={args.n_embd} "
          f"V={args.vocab_size} P={args.n_positions}), tokens B={B} T={T}, transformers loss {loss:.9f}")
    return 0


def cmd_compare_files(args):
    import torch
    ref, other = read_check(args.ref), read_check(args.other)
    for k in ("B", "T", "V", "inputs", "targets"):
        if ref[k] != other[k]:
            print(f"compare-files: {k} differs between the two files")
            return 1
    ok = compare(torch, to_tensor(torch, ref), ref["loss"], to_tensor(torch, other), other["loss"], args,
                 f"{args.ref} vs {args.other}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logit-tol", type=float, default=1e-4)
    ap.add_argument("--loss-tol", type=float, default=1e-5)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--logits")
    m = sub.add_parser("make-init")
    m.add_argument("dir")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--n-layer", type=int, default=2)
    m.add_argument("--n-head", type=int, default=4)
    m.add_argument("--n-embd", type=int, default=64)
    m.add_argument("--vocab-size", type=int, default=300)
    m.add_argument("--n-positions", type=int, default=64)
    m.add_argument("--batch", type=int, default=2)
    m.add_argument("--seq", type=int, default=32)
    f = sub.add_parser("compare-files")
    f.add_argument("ref")
    f.add_argument("other")
    args = ap.parse_args()
    return {"check": cmd_check, "make-init": cmd_make_init, "compare-files": cmd_compare_files}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
