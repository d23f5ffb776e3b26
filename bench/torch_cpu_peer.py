"""PyTorch peer for the CPU benchmark: the same GPT-2 family model detrain trains (pre-LN,
causal attention via scaled_dot_product_attention, GELU tanh, tied head, vocab padded to a
multiple of 128), fp32, AdamW, on the CPU with a fixed thread count. Prints the median
training-step time and tokens/s for eager mode, eager with
torch.use_deterministic_algorithms(True), and torch.compile when it works here.

Usage: python3 bench/torch_cpu_peer.py [--threads 2] [--steps 30] [--L 4 --C 256 --NH 4
        --V 512 --T 256 --B 8]   (needs PyTorch; not part of the test suite)"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fcproj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, self.NH, C // self.NH).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V, T):
        super().__init__()
        self.V = V
        Vp = (V + 127) // 128 * 128
        self.wte, self.wpe = nn.Embedding(Vp, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.blocks:
            x = b(x)
        logits = self.lnf(x) @ self.wte.weight.t()
        return F.cross_entropy(logits[..., : self.V].reshape(-1, self.V), targets.reshape(-1))


def bench(a, mode):
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(mode == "eager-det")
    model = GPT(a.L, a.C, a.NH, a.V, a.T)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    step_fn = model
    if mode == "compile":
        step_fn = torch.compile(model)
    idx = torch.randint(0, a.V, (a.B, a.T))
    tgt = torch.randint(0, a.V, (a.B, a.T))
    times = []
    for s in range(a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_fn(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times[5:]) * 1e3
    return ms, a.B * a.T / ms * 1e3


def main():
    p = argparse.ArgumentParser()
    for k, v in dict(threads=2, steps=30, L=4, C=256, NH=4, V=512, T=256, B=8).items():
        p.add_argument("--" + k, type=int, default=v)
    p.add_argument("--modes", default="eager,eager-det,compile")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print("torch %s, %d threads, L%d C%d NH%d V%d T%d B%d fp32" %
          (torch.__version__, a.threads, a.L, a.C, a.NH, a.V, a.T, a.B))
    for mode in a.modes.split(","):
        try:
            ms, tps = bench(a, mode)
            print("%-10s %9.2f ms/step %9.0f tok/s" % (mode, ms, tps))
        except Exception as e:  # torch.compile needs a working toolchain; report, go on
            print("%-10s failed: %s" % (mode, str(e).splitlines()[0][:120]))


if __name__ == "__main__":
    main()
