#!/usr/bin/env bash
# Tracing on the GPU (issue 5; src/train/loop.c on src/backend/cuda_backend.cu, the GPU model in
# src/model/cuda/, src/trace/trace_cuda.cu, src/trace/digest_cuda.cu, src/ops/gemm/gemm_cuda.cu's
# per-call algorithm line):
#  - the CPU workflow test (tests/trace/test_trace_train.sh) on --device cuda: injection at
#    each op is named as the origin candidate at its step with every later mismatch
#    downstream, a late window reports the origin outside the capture, two clean traced
#    runs match, overwrite is refused;
#  - two deterministic runs traced at kernel level (every op, module and semantic event,
#    device digests) show no mismatch, and the events carry the pinned cuBLASLt algorithm
#    and every launch's grid, block and shared memory (the launch log, src/ops/cuda/launch_log.c);
#  - a run with another seed is reported as differing (the comparison can fail).
# Not named test_*.sh: CI has no GPU.
# The GPU model it checks: src/model/cuda/ (model.cuh, create.cu, linear.cu, forward.cu, backward.cu,
# step.cu, graphs.cu, streams.cu, trace.cu, describe.cu).
set -u
cd "$(dirname "$0")/../.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
DETRAIN=$D TRACE_DEVICE=cuda \
  TRACE_OPS="encoder_bwd layernorm_bwd attention_bwd matmul_bwd adamw crossentropy matmul_gelu_fwd matmul_dgelu_bwd" \
  bash tests/trace/test_trace_train.sh || fail "the tracing workflow on the GPU"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
common="--device cuda --model tiny --num-layers 2 --seq-length 64 --micro-batch-size 4 --global-batch-size 8 --train-iters 3 --eval-interval 0 --quiet"
"$D" train $common --deterministic-mode --trace-level kernel --trace-dir "$W/a" || fail "traced run a"
"$D" train $common --deterministic-mode --trace-level kernel --trace-dir "$W/b" || fail "traced run b"
"$D" trace-diff "$W/a" "$W/b" > "$W/ab.txt" || { cat "$W/ab.txt"; fail "two deterministic GPU runs traced at kernel level differ"; }
grep -aq "cublasLt det" "$W/a/rank_000000.trace" || fail "kernel-level events lack the cuBLASLt algorithm"
grep -aq "block_bwd" "$W/a/rank_000000.trace" || fail "no module-level events"
grep -aq "layernorm_bwd_kernel<<<(" "$W/a/rank_000000.trace" || fail "kernel-level events lack the launch shapes"
"$D" train $common --deterministic-mode --seed 7 --trace-level kernel --trace-dir "$W/c" || fail "traced run with another seed"
if "$D" trace-diff "$W/a" "$W/c" > "$W/ac.txt"; then fail "trace-diff saw no difference with another seed"; fi
head -5 "$W/ac.txt"
[ $fails -eq 0 ] && echo "gpu trace: PASS" || echo "gpu trace: $fails failure(s)"
exit $fails
