#!/usr/bin/env python3
"""Independent check of detrain's CPU GPT (fp32) and GPU GPT (bf16) against PyTorch (run
where PyTorch is installed; not part of CI, which has no PyTorch).

usage: torch_reference.py DIR [--device auto|cpu|cuda] [--dtype both|float64|float32]
                              [--free-running] [--json PATH]

DIR is written by build/tools/dump_reference (CPU, index "precision": "fp32" or absent)
or build/gpu-tests/dump_reference_gpu (GPU, "precision": "bf16"; see "GPU dumps" below);
tools/refdump/refdump.c and docs/torch-reference.md give the format. This script builds a GPT-2 from torch.nn pieces of its own (nn.Embedding,
nn.LayerNorm(eps=1e-5), nn.Linear for qkv/proj/fc/fcproj, an explicit causal masked
softmax, GELU(approximate='tanh'), output head tied to the token embedding, logits padded
to Vp of which only the first V columns enter the loss), loads detrain's initial weights,
and replays the dumped steps on the dumped tokens: forward, backward, clip_grad_norm_,
torch.optim.AdamW (same betas/eps; weight decay only on the tensors detrain decays, via two
parameter groups; the lr detrain used at each step). It does this in float64 and in
float32 (TF32 off on CUDA). Before each step the torch model is loaded with detrain's
parameters of that point, so every step's loss and gradients are compared at identical
weights (torch's AdamW state is its own, built from its own gradients). --free-running
lets torch follow its own trajectory instead; parameter differences then feed back into
later gradients (see "free-running" below).

Separately, "optimizer alone" applies torch's AdamW (float64) to detrain's own dumped
gradients from detrain's parameters: that checks clipping, bias correction, the decay mask
and the lr of detrain's update without any gradient noise, so its tolerance is tight.

Tolerances (all relative; ||.|| is the L2 norm over a whole tensor as detrain stores it,
e.g. all layers' qkvw at once; _t = torch, _dt = detrain):
  lr        |lr_py - lr_dt| <= 1e-6 lr      the schedule recomputed here in float64 from
                                             the dumped settings; detrain computes it in
                                             float32 (a few roundings of 6e-8 each).
  loss      |loss_t - loss_dt| <= 1e-5 |loss_t|
                                             fp32 forward: each logit carries ~1e-6 relative
                                             rounding; the mean over B*T rows averages it.
                                             Seen: 1e-9..1e-7.
  grads     ||g_t - g_dt|| / ||g_t|| <= 1e-4   per tensor. fp32 backward through L blocks
                                             with different summation orders gives ~1e-6
                                             (seen 1e-7..2e-6); a wrong sign, index, scale or
                                             missing term gives >= 1e-2. A tensor whose torch
                                             gradient is 0 must be exactly 0 in detrain too.
  grad norm |n_t - n_dt| <= 1e-5 n_t        the norm of all gradients before clipping, n_t
                                             summed in float64 from torch's gradients (torch's
                                             own float32 clip_grad_norm_ sum drifts ~3e-6).
                                             Also: detrain's reported norm against the float64
                                             norm of its own dumped gradients, <= 1e-6.
  updates   ||d_t - d_dt|| / ||d_t|| <= 1e-3  per tensor, d = parameters after the step minus
                                             before. Looser than the gradients on purpose:
                                             AdamW's first steps move each element by about
                                             lr * g / (|g| + eps), i.e. by ~lr*sign(g) whatever
                                             |g| is, so tiny gradients' relative rounding is
                                             amplified (seen up to ~1e-4). The key third of
                                             qkvb is left out of this check: its exact gradient
                                             is 0 (a key bias shifts every score of a softmax
                                             row equally), both sides hold pure rounding noise
                                             there, and Adam turns noise into ~lr-sized moves
                                             in unrelated directions. (Its gradient is still
                                             compared under "grads".) A real optimizer bug (no
                                             bias correction, decay on a LayerNorm weight, a
                                             wrong clip factor) gives >= 1e-2.
  params    ||p_t - p_dt|| <= 1e-6 ||p_t|| + 1e-3 ||p_t - p_ref||   per tensor after each
                                             update (same key-bias exclusion); p_ref is
                                             detrain's parameters before the step (free-running:
                                             the initial ones). The update tolerance applied to
                                             the distance moved, plus fp32 storage rounding of
                                             the weights (6e-8 per element).
  optimizer alone  ||p_py - p_dt|| <= 1e-5 ||d_dt|| + 2.4e-7 ||p_dt||   per tensor: the
                                             same gradients on both sides, so only detrain's
                                             fp32 arithmetic differs (a few roundings of the
                                             update, ~1e-7 of it, and the rounding of the stored
                                             weight, at most 2^-24 of it).
  padded    wte rows >= V: exactly zero in detrain's parameters and gradients, every step.
  init      LayerNorm weights 1, biases 0, wte/wpe/qkvw/fcw std 0.02 and attprojw/fcprojw
            std 0.02/sqrt(2L) within 5%, means within 5 standard errors of 0 (checked only
            for tensors of >= 4096 elements, where 5% is > 4.5 standard errors of the std).
float32 runs use the same tolerances: both sides then round at ~6e-8, in different orders.
free-running: parameter differences (~1e-4 of an update) change later gradients; seen up to
  2e-5 after 5 steps at lr 3e-3. With more steps or a larger lr this legitimately grows, so
  a failure there alone is not evidence of a bug; the default (synchronised) mode is the test.

GPU dumps ("precision": "bf16": bf16 activations and matmul inputs, fp32 master weights,
gradients and AdamW). Two torch references run in lockstep on --device (cuda on the GPU
machine), both loaded with detrain's parameters before every step: "fp32" (float32, TF32
off) and "bf16" (the same float32 model under torch.autocast(bfloat16): bf16 matmuls and
logits, fp32 LayerNorm, softmax, residual stream and loss). The distance between the two
is the "floor": what bf16 rounding alone does to torch's own numbers. detrain's recipe
differs from autocast (its residual stream and every activation are stored in bf16), so
it is compared with both. bf16 keeps 8 significant bits: each rounding is off by up to
2^-9 = 2e-3 relative, and a layer adds a few such roundings; the errors below are the sum
over B*T rows and L layers of such noise. Measured on an H200 (torch 2.11; gpt2-124m B4
T1024 3 steps, and small V300 T128 B8 5 steps, lr 3e-3), worst over steps and tensors:
detrain vs fp32 / detrain vs bf16 / floor. Tolerances, with margin over that:
  loss      rel <= 2e-3       seen 2.5e-4 / 5.8e-4 / 4.5e-4. bf16 logits; the mean over
                              B*T rows averages their rounding.
  grad norm rel <= 3e-2       seen 1.0e-3 / 7.5e-3 / 6.5e-3. (detrain's reported norm vs
                              the float64 norm of its dumped gradients: <= 1e-6 as above.)
  grads     ||g_t - g_dt|| / ||g_t|| <= 5e-2 per tensor (key third of qkvb excluded, as
                              for updates above: both sides hold pure noise there).
                              Seen 7.9e-3 / 2.0e-2 / 1.4e-2 (two independent bf16 recipes
                              differ by about sqrt(2) x the floor). A wrong sign, index,
                              scale or missing term gives >= 1e-1.
  grads against the floor  per tensor, detrain vs fp32 <= 3 x floor + 1e-3: detrain's bf16
                              is no further from fp32 than a few times torch's own bf16.
                              Seen: at most 1.64 x floor (0.47 of this limit); a gradient
                              scaled by 1.02 fails it (2.5 x its limit).
  updates   rel L2 per tensor <= 0.3   seen 0.107 / 0.088 / 0.107, all at step 1: AdamW's
                              first step moves each element by ~lr*sign(g), and bf16 noise
                              flips the sign of the smallest gradients (a fraction f of flips
                              gives ~2 sqrt(f)). A coarse check (lr x 2 gives 1, no bias
                              correction 0.55); the exact check of detrain's optimizer is
                              "optimizer alone" (same tolerance as fp32: its AdamW is fp32 on
                              both devices; seen 0.125 x).
  params    ||p_t - p_dt|| <= 1e-6 ||p_t|| + 0.3 ||p_t - p_before||   seen 0.36 x.
  padded wte rows and init: as above.
--json PATH writes the worst figures per reference and the floor (torch_check_gpu.sh).

Prints one table per dtype and a verdict. Exit 0: everything within tolerance; 1: some
comparison failed; 2: usage or input error (missing/short files, bad index)."""
import argparse
import json
import math
import os
import struct
import sys

