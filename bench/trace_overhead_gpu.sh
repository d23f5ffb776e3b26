#!/usr/bin/env bash
# Tracing overhead on the GPU: GPT-2 124M (B 16, T 1024, deterministic mode) with the trace
# hooks compiled away (DETRAIN_NOTRACE, -DDT_BENCH_NO_TRACE), tracing off, and at each
# level. Runs alternate between the variants for ROUNDS rounds; each run reports the
# median step time of its steps after the first two. Prints one table.
# usage: bench/trace_overhead_gpu.sh   (env: DETRAIN_CUDA, DETRAIN_NOTRACE, ROUNDS, ITERS)
set -euo pipefail
cd "$(dirname "$0")/.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
N=${DETRAIN_NOTRACE:-build/carry/detrain-cuda-notrace}
rounds=${ROUNDS:-2}; iters=${ITERS:-8}
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
args=(--device cuda --model gpt2-124m --micro-batch-size 16 --global-batch-size 16 --seq-length 1024
      --deterministic-mode --train-iters "$iters" --eval-interval 0 --quiet)
variants="notrace off metrics semantic module op"
declare -A ms
for r in $(seq "$rounds"); do
  for v in $variants; do
    case $v in
      notrace) bin=$N; extra=() ;;
      off)     bin=$D; extra=() ;;
      *)       bin=$D; extra=(--trace-level "$v" --trace-dir "$d/tr-$v-$r") ;;
    esac
    "$bin" train "${args[@]}" "${extra[@]}" --log-dir "$d/$v-$r"
    m=$(python3 -c 'import json,sys,statistics; v=[json.loads(l)["step_ms"] for l in open(sys.argv[1])][2:]; print("%.3f" % statistics.median(v))' "$d/$v-$r/metrics.jsonl")
    ms[$v]="${ms[$v]:-} $m"
  done
done
python3 - "${ms[notrace]}" "${ms[off]}" "${ms[metrics]}" "${ms[semantic]}" "${ms[module]}" "${ms[op]}" <<'PY'
import sys, statistics
names = ["compiled out", "off", "metrics", "semantic", "module", "op"]
vals = [statistics.median(map(float, a.split())) for a in sys.argv[1:]]
print("| trace level | step ms (median) | vs compiled out |")
print("|---|---:|---:|")
for n, v in zip(names, vals):
    print(f"| {n} | {v:.2f} | {100.0 * (v / vals[0] - 1):+.1f}% |")
PY
