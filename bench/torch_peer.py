#!/usr/bin/env python3
"""PyTorch peer of `detrain bench`: the same GPT-2 training step (--model: 124M L12 d768 H12,
350M L24 d1024 H16, 774M L36 d1280 H20, 1558M L48 d1600 H25; vocab 50257 padded to 50304,
T=1024, --micro-batch-size, default 16; bf16 autocast with fp32 master weights,
fused AdamW, tied head, causal SDPA) in four configurations, each in its own process:
eager / torch.compile x default / torch.use_deterministic_algorithms(True).
Prints one JSON line per configuration ("PEER {...}") and a table; --json writes them.
A configuration's step time is the faster of the median of synchronised steps and the mean
of the same number of steps run back to back (one synchronisation at the end).
usage: bench/torch_peer.py [--model gpt2-124m] [--micro-batch-size 16] [--steps 10] [--warmup 3]
                           [--json FILE] [--modes eager,compile] [--det 0,1]
"""
import argparse, json, os, subprocess, sys, time


SIZES = {"gpt2-124m": (12, 768, 12), "gpt2-350m": (24, 1024, 16), "gpt2-774m": (36, 1280, 20),
         "gpt2-1558m": (48, 1600, 25)}


def worker(mode, det, steps, warmup, model_name, B):
    if det:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    det_note = "off"
    if det:
        try:
            torch.use_deterministic_algorithms(True)
            det_note = "strict"
        except Exception:
            torch.use_deterministic_algorithms(True, warn_only=True)
            det_note = "warn_only"
    torch.manual_seed(1234)
    L, C, NH = SIZES[model_name]
    V, Vp, T = 50257, 50304, 1024

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            sh = lambda t: t.view(B, T, NH, C // NH).transpose(1, 2)
            y = F.scaled_dot_product_attention(sh(q), sh(k), sh(v), is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(T, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.lnf = nn.LayerNorm(C)

        def forward(self, idx, tgt):
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for b in self.h:
                x = b(x)
            logits = F.linear(self.lnf(x), self.wte.weight)
            return F.cross_entropy(logits.view(-1, Vp).float(), tgt.view(-1))

    dev = "cuda"
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    step_model = torch.compile(model) if mode == "compile" else model
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randint(0, V, (B, T + 1), generator=g).to(dev)
    idx, tgt = x[:, :-1].contiguous(), x[:, 1:].contiguous()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = step_model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.time()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.time() - t0
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        a = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - a) * 1e3)
    times.sort()
    med = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
    # The same steps back to back, one synchronisation at the end: the device never waits
    # for the host between steps (as in a training loop; `detrain bench` times its steps end
    # to end likewise). The peer's figure is the faster of the two.
    torch.cuda.synchronize()
    a = time.perf_counter()
    for _ in range(steps):
        loss = step()
    torch.cuda.synchronize()
    back_to_back = (time.perf_counter() - a) * 1e3 / steps
    best = min(med, back_to_back)
    out = {"mode": mode, "deterministic": det, "det_setting": det_note, "step_ms": best,
           "step_ms_synced_median": med, "step_ms_back_to_back": back_to_back,
           "tok_per_s": B * T / (best / 1e3), "warmup_s": warm_s, "loss": float(loss),
           "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(), "model": model_name, "B": B}
    print("PEER " + json.dumps(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--worker")
    ap.add_argument("--det", default="0,1")
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(SIZES))
    ap.add_argument("--micro-batch-size", type=int, default=16)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker, a.det == "1", a.steps, a.warmup, a.model, a.micro_batch_size)
        return
    res = []
    for mode in a.modes.split(","):
        for det in [int(d) for d in a.det.split(",")]:
            cmd = [sys.executable, __file__, "--worker", mode, "--det", str(det), "--steps", str(a.steps),
                   "--warmup", str(a.warmup), "--model", a.model, "--micro-batch-size", str(a.micro_batch_size)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            line = [l for l in p.stdout.splitlines() if l.startswith("PEER ")]
            if p.returncode or not line:
                print(f"peer {mode} det={det} failed (rc {p.returncode}):\n{p.stderr[-2000:]}", flush=True)
                continue
            r = json.loads(line[0][5:])
            res.append(r)
            print(line[0], flush=True)
    print(f"\n{a.model} B={a.micro_batch_size}\n{'peer':<22}{'step ms':>10}{'tok/s':>12}{'det setting':>14}{'synced':>10}{'back to back':>14}")
    for r in res:
        name = f"{r['mode']} {'det' if r['deterministic'] else 'default'}"
        print(f"{name:<22}{r['step_ms']:>10.2f}{r['tok_per_s']:>12.0f}{r['det_setting']:>14}"
              f"{r['step_ms_synced_median']:>10.2f}{r['step_ms_back_to_back']:>14.2f}")
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