TOL = {"lr": 1e-6, "loss": 1e-5, "grad": 1e-4, "grad_norm": 1e-5, "param": 1e-6,
       "update": 1e-3, "optim": 1e-5, "optim_store": 2.0 ** -22, "init_std": 0.05}
# bf16 (GPU) dumps against torch fp32 and torch bf16 autocast: see "GPU dumps" above
TOL_BF16 = {"loss": 2e-3, "grad": 5e-2, "grad_norm": 3e-2, "update": 0.3,
            "grad_vs_floor": 3.0, "grad_floor_abs": 1e-3}
NAMES = ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w",
         "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
# detrain name -> (attribute path in a Block, or None for model-level tensors)
BLOCK_ATTR = {"ln1w": ("ln1", "weight"), "ln1b": ("ln1", "bias"),
              "qkvw": ("qkv", "weight"), "qkvb": ("qkv", "bias"),
              "attprojw": ("proj", "weight"), "attprojb": ("proj", "bias"),
              "ln2w": ("ln2", "weight"), "ln2b": ("ln2", "bias"),
              "fcw": ("fc", "weight"), "fcb": ("fc", "bias"),
              "fcprojw": ("fcproj", "weight"), "fcprojb": ("fcproj", "bias")}
TOP_ATTR = {"wte": ("wte", "weight"), "wpe": ("wpe", "weight"),
            "lnfw": ("lnf", "weight"), "lnfb": ("lnf", "bias")}


def die(msg):
    print(f"torch_reference: {msg}", file=sys.stderr)
    sys.exit(2)


def f32_from_hex(h):
    return struct.unpack("<f", struct.pack("<I", int(h, 16)))[0]


def f64_from_hex(h):
    return struct.unpack("<d", struct.pack("<Q", int(h, 16)))[0]


# ---- the dump ---------------------------------------------------------------------------

