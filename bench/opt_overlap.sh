#!/usr/bin/env bash
# One device call for the optimizer update overlapping the next forward (DT_OPT_OVERLAP):
# the AdamW op check (bench_ops), the model graph test (overlap on/off/launches, bytes),
# the model replays, gpu_e2e.sh (run o compares DT_OPT_OVERLAP=off), then the step bench
# with the overlap on and off, interleaved, two rounds.
# usage (on the GPU machine, binaries unpacked in $C): C=build/carry bash bench/opt_overlap.sh
set -u
C=${C:-build/carry}
out=${OUT:-/tmp}
"$C/bench_ops" 2>&1 | tail -4
DT_GPU_OPS=model_graphs "$C/test_gpu_ops" 2>&1 | tail -5
DT_GPU_CASES=model "$C/test_gpu_replays" 2>&1 | tail -2
DETRAIN_CUDA="$C/detrain-cuda" bash tests/gpu/gpu_e2e.sh "$out/e2e" 2>&1 | tail -4
for r in 1 2; do
  for v in on off; do
    echo "== round $r DT_OPT_OVERLAP=$v"
    DT_OPT_OVERLAP=$v "$C/detrain-cuda" bench --steps 20 --warmup 5 --profile-steps 1 >"$out/bench_${r}_$v.txt" 2>&1
    grep -E "step ms|tokens/s|loss first" "$out/bench_${r}_$v.txt"
  done
done
