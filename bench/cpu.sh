#!/usr/bin/env bash
# CPU benchmark: tokens/s of default and deterministic mode side by side, and the tax.
# Configs: the tiny preset, and the L4/d256/H4/T256/V512/B8 GPT (preset `small`) that the
# PyTorch reference figure refers to. Runs alternate (default, det, default, det, ...) so
# drifts in machine load hit both modes alike; each run reports the median step time of
# its steps after warm-up. Usage: bench/cpu.sh [threads] [rounds] [iters]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}; rounds=${2:-3}; iters=${3:-30}
bin=build/detrain
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
median_ms() { # median step_ms of steps > 5
  python3 -c '
import json, sys, statistics
v = [json.loads(l)["step_ms"] for l in open(sys.argv[1])][5:]
print("%.3f" % statistics.median(v))' "$1"
}
printf "%-8s %-6s %10s %10s %10s %10s %8s\n" config thr def_ms det_ms def_tok/s det_tok/s tax%
for cfg in ${CONFIGS:-tiny small}; do
  case $cfg in
    tiny)  args=(--model tiny --micro-batch-size 8) ; tokens=$((8*128)) ;;
    small) args=(--model small --micro-batch-size 8); tokens=$((8*256)) ;;
  esac
  defs=(); dets=()
  for r in $(seq "$rounds"); do
    for mode in def det; do
      extra=(); [ $mode = det ] && extra=(--deterministic-mode)
      rm -rf "$d/$mode$r"
      $bin train "${args[@]}" "${extra[@]}" --threads "$threads" --train-iters "$iters" \
        --eval-interval 0 --quiet --log-dir "$d/$mode$r"
      ms=$(median_ms "$d/$mode$r/metrics.jsonl")
      if [ $mode = def ]; then defs+=("$ms"); else dets+=("$ms"); fi
    done
  done
  python3 - "$cfg" "$threads" "$tokens" "${defs[*]}" "${dets[*]}" <<'PY'
import sys, statistics
cfg, thr, tok = sys.argv[1], sys.argv[2], int(sys.argv[3])
d = statistics.median(map(float, sys.argv[4].split()))
e = statistics.median(map(float, sys.argv[5].split()))
print("%-8s %-6s %10.2f %10.2f %10.0f %10.0f %8.2f" % (cfg, thr, d, e, tok / d * 1e3, tok / e * 1e3, (e / d - 1) * 100))
PY
done