def load_index(d):
    try:
        with open(os.path.join(d, "index.json")) as f:
            ix = json.load(f)
    except (OSError, ValueError) as e:
        die(f"{d}/index.json: {e} (write DIR with build/tools/dump_reference --out DIR)")
    if not isinstance(ix, dict):
        die(f"{d}/index.json: not a JSON object")
    if ix.get("format") != "detrain-torch-reference" or ix.get("version") != 1:
        die(f"{d}/index.json: format {ix.get('format')!r} version {ix.get('version')!r}; "
            "expected detrain-torch-reference version 1")
    need = ("model", "batch", "seq_len", "steps", "optimizer", "num_floats", "tensors", "step_log")
    missing = [k for k in need if k not in ix]
    if missing:
        die(f"{d}/index.json: missing {', '.join(missing)}")
    names = [t["name"] for t in ix["tensors"]]
    if names != NAMES:
        die(f"{d}/index.json: tensors {names}; expected {NAMES}")
    off = 0
    for t in ix["tensors"]:
        if t["offset"] != off or t["numel"] != math.prod(t["shape"]):
            die(f"{d}/index.json: tensor {t['name']} offset/numel/shape inconsistent")
        off += t["numel"]
    if off != ix["num_floats"]:
        die(f"{d}/index.json: tensors cover {off} floats, num_floats is {ix['num_floats']}")
    if len(ix["step_log"]) != ix["steps"]:
        die(f"{d}/index.json: step_log has {len(ix['step_log'])} entries, steps is {ix['steps']}")
    sizes = {"params_0.bin": 4 * off}
    for k in range(1, ix["steps"] + 1):
        sizes.update({f"tokens_{k}.bin": 8 * ix["batch"] * ix["seq_len"],
                      f"grads_{k}.bin": 4 * off, f"params_{k}.bin": 4 * off})
    for name, size in sizes.items():
        path = os.path.join(d, name)
        if not os.path.isfile(path) or os.path.getsize(path) != size:
            have = f"{os.path.getsize(path)} bytes" if os.path.isfile(path) else "missing"
            die(f"{path}: {have}, expected {size} bytes (an incomplete dump? write it again)")
    return ix


def read_raw(torch, d, name, count, dtype):
    path = os.path.join(d, name)
    try:
        with open(path, "rb") as f:
            raw = bytearray(f.read())
    except OSError as e:
        die(f"{path}: {e}")
    if len(raw) != 4 * count:
        die(f"{path}: {len(raw)} bytes, expected {4 * count}")
    t = torch.frombuffer(raw, dtype=dtype)
    if sys.byteorder != "little":
        t = t.view(torch.uint8).view(-1, 4).flip(1).contiguous().view(dtype).view(-1)
    return t.clone()


# ---- the model --------------------------------------------------------------------------

def build_model(torch, ix):
    nn, F = torch.nn, torch.nn.functional
    m = ix["model"]
    L, C, NH = m["num_layers"], m["channels"], m["num_heads"]
    V, Vp, maxT = m["vocab_size"], m["padded_vocab"], m["max_seq_len"]
    eps = m["layernorm_eps"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C, eps=eps)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C, eps=eps)
            self.fc = nn.Linear(C, 4 * C)
            self.fcproj = nn.Linear(4 * C, C)

        def attention(self, x):
            B, T, _ = x.shape
            HS = C // NH
            q, k, v = self.qkv(x).split(C, dim=2)  # [q | k | v], head h in cols h*HS..
            q, k, v = (z.view(B, T, NH, HS).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(HS))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            return (att @ v).transpose(1, 2).reshape(B, T, C)

        def forward(self, x):
            x = x + self.proj(self.attention(self.ln1(x)))
            return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(Vp, C)
            self.wpe = nn.Embedding(maxT, C)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.lnf = nn.LayerNorm(C, eps=eps)

        def forward(self, idx, targets):
            B, T = idx.shape
            pos = torch.arange(T, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.blocks:
                x = b(x)
            logits = self.lnf(x) @ self.wte.weight.t()  # tied head, (B, T, Vp)
            # detrain's cross-entropy reads only the first V columns (padded ones are out)
            return F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))

    return GPT()


def tensor_views(model, ix):
    """For each detrain tensor: the list of torch parameters that hold its slices (one per
    layer for per-layer tensors, in layer order), so flat <-> model is a concatenation."""
    out = {}
    for name in NAMES:
        if name in TOP_ATTR:
            mod, attr = TOP_ATTR[name]
            out[name] = [getattr(getattr(model, mod), attr)]
        else:
            mod, attr = BLOCK_ATTR[name]
            out[name] = [getattr(getattr(b, mod), attr) for b in model.blocks]
    return out


def split_flat(flat, ix):
    return {t["name"]: flat[t["offset"]:t["offset"] + t["numel"]] for t in ix["tensors"]}


def load_params(torch, views, ix, flat):
    with torch.no_grad():
        for name, chunk in split_flat(flat, ix).items():
            ps = views[name]
            for p, piece in zip(ps, chunk.view(len(ps), -1)):
                p.copy_(piece.view_as(p).to(p.dtype))


def gather(torch, views, what, on_device=False):
    """Model parameters (what='data') or gradients ('grad') as a flat float64 vector in
    detrain's layout (on the CPU, or on the model's device when on_device)."""
    parts = []
    for name in NAMES:
        for p in views[name]:
            t = p.detach() if what == "data" else p.grad
            parts.append((t if t is not None else torch.zeros_like(p)).reshape(-1))
    flat = torch.cat(parts).double()
    return flat if on_device else flat.cpu()


