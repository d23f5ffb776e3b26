#!/usr/bin/env bash
# CPU side by side: detrain default and deterministic mode, and the PyTorch peer
# (bench/torch_cpu_peer.py: eager, eager deterministic) on the same config and threads,
# interleaved over several rounds so machine load hits every variant alike.
# Usage: TORCH_PY=/path/to/python-with-torch bench/cpu_peers.sh [threads] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}; rounds=${2:-3}; py=${TORCH_PY:-python3}
make -s build/detrain >/dev/null
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
tok=$((8 * 256))
for r in $(seq "$rounds"); do
  for mode in def det; do
    extra=(); [ $mode = det ] && extra=(--deterministic-mode)
    build/detrain train --model small --micro-batch-size 8 --threads "$threads" --train-iters 25 \
      --eval-interval 0 --quiet "${extra[@]}" --log-dir "$d/$mode$r"
    python3 -c 'import json,sys,statistics; v=[json.loads(l)["step_ms"] for l in open(sys.argv[1])][5:]; print("%.3f" % statistics.median(v))' \
      "$d/$mode$r/metrics.jsonl" >> "$d/detrain-$mode"
  done
  "$py" bench/torch_cpu_peer.py --threads "$threads" --steps 25 --modes eager,eager-det > "$d/torch$r"
  awk '/ms\/step/ {print $2 > "'"$d"'/torch-" $1}' "$d/torch$r" 2>/dev/null || true
  grep -E '^eager ' "$d/torch$r" | awk '{print $2}' >> "$d/t-eager"
  grep -E '^eager-det ' "$d/torch$r" | awk '{print $2}' >> "$d/t-eagerdet"
done
head -1 "$d/torch1"
python3 - "$d" "$tok" <<'PY'
import statistics, sys, os
d, tok = sys.argv[1], int(sys.argv[2])
rows = [("detrain default", "detrain-def"), ("detrain deterministic", "detrain-det"),
        ("torch eager", "t-eager"), ("torch eager deterministic", "t-eagerdet")]
med = {}
for name, f in rows:
    v = [float(x) for x in open(os.path.join(d, f)).read().split()]
    med[f] = statistics.median(v)
    print("%-26s %9.2f ms/step %8.0f tok/s   (runs: %s)" % (name, med[f], tok / med[f] * 1e3, " ".join("%.1f" % x for x in v)))
print("detrain determinism tax: %+.2f%%" % ((med["detrain-det"] / med["detrain-def"] - 1) * 100))
print("detrain det vs torch eager default: %.2fx tokens/s" % (med["t-eager"] / med["detrain-det"]))
PY
