#!/usr/bin/env bash
# End to end on the GPU (build/detrain-cuda, src/train/train_cuda.cu, src/model/gpt_cuda.cu):
#  - two deterministic-mode runs are bitwise identical (`detrain compare`, exit 0), with
#    dropout (GEMM attention) and without (flash attention, the default for that shape);
#  - a third run with a different seed differs (the comparison can fail);
#  - GPU and CPU runs of the same config start from the same loss (first step within 2%);
#  - env.json records the GPU and the pinned GEMM algorithms.
# Not named test_*.sh: tests/run.sh (CI, no GPU) must not pick it up.
set -u
cd "$(dirname "$0")/../.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
W=${1:-$(mktemp -d)}
mkdir -p "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
common="--device cuda --model small --micro-batch-size 8 --global-batch-size 16 --train-iters 30 --eval-interval 10 --log-interval 10"
nodrop="$common"
common="$common --hidden-dropout 0.1 --attention-dropout 0.1"
"$D" train $common --deterministic-mode --log-dir "$W/a" || fail "run a"
"$D" train $common --deterministic-mode --log-dir "$W/b" >/dev/null || fail "run b"
"$D" compare "$W/a" "$W/b" || fail "two deterministic GPU runs differ"
"$D" train $common --deterministic-mode --seed 7 --log-dir "$W/c" >/dev/null || fail "run c"
if "$D" compare "$W/a" "$W/c" >/dev/null 2>&1; then fail "compare saw no difference with another seed"; fi
"$D" train $nodrop --deterministic-mode --log-dir "$W/d" >/dev/null || fail "run d"
"$D" train $nodrop --deterministic-mode --log-dir "$W/e" >/dev/null || fail "run e"
"$D" compare "$W/d" "$W/e" || fail "two deterministic GPU runs (flash attention) differ"
grep -q '"attention":"flash"' "$W/d/env.json" || fail "run d did not use flash attention"
grep -q '"attention":"gemm"' "$W/a/env.json" || fail "run a (attention dropout) did not use GEMM attention"
grep -q '"gemm_algos"' "$W/a/env.json" || fail "env.json lacks the GEMM algorithms"
grep -q '"gpu"' "$W/a/env.json" || fail "env.json lacks the GPU"
# GPU vs CPU: same init, same data: the first loss agrees to bf16 accuracy
"$D" train --device cpu --model small --micro-batch-size 8 --global-batch-size 16 --train-iters 1 --eval-interval 0 --deterministic-mode --log-dir "$W/cpu" >/dev/null || fail "cpu run"
python3 - "$W/d/metrics.jsonl" "$W/cpu/metrics.jsonl" <<'PY' || fail "first-step loss GPU vs CPU"
import json, sys
g = json.loads(open(sys.argv[1]).readline())["loss"]
c = json.loads(open(sys.argv[2]).readline())["loss"]
print(f"first-step loss: gpu {g:.6f} cpu {c:.6f}")
sys.exit(0 if abs(g - c) / c < 0.005 else 1)
PY
[ $fails -eq 0 ] && echo "gpu e2e: PASS" || echo "gpu e2e: $fails failure(s)"
exit $fails