# ---- comparisons ------------------------------------------------------------------------

class Checker:
    def __init__(self):
        self.fail = []

    def check(self, label, ok, text):
        if not ok:
            self.fail.append(f"{label}: {text}")
        return ok


def relerr(a, b):
    """||a - b|| / ||a||, 0 when both are zero, inf when only a is zero."""
    na = a.norm().item()
    nd = (a - b).norm().item()
    if na == 0.0:
        return 0.0 if nd == 0.0 else math.inf
    return nd / na


def lr_schedule(o, it):
    lr, min_lr, w, dec = o["lr"], o["min_lr"], o["warmup_iters"], o["decay_iters"]
    if w > 0 and it <= w:
        return lr * it / w
    if it >= dec:
        return min_lr
    span = dec - w
    ratio = (it - w) / span if span > 0 else 1.0
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def check_init(torch, ix, p0, ck):
    L = ix["model"]["num_layers"]
    V, C = ix["model"]["vocab_size"], ix["model"]["channels"]
    rows = []
    for name, t in split_flat(p0, ix).items():
        if name == "wte":
            t = t[:V * C]
        if name.startswith("ln") and name.endswith("w"):
            ok = bool((t == 1).all())
            rows.append((name, "all 1", ok))
        elif name.endswith("b"):
            ok = bool((t == 0).all())
            rows.append((name, "all 0", ok))
        else:
            want = 0.02 / math.sqrt(2 * L) if name in ("attprojw", "fcprojw") else 0.02
            if t.numel() < 4096:
                rows.append((name, "std unchecked (< 4096 elements)", True))
                continue
            std, mean = t.std().item(), t.mean().item()
            ok = abs(std / want - 1) <= TOL["init_std"] and abs(mean) <= 5 * want / math.sqrt(t.numel())
            rows.append((name, f"std {std:.5f} (want {want:.5f}), mean {mean:+.2e}", ok))
        ck.check(f"init {name}", rows[-1][2], rows[-1][1])
    print("initial parameters (GPT-2 init contract):")
    for name, what, ok in rows:
        print(f"  {name:9s} {what:52s} {'ok' if ok else 'FAIL'}")


def optimizer_settings(ix):
    o = dict(ix["optimizer"])
    for k in ("lr", "min_lr", "beta1", "beta2", "eps", "weight_decay", "clip_grad"):
        o[k] = f32_from_hex(ix["optimizer"][k + "_hex"])  # the exact float32 detrain used
    return o


def make_adamw(torch, ix, o, views):
    decay = [p for t in ix["tensors"] if t["decay"] for p in views[t["name"]]]
    no_decay = [p for t in ix["tensors"] if not t["decay"] for p in views[t["name"]]]
    return torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"])


def clip_and_step(torch, opt, params, o, lr):
    if o["clip_grad"] > 0:
        torch.nn.utils.clip_grad_norm_(params, o["clip_grad"])
    for group in opt.param_groups:
        group["lr"] = lr
    opt.step()


def update_mask(torch, ix, name, device="cpu"):
    """Elements whose update is compared: all, except the key third of qkvb (exact
    gradient 0, see the header)."""
    if name != "qkvb":
        return None
    L, C = ix["model"]["num_layers"], ix["model"]["channels"]
    mask = torch.ones(L, 3 * C, dtype=torch.bool, device=device)
    mask[:, C:2 * C] = False
    return mask.view(-1)


def check_optimizer(torch, ix, d, ck, device="cpu"):
    """torch's AdamW (float64) on detrain's own gradients, from detrain's parameters."""
    n, o = ix["num_floats"], optimizer_settings(ix)
    p_dt = read_raw(torch, d, "params_0.bin", n, torch.float32).to(device).double()
    leaves = {t["name"]: torch.nn.Parameter(c.clone()) for t, c in
              zip(ix["tensors"], split_flat(p_dt, ix).values())}
    views = {k: [v] for k, v in leaves.items()}
    opt = make_adamw(torch, ix, o, views)
    params = list(leaves.values())
    worst = 0.0
    print("\n== optimizer alone: torch AdamW (float64) on detrain's gradients")
    for k in range(1, ix["steps"] + 1):
        g_dt = split_flat(read_raw(torch, d, f"grads_{k}.bin", n, torch.float32).to(device).double(), ix)
        p_next = read_raw(torch, d, f"params_{k}.bin", n, torch.float32).to(device).double()
        P_prev, P_next = split_flat(p_dt, ix), split_flat(p_next, ix)
        for name, p in leaves.items():
            p.grad = g_dt[name].clone()
        clip_and_step(torch, opt, params, o, f32_from_hex(ix["step_log"][k - 1]["lr_hex"]))
        bad = []
        for name, p in leaves.items():
            err = (p.detach() - P_next[name]).norm().item()
            lim = (TOL["optim"] * (P_next[name] - P_prev[name]).norm().item()
                   + TOL["optim_store"] * P_next[name].norm().item())
            r = err / lim if lim > 0 else (0.0 if err == 0 else math.inf)
            worst = max(worst, r)
            if not ck.check(f"optimizer step {k} {name}", r <= 1.0, f"error {r:.2f}x the tolerance"):
                bad.append(name)
            with torch.no_grad():
                p.copy_(P_next[name])  # stay on detrain's (fp32-rounded) weights
        print(f"step {k}: worst {max(0.0, worst):.3f}x tolerance{'  FAIL: ' + ' '.join(bad) if bad else ''}")
        p_dt = p_next
    print(f"worst optimizer alone: {worst:.3f}x its tolerance (limit 1)")
    return worst


