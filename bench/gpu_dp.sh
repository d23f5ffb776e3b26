#!/usr/bin/env bash
# Step time of one rank through the NCCL engine against the single-process path, the path
# users run (`detrain train`, GPT-2 124M, B=16, T=1024, bf16): ROUNDS alternating rounds
# of each (single, nccl, single, nccl, ...: drift in clocks or temperature hits both), in
# deterministic and default mode; each round's figure is the median step_ms of steps 11-N
# of its metrics.jsonl, and each side's the median over rounds. One rank through NCCL
# reduces nothing (the gradient hook makes no call at one rank), so the two should agree
# within noise (issue 22: within 0.5%).
#   ROUNDS=3  STEPS=40  MODES="det default"  DETRAIN_CUDA=build/detrain-cuda
# Needs libnccl.so.2 on LD_LIBRARY_PATH (bench/find_nccl.sh; bench/gpu.sh sets it).
set -u
cd "$(dirname "$0")/.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
ROUNDS=${ROUNDS:-3} STEPS=${STEPS:-40}
[ "$STEPS" -gt 10 ] || { echo "gpu_dp: STEPS must be above 10 (steps 1-10 are warm-up)"; exit 1; }
if [ -z "${LD_LIBRARY_PATH:-}" ] || ! echo "$LD_LIBRARY_PATH" | tr ':' '\n' | while read -r d; do [ -e "$d/libnccl.so.2" ] && echo y; done | grep -q y; then
  d=$(bash bench/find_nccl.sh) && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
W=$(mktemp -d)
rc=0
run() { # engine mode round -> prints the median step_ms of steps 11-N
  local eng=$1 mode=$2 r=$3 det="" log="$W/$1_$2_$3"
  [ "$mode" = det ] && det=--deterministic-mode
  DETRAIN_RANK=0 DETRAIN_WORLD_SIZE=1 DETRAIN_LOCAL_RANK=0 DETRAIN_RENDEZVOUS="file:$W/rv_$eng$mode$r" \
    "$D" train --device cuda --model gpt2-124m --micro-batch-size 16 --global-batch-size 16 --seq-length 1024 \
    --train-iters "$STEPS" --eval-interval 0 --log-interval 100 --quiet $det --dist-engine "$eng" --log-dir "$log" \
    >"$log.out" 2>&1 || { echo "FAIL: $eng $mode round $r: $(tail -2 "$log.out")" >&2; return 1; }
  python3 -c 'import json,statistics,sys; print(f"{statistics.median([json.loads(l)["step_ms"] for l in open(sys.argv[1])][10:]):.3f}")' \
    "$log/metrics.jsonl"
}
for mode in ${MODES:-det default}; do
  s=() n=()
  for r in $(seq 1 "$ROUNDS"); do
    a=$(run single "$mode" "$r") || { rc=1; continue; }
    b=$(run nccl "$mode" "$r") || { rc=1; continue; }
    s+=("$a"); n+=("$b")
    echo "$mode round $r: single $a ms, nccl (1 rank) $b ms"
  done
  [ ${#s[@]} -gt 0 ] || continue
  python3 - "$mode" "${s[*]}" "${n[*]}" <<'PY'
import statistics, sys
mode, s, n = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ms, mn = statistics.median(s), statistics.median(n)
print(f"{mode}: median step_ms single {ms:.3f}, nccl 1 rank {mn:.3f}: {100 * (mn / ms - 1):+.2f}% "
      f"({len(s)} rounds; target within 0.5%)")
PY
done
rm -rf "$W"
exit $rc
