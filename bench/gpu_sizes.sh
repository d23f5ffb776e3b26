#!/usr/bin/env bash
# The larger presets on one GPU, through `detrain bench` (the train loop: default and
# deterministic mode, real text by default) beside the PyTorch peer of the same size
# (bench/torch_peer.py: torch.compile and eager, default mode) in the same call.
#   SIZES="gpt2-124m:16 gpt2-350m:16 gpt2-774m:16 gpt2-1558m:8"  preset:micro-batch pairs
#   STEPS=N (default 15) timed steps after 3 warm-up, 1 profiled; PEER_MODES (compile,eager)
#   TRAIN=N (default 0): also `detrain train` N steps (N > 10) in each mode, the path users
#   run: the median step_ms of steps 11-N from metrics.jsonl beside bench's figure
# Writes $OUT/sizes.txt (a table) and $OUT/<preset>.json; prints the table last.
set -uo pipefail
cd "$(dirname "$0")/.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
out=${OUT:-/tmp/gpu_sizes}
mkdir -p "$out"
rc=0
for sb in ${SIZES:-gpt2-124m:16 gpt2-350m:16 gpt2-774m:16 gpt2-1558m:8}; do
  m=${sb%%:*} b=${sb#*:}
  echo "== $m B=$b"
  "$D" bench --model "$m" --micro-batch-size "$b" --steps "${STEPS:-15}" --warmup 3 --profile-steps 1 \
    --json "$out/$m.json" > "$out/bench_$m.txt" 2>&1 || { echo "FAIL: bench $m"; rc=1; }
  sed -n '/^step ms (median)/p;/^tokens\/s/p;/^MFU/p;/^device memory/p;/^top token/p' "$out/bench_$m.txt"
  PYTHONUNBUFFERED=1 timeout "${PEER_TIMEOUT:-400}" python3 bench/torch_peer.py --model "$m" --micro-batch-size "$b" \
    --steps 8 --warmup 3 --det 0 --modes "${PEER_MODES:-compile,eager}" --json "$out/peer_$m.json" \
    > "$out/peer_$m.txt" 2>&1 || { echo "FAIL: peer $m"; rc=1; }
  grep -E '^(compile|eager) ' "$out/peer_$m.txt"
  if [ "${TRAIN:-0}" -gt 10 ]; then
    for mode in det default; do
      w=$(mktemp -d) det=""
      [ $mode = det ] && det=--deterministic-mode
      "$D" train --device cuda --model "$m" --micro-batch-size "$b" --global-batch-size "$b" --seq-length 1024 \
        --train-iters "$TRAIN" --eval-interval 0 --log-interval 100 --quiet $det --log-dir "$w/log" \
        > "$out/train_${m}_$mode.txt" 2>&1 || { echo "FAIL: train $m $mode"; rc=1; }
      python3 - "$w/log/metrics.jsonl" "$m" "$mode" <<'PY' | tee -a "$out/train.txt"
import json, statistics, sys
try:
    ms = [json.loads(l)["step_ms"] for l in open(sys.argv[1])][10:]
    print(f"train {sys.argv[2]} {sys.argv[3]} median_step_ms={statistics.median(ms):.3f} steps={len(ms)}")
except Exception as e:
    print(f"train {sys.argv[2]} {sys.argv[3]} no metrics ({e})")
PY
      rm -rf "$w"
    done
  fi
done
python3 - "$out" ${SIZES:-gpt2-124m:16 gpt2-350m:16 gpt2-774m:16 gpt2-1558m:8} <<'PY' | tee "$out/sizes.txt"
import json, os, sys
d = sys.argv[1]
print(f"{'preset':<12}{'B':>3}{'det ms':>9}{'def ms':>9}{'tax %':>7}{'det tok/s':>11}{'MFU det':>9}{'compile ms':>11}{'det/compile':>12}")
for sb in sys.argv[2:]:
    m, b = sb.split(":")
    try:
        j = json.load(open(os.path.join(d, m + ".json")))
    except Exception:
        print(f"{m:<12}{b:>3}  (no bench)"); continue
    peers = {}
    try:
        for r in json.load(open(os.path.join(d, "peer_" + m + ".json"))):
            peers[r["mode"]] = r["step_ms"]
    except Exception:
        pass
    det, de = j["deterministic"], j["default"]
    c = peers.get("compile")
    print(f"{m:<12}{b:>3}{det['step_ms']:>9.2f}{de['step_ms']:>9.2f}{j['tax_pct']:>7.2f}{det['tok_per_s']:>11.0f}"
          f"{det['mfu']*100:>8.1f}%{(c or 0):>11.2f}{(c / det['step_ms'] if c else 0):>11.3f}x")
PY
echo "done rc=$rc"
exit $rc