def load_step(torch, ix, d, k, device):
    """Step k of a dump: detrain's lr, loss and grad norm, the batch (on `device`), and its
    gradients and parameters after the step (float64; on the CPU when device is None)."""
    n = ix["num_floats"]
    B, T, V = ix["batch"], ix["seq_len"], ix["model"]["vocab_size"]
    log = ix["step_log"][k - 1]
    tok = read_raw(torch, d, f"tokens_{k}.bin", 2 * B * T, torch.int32).long()
    if tok.min().item() < 0 or tok.max().item() >= V:
        die(f"{d}/tokens_{k}.bin: token outside [0, {V})")
    dev = device or "cpu"
    idx, tgt = tok[:B * T].view(B, T).to(dev), tok[B * T:].view(B, T).to(dev)
    g_dt = read_raw(torch, d, f"grads_{k}.bin", n, torch.float32).to(dev).double()
    p_dt = read_raw(torch, d, f"params_{k}.bin", n, torch.float32).to(dev).double()
    return (f32_from_hex(log["lr_hex"]), f64_from_hex(log["loss_hex"]),
            f64_from_hex(log["grad_norm_hex"]), idx, tgt, g_dt, p_dt)


def run(torch, ix, d, dtype, device, free, ck):
    tag = str(dtype).replace("torch.", "")
    torch.manual_seed(0)  # the constructor's own init is overwritten by detrain's weights
    model = build_model(torch, ix).to(device=device, dtype=dtype)
    views = tensor_views(model, ix)
    n, o = ix["num_floats"], optimizer_settings(ix)
    B, T, V, C = ix["batch"], ix["seq_len"], ix["model"]["vocab_size"], ix["model"]["channels"]
    p_dt_prev = read_raw(torch, d, "params_0.bin", n, torch.float32).double()
    load_params(torch, views, ix, p_dt_prev)
    p_init = p_dt_prev
    opt = make_adamw(torch, ix, o, views)
    worst = {"loss": 0.0, "grad": 0.0, "grad_norm": 0.0, "param": 0.0, "update": 0.0}
    print(f"\n== {tag} on {device}, "
          f"{'free-running' if free else 'from detrain parameters at every step'}")
    for k in range(1, ix["steps"] + 1):
        lr_dt, loss_dt, gn_dt, idx, tgt, g_dt, p_dt = load_step(torch, ix, d, k, None)
        idx, tgt = idx.to(device), tgt.to(device)

        lr_py = lr_schedule(o, k)
        ck.check(f"{tag} step {k} lr", abs(lr_py - lr_dt) <= TOL["lr"] * abs(lr_py),
                 f"detrain {lr_dt!r}, schedule {lr_py!r}")
        p_t_prev = gather(torch, views, "data")
        opt.zero_grad(set_to_none=False)
        loss = model(idx, tgt)
        loss.backward()
        loss_t = loss.item()
        g_t = gather(torch, views, "grad")
        clip_and_step(torch, opt, list(model.parameters()), o, lr_dt)
        p_t = gather(torch, views, "data")

        gn_t = g_t.norm().item()  # float64 sum of torch's gradients (before clipping)
        e_loss = abs(loss_t - loss_dt) / abs(loss_t)
        e_gn = abs(gn_t - gn_dt) / gn_t
        gn_own = g_dt.norm().item()  # detrain's dumped gradients, summed here in float64
        ck.check(f"{tag} step {k} loss", e_loss <= TOL["loss"], f"torch {loss_t!r} detrain {loss_dt!r}")
        ck.check(f"{tag} step {k} grad norm", e_gn <= TOL["grad_norm"], f"torch {gn_t!r} detrain {gn_dt!r}")
        ck.check(f"{tag} step {k} grad norm of dumped grads", abs(gn_own - gn_dt) <= 1e-6 * gn_own,
                 f"fp64 norm of grads_{k}.bin {gn_own!r}, detrain reported {gn_dt!r}")
        worst["loss"] = max(worst["loss"], e_loss)
        worst["grad_norm"] = max(worst["grad_norm"], e_gn)
        clipped = o["clip_grad"] > 0 and gn_dt > o["clip_grad"]
        print(f"step {k}: lr {lr_dt:.6g}  loss torch {loss_t:.9f} detrain {loss_dt:.9f} "
              f"(rel {e_loss:.1e})  grad norm torch {gn_t:.7g} detrain {gn_dt:.7g} "
              f"(rel {e_gn:.1e}){'  clipped' if clipped else ''}")
        print(f"  {'tensor':9s} {'|grad|':>10s} {'grad rel':>9s} {'update rel':>10s} {'param/tol':>9s}")
        G, Gd = split_flat(g_t, ix), split_flat(g_dt, ix)
        P, Pd = split_flat(p_t, ix), split_flat(p_dt, ix)
        Pp, Ppd = split_flat(p_t_prev, ix), split_flat(p_dt_prev, ix)
        Pref = split_flat(p_init if free else p_dt_prev, ix)
        for t in ix["tensors"]:
            name = t["name"]
            eg = relerr(G[name], Gd[name])
            sel = update_mask(torch, ix, name)
            pick = (lambda x: x) if sel is None else (lambda x: x[sel])
            pt, pd = pick(P[name]), pick(Pd[name])
            moved = (pt - pick(Pref[name])).norm().item()
            lim = TOL["param"] * pt.norm().item() + TOL["update"] * moved
            dp = (pt - pd).norm().item()
            ep = dp / lim if lim > 0 else (0.0 if dp == 0 else math.inf)
            eu = relerr(pt - pick(Pp[name]), pd - pick(Ppd[name]))
            ok_g = ck.check(f"{tag} step {k} grad {name}", eg <= TOL["grad"], f"rel L2 error {eg:.2e}")
            ok_p = ck.check(f"{tag} step {k} param {name}", ep <= 1.0, f"error {ep:.2f}x the tolerance")
            ok_u = ck.check(f"{tag} step {k} update {name}", eu <= TOL["update"], f"rel L2 error {eu:.2e}")
            worst["grad"] = max(worst["grad"], eg)
            worst["param"] = max(worst["param"], ep)
            worst["update"] = max(worst["update"], eu)
            mark = "" if ok_g and ok_p and ok_u else "  FAIL"
            print(f"  {name:9s} {G[name].norm().item():10.4g} {eg:9.1e} {eu:10.1e} {ep:9.2f}{mark}")
        wte_g, wte_p = Gd["wte"].view(-1, C)[V:], Pd["wte"].view(-1, C)[V:]
        if wte_g.numel():
            ck.check(f"{tag} step {k} padded wte rows", bool((wte_g == 0).all() and (wte_p == 0).all()),
                     "detrain's wte rows >= V are not all zero")
        if not free:
            load_params(torch, views, ix, p_dt)
        p_dt_prev = p_dt
    print(f"worst {tag}: loss {worst['loss']:.1e} (tol {TOL['loss']:.0e}), grads {worst['grad']:.1e} "
          f"(tol {TOL['grad']:.0e}), grad norm {worst['grad_norm']:.1e} (tol {TOL['grad_norm']:.0e}), "
          f"updates {worst['update']:.1e} (tol {TOL['update']:.0e}), params {worst['param']:.2f}x "
          "their tolerance (limit 1)")


