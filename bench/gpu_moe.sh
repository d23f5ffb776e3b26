#!/usr/bin/env bash
# The MoE kernels' benchmark on one GPU (needs a CUDA GPU and `make cuda`): one MoE layer at
# GPT-2-small width (C 768, F 3072), 8 experts, top-2, N = 16 x 1024 tokens, the router
# skewed 60% to one expert; per range (router, route, dispatch, grouped GEMMs, combine, aux,
# dprob, router backward) det against fast, the block's forward + backward and its tax.
# Then the same with capacity 1.25 (drops) and with 90% skew. Output: bench/logs/gpu_moe.txt.
set -eu
cd "$(dirname "$0")/.."
bin=build/gpu-tests/bench_moe
[ -x "$bin" ] || { echo "bench/gpu_moe.sh: $bin missing: run 'make cuda' first" >&2; exit 1; }
mkdir -p bench/logs
{
  "$bin" 16384 8 2 60 0
  "$bin" 16384 8 2 60 1.25
  "$bin" 16384 8 2 90 0
} 2>&1 | tee bench/logs/gpu_moe.txt