# ---- GPU dumps: detrain's bf16 model against torch fp32 and torch bf16 autocast ---------

REFS = (("fp32", False), ("bf16", True))  # (reference, autocast to bfloat16)


def run_bf16(torch, ix, d, device, ck, summary):
    """Replays a bf16 GPU dump against two torch references in lockstep, both loaded with
    detrain's parameters before every step: fp32 (TF32 off) and bf16 autocast. Also
    measures the distance between the two references (the 'floor': what bf16 rounding
    alone does to torch's own numbers) and prints it beside detrain's errors."""
    n, o = ix["num_floats"], optimizer_settings(ix)
    B, T, V, C = ix["batch"], ix["seq_len"], ix["model"]["vocab_size"], ix["model"]["channels"]
    dev_type = torch.device(device).type
    torch.manual_seed(0)  # the constructors' own init is overwritten by detrain's weights
    models, views, opts = {}, {}, {}
    for ref, _ in REFS:
        models[ref] = build_model(torch, ix).to(device=device, dtype=torch.float32)
        views[ref] = tensor_views(models[ref], ix)
        opts[ref] = make_adamw(torch, ix, o, views[ref])
    p_dt_prev = read_raw(torch, d, "params_0.bin", n, torch.float32).to(device).double()
    for ref, _ in REFS:
        load_params(torch, views[ref], ix, p_dt_prev)
    keys = ("loss", "grad", "grad_norm", "update", "param")
    worst = {ref: dict.fromkeys(keys, 0.0) for ref, _ in REFS}
    worst["floor"] = dict.fromkeys(("loss", "grad", "grad_norm", "update", "grad_x_tol"), 0.0)
    worst_at = {}
    print(f"\n== detrain bf16 ({ix.get('device', '?')}) against torch fp32 (TF32 off) and torch "
          f"bf16 autocast on {device}, from detrain parameters at every step")
    for k in range(1, ix["steps"] + 1):
        lr_dt, loss_dt, gn_dt, idx, tgt, g_dt, p_dt = load_step(torch, ix, d, k, device)
        lr_py = lr_schedule(o, k)
        ck.check(f"step {k} lr", abs(lr_py - lr_dt) <= TOL["lr"] * abs(lr_py),
                 f"detrain {lr_dt!r}, schedule {lr_py!r}")
        gn_own = g_dt.norm().item()
        ck.check(f"step {k} grad norm of dumped grads", abs(gn_own - gn_dt) <= 1e-6 * gn_own,
                 f"fp64 norm of grads_{k}.bin {gn_own!r}, detrain reported {gn_dt!r}")
        res = {}
        for ref, autocast in REFS:
            opts[ref].zero_grad(set_to_none=False)
            with torch.autocast(device_type=dev_type, dtype=torch.bfloat16, enabled=autocast):
                loss = models[ref](idx, tgt)
            loss.backward()
            g = gather(torch, views[ref], "grad", on_device=True)
            clip_and_step(torch, opts[ref], list(models[ref].parameters()), o, lr_dt)
            res[ref] = {"loss": loss.item(), "g": g, "gn": g.norm().item(),
                        "p": gather(torch, views[ref], "data", on_device=True)}
        r32, rbf = res["fp32"], res["bf16"]
        line = f"step {k}: lr {lr_dt:.6g}  loss detrain {loss_dt:.7f}"
        for ref, _ in REFS:
            e_loss = abs(res[ref]["loss"] - loss_dt) / abs(res[ref]["loss"])
            e_gn = abs(res[ref]["gn"] - gn_dt) / res[ref]["gn"]
            ck.check(f"{ref} step {k} loss", e_loss <= TOL_BF16["loss"],
                     f"torch {res[ref]['loss']!r} detrain {loss_dt!r} (rel {e_loss:.2e})")
            ck.check(f"{ref} step {k} grad norm", e_gn <= TOL_BF16["grad_norm"],
                     f"torch {res[ref]['gn']!r} detrain {gn_dt!r} (rel {e_gn:.2e})")
            worst[ref]["loss"] = max(worst[ref]["loss"], e_loss)
            worst[ref]["grad_norm"] = max(worst[ref]["grad_norm"], e_gn)
            line += f"  {ref} {res[ref]['loss']:.7f} (rel {e_loss:.1e}, grad norm rel {e_gn:.1e})"
        f_loss = abs(rbf["loss"] - r32["loss"]) / abs(r32["loss"])
        f_gn = abs(rbf["gn"] - r32["gn"]) / r32["gn"]
        worst["floor"]["loss"] = max(worst["floor"]["loss"], f_loss)
        worst["floor"]["grad_norm"] = max(worst["floor"]["grad_norm"], f_gn)
        print(line + f"  floor: loss {f_loss:.1e}, grad norm {f_gn:.1e}"
              f"{'  clipped' if o['clip_grad'] > 0 and gn_dt > o['clip_grad'] else ''}")
        print(f"  {'tensor':9s} {'|grad|':>10s} | {'grad rel: fp32':>14s} {'bf16':>8s} {'floor':>8s} | "
              f"{'update rel: fp32':>16s} {'bf16':>8s} {'floor':>8s} | {'param/tol: fp32':>15s} {'bf16':>6s}")
        Gd, Pd, Ppd = split_flat(g_dt, ix), split_flat(p_dt, ix), split_flat(p_dt_prev, ix)
        G = {ref: split_flat(res[ref]["g"], ix) for ref, _ in REFS}
        P = {ref: split_flat(res[ref]["p"], ix) for ref, _ in REFS}
        for t in ix["tensors"]:
            name = t["name"]
            sel = update_mask(torch, ix, name, device)
            pick = (lambda x: x) if sel is None else (lambda x: x[sel])
            gd, ud = pick(Gd[name]), pick(Pd[name] - Ppd[name])
            row, bad = {}, []
            for ref, _ in REFS:
                g, pt = pick(G[ref][name]), pick(P[ref][name])
                u = pt - pick(Ppd[name])
                eg, eu = relerr(g, gd), relerr(u, ud)
                lim = TOL["param"] * pt.norm().item() + TOL_BF16["update"] * u.norm().item()
                dp = (pt - pick(Pd[name])).norm().item()
                ep = dp / lim if lim > 0 else (0.0 if dp == 0 else math.inf)
                row[ref] = (eg, eu, ep)
                for what, e, ok in (("grad", eg, eg <= TOL_BF16["grad"]),
                                    ("update", eu, eu <= TOL_BF16["update"]), ("param", ep, ep <= 1.0)):
                    if not ck.check(f"{ref} step {k} {what} {name}", ok,
                                    f"{'error %.2fx the tolerance' % e if what == 'param' else 'rel L2 error %.2e' % e}"):
                        bad.append(f"{ref} {what}")
                    if e > worst[ref][what]:
                        worst[ref][what] = e
                        worst_at[(ref, what)] = f"step {k} {name}"
            fg = relerr(pick(G["fp32"][name]), pick(G["bf16"][name]))
            fu = relerr(pick(P["fp32"][name] - Ppd[name]), pick(P["bf16"][name] - Ppd[name]))
            # detrain's bf16 may be no further from fp32 than a few times torch's own bf16
            lim_f = TOL_BF16["grad_vs_floor"] * fg + TOL_BF16["grad_floor_abs"]
            xf = row["fp32"][0] / lim_f
            if not ck.check(f"fp32 step {k} grad {name} against the floor", xf <= 1.0,
                            f"rel L2 error {row['fp32'][0]:.2e} > {TOL_BF16['grad_vs_floor']:g} x torch "
                            f"bf16's own {fg:.2e} + {TOL_BF16['grad_floor_abs']:g}"):
                bad.append("fp32 grad against the floor")
            worst["floor"]["grad_x_tol"] = max(worst["floor"]["grad_x_tol"], xf)
            worst["floor"]["grad"] = max(worst["floor"]["grad"], fg)
            worst["floor"]["update"] = max(worst["floor"]["update"], fu)
            print(f"  {name:9s} {G['fp32'][name].norm().item():10.4g} | {row['fp32'][0]:14.2e} "
                  f"{row['bf16'][0]:8.2e} {fg:8.2e} | {row['fp32'][1]:16.2e} {row['bf16'][1]:8.2e} "
                  f"{fu:8.2e} | {row['fp32'][2]:15.3f} {row['bf16'][2]:6.3f}"
                  f"{'  FAIL: ' + ', '.join(bad) if bad else ''}")
        wte_g, wte_p = Gd["wte"].view(-1, C)[V:], Pd["wte"].view(-1, C)[V:]
        if wte_g.numel():
            ck.check(f"step {k} padded wte rows", bool((wte_g == 0).all() and (wte_p == 0).all()),
                     "detrain's wte rows >= V are not all zero")
        for ref, _ in REFS:
            load_params(torch, views[ref], ix, p_dt)
        p_dt_prev = p_dt
    for ref, _ in REFS:
        w = worst[ref]
        print(f"worst detrain vs torch {ref}: loss {w['loss']:.2e} (tol {TOL_BF16['loss']:.0e}), "
              f"grads {w['grad']:.2e} at {worst_at.get((ref, 'grad'), '-')} (tol {TOL_BF16['grad']:.0e}), "
              f"grad norm {w['grad_norm']:.2e} (tol {TOL_BF16['grad_norm']:.0e}), updates {w['update']:.2e} "
              f"at {worst_at.get((ref, 'update'), '-')} (tol {TOL_BF16['update']:.0e}), params "
              f"{w['param']:.3f}x their tolerance (limit 1)")
    w = worst["floor"]
    print(f"floor (torch bf16 vs torch fp32): loss {w['loss']:.2e}, grads {w['grad']:.2e}, "
          f"grad norm {w['grad_norm']:.2e}, updates {w['update']:.2e}; detrain's grads against "
          f"the floor: {w['grad_x_tol']:.3f}x their tolerance (limit 1)")
    summary.update({"detrain_vs_" + ref: worst[ref] for ref, _ in REFS})
    summary["torch_bf16_vs_fp32"] = worst["floor"]
    summary["worst_at"] = {f"{r} {w}": v for (r, w), v in worst_at.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--dtype", default="both", choices=["both", "float64", "float32"])
    ap.add_argument("--free-running", action="store_true",
                    help="let torch follow its own parameters instead of detrain's")
    ap.add_argument("--json", metavar="PATH",
                    help="bf16 (GPU) dumps: also write the worst figures per reference to PATH")
    a = ap.parse_args()
    ix = load_index(a.dir)
    precision = ix.get("precision", "fp32")  # dumps older than the GPU dump say nothing: fp32
    if precision not in ("fp32", "bf16"):
        die(f"{a.dir}/index.json: precision {precision!r}; expected fp32 or bf16")
    if precision == "bf16" and (a.dtype != "both" or a.free_running):
        die("--dtype and --free-running apply to fp32 (CPU) dumps; a bf16 dump is always "
            "compared with torch fp32 and torch bf16 autocast, synchronised")
    if a.json and precision != "bf16":
        die("--json is written for bf16 (GPU) dumps only")
    try:
        import torch
    except ImportError:
        die("PyTorch is not installed here; run this on a machine that has it")
    # True fp32 matmuls on the GPU (TF32 would add ~1e-3 relative error)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = ("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device
    m = ix["model"]
    print(f"detrain dump {a.dir}: L{m['num_layers']} C{m['channels']} NH{m['num_heads']} "
          f"V{m['vocab_size']} (Vp {m['padded_vocab']}) T{ix['seq_len']} B{ix['batch']}, "
          f"{ix['steps']} steps, seed {ix['seed']}; torch {torch.__version__} on {device}")
    ck = Checker()
    p0 = read_raw(torch, a.dir, "params_0.bin", ix["num_floats"], torch.float32).double()
    check_init(torch, ix, p0, ck)
    if precision == "bf16":
        info = ix.get("device_info") or {}
        print(f"dump made on {info.get('gpu', ix.get('device', '?'))}, attention "
              f"{info.get('attention', '?')}, precision bf16")
        summary = {"dump": a.dir, "model": ix["model"], "batch": ix["batch"], "seq_len": ix["seq_len"],
                   "steps": ix["steps"], "attention": info.get("attention"), "torch": torch.__version__,
                   "tolerances": TOL_BF16}
        summary["optimizer_alone_x_tol"] = check_optimizer(torch, ix, a.dir, ck, device)
        run_bf16(torch, ix, a.dir, device, ck, summary)
        summary["failures"] = len(ck.fail)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(summary, f, indent=1)
        report(ck)
        return
    dtypes = {"both": [torch.float64, torch.float32], "float64": [torch.float64],
              "float32": [torch.float32]}[a.dtype]
    for dt in dtypes:
        run(torch, ix, a.dir, dt, device, a.free_running, ck)
    report(ck)


def report(ck):
    """Prints the verdict and exits 1 on any failure."""
    if ck.fail:
        print(f"\nFAIL: {len(ck.fail)} comparison(s) out of tolerance:")
        for f in ck.fail[:50]:
            print(f"  {f}")
        if len(ck.fail) > 50:
            print(f"  ... and {len(ck.fail) - 50} more")
        sys.exit(1)
    print("\nPASS: detrain matches PyTorch within every stated tolerance")


if __name__ == "__main__":
    main()
