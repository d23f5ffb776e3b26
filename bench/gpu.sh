#!/usr/bin/env bash
# One device call: build (or use carried binaries), run every GPU test, run `detrain bench`
# (default vs deterministic) and the PyTorch peers, writing logs and results under $OUT
# (at the end packed into $OUT/all.tgz, with log.txt, bench.txt/json, peers.json,
# bench_gemm.txt and bench_attention.txt left beside it: the device tool returns 8 files).
#   OUT       results folder (default /tmp/detrain-gpu)
#   PEERS=0   skip the PyTorch peers;   STEPS=N   bench steps (default 20)
#   GEMM_ATTN=1  also bench with the GEMM attention formulation (--attention-impl gemm; flash
#             attention is the default where the shape allows)
#   CARRY=dir prebuilt build/detrain-cuda and build/gpu-tests/* to use if the build fails
#             (bench/gpu-carry.sh makes them)
#   TESTS=0   skip the test binaries, kernel benches, gpu_trace.sh and the PyTorch model check
#             (gpu_e2e.sh, the bench and the peers still run)
#   TORCH_CHECK=0  skip the whole-model check against PyTorch (tools/torch_check_gpu.sh)
#   AB="--flag=val ..."  also run the bench once per setting (e.g. --bwd-overlap=off), right
#             after the main bench, for side-by-side step times
#   TRACE_BENCH=1  also measure the tracing overhead (bench/trace_overhead_gpu.sh; needs
#             CARRY's detrain-cuda-notrace)
#   DP_BENCH=1  also time one rank through the NCCL engine against the single-process path
#             (bench/gpu_dp.sh)
#   MOE_BENCH=1  also run the MoE kernels' benchmark (bench/gpu_moe.sh)
#   KBENCH=0  skip the kernel benches (bench_attention, bench_ops, bench_gemm, ...)
#   BENCH=0   skip `detrain bench` (default vs deterministic, GPT-2 124M)
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/detrain-gpu}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
exec > >(tee -a "$LOG") 2>&1
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 ))s] $*"; }
stamp "device"; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
stamp "build"
runs() { "$1" --help >/dev/null 2>&1; [ $? -lt 126 ]; }  # 126/127: cannot execute / missing library
if [ -n "${CARRY:-}" ] && [ -x "$CARRY/detrain-cuda" ] && runs "$CARRY/detrain-cuda"; then
  mkdir -p build/gpu-tests; cp "$CARRY/detrain-cuda" build/; cp "$CARRY"/test_* "$CARRY"/bench_* "$CARRY"/dump_* build/gpu-tests/ 2>/dev/null; echo "using carried binaries"
elif ! make -j16 cuda > "$OUT/build.log" 2>&1; then
  echo "build failed:"; tail -30 "$OUT/build.log"; exit 1
fi
export DETRAIN_CUDA=build/detrain-cuda
# the NCCL engine (test_gpu_comm, gpu_dp1.sh, bench/gpu_dp.sh) dlopen()s libnccl.so.2
if nccl_dir=$(bash bench/find_nccl.sh); then export LD_LIBRARY_PATH="$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; echo "NCCL from $nccl_dir"; fi
rc=0
stamp "gpu tests (build/gpu-tests/test_*)"
[ "${TESTS:-1}" != 0 ] && for t in build/gpu-tests/test_*; do echo "-- $t"; "$t" || { echo "FAIL $t"; rc=1; }; done
if [ "${TESTS:-1}" != 0 ] && [ "${KBENCH:-1}" != 0 ] && [ -x build/gpu-tests/bench_attention ]; then
  stamp "attention kernels: flash vs GEMM formulation, one layer of GPT-2 124M"
  build/gpu-tests/bench_attention | tee "$OUT/bench_attention.txt"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "${TESTS:-1}" != 0 ] && [ "${KBENCH:-1}" != 0 ] && [ -x build/gpu-tests/bench_ops ]; then
  stamp "memory-bound kernels at the 124M shapes (checks, det replays, ms and GB/s)"
  build/gpu-tests/bench_ops | tee "$OUT/bench_ops.txt"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "${TESTS:-1}" != 0 ] && [ "${KBENCH:-1}" != 0 ] && [ -x build/gpu-tests/bench_gemm ]; then
  stamp "GEMMs at the 124M shapes (policy picks, K chunks, epilogue fusions)"
  BENCH_GEMM_CANDS=0 build/gpu-tests/bench_gemm | tee "$OUT/bench_gemm.txt"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "${TESTS:-1}" != 0 ] && [ "${KBENCH:-1}" != 0 ] && [ -x build/gpu-tests/bench_gemm_epi ]; then
  stamp "our GEMM's epilogues at the fc shape against its plain calls"
  build/gpu-tests/bench_gemm_epi || rc=1
fi
if [ "${TESTS:-1}" != 0 ] && [ "${KBENCH:-1}" != 0 ] && [ -x build/gpu-tests/bench_dw_batch ]; then
  stamp "the layers' weight-gradient GEMMs one layer at a time against one batched call"
  build/gpu-tests/bench_dw_batch || rc=1
fi
stamp "gpu e2e"
bash tests/gpu/gpu_e2e.sh "$OUT/e2e" || rc=1
rm -rf "$OUT/e2e"
stamp "gpu dp1 (training through the NCCL engine, one rank)"
bash tests/gpu/gpu_dp1.sh "$OUT/dp1" || rc=1
rm -rf "$OUT/dp1"
if [ "${DP_BENCH:-0}" != 0 ]; then
  stamp "step time: one rank through NCCL vs the single-process path (bench/gpu_dp.sh)"
  bash bench/gpu_dp.sh | tee "$OUT/gpu_dp.txt" || rc=1
fi
if [ "${MOE_BENCH:-0}" != 0 ]; then
  stamp "MoE kernels: det vs fast per range (bench/gpu_moe.sh)"
  bash bench/gpu_moe.sh && cp bench/logs/gpu_moe.txt "$OUT/gpu_moe.txt" || rc=1
fi
if [ "${TESTS:-1}" != 0 ]; then
  stamp "gpu trace"
  bash tests/gpu/gpu_trace.sh || rc=1
fi
if [ "${BENCH:-1}" != 0 ]; then
stamp "bench"
build/detrain-cuda bench --steps "${STEPS:-20}" --warmup 5 --profile-steps 3 --max-tax 1 --json "$OUT/bench.json" | tee "$OUT/bench.txt"
brc=${PIPESTATUS[0]}
case $brc in 0) echo "tax gate (--max-tax 1): PASS";; 1) echo "tax gate (--max-tax 1): FAIL (tax above 1%)";; *) echo "bench failed ($brc)"; rc=1;; esac
fi
for ab in ${AB:-}; do
  stamp "bench with $ab"
  build/detrain-cuda bench "$ab" --steps "${STEPS:-20}" --warmup 5 --profile-steps 1 \
    --json "$OUT/bench_${ab//[^A-Za-z0-9]/_}.json" | tee "$OUT/bench_${ab//[^A-Za-z0-9]/_}.txt" || rc=1
done
if [ "${GEMM_ATTN:-0}" != 0 ]; then
  stamp "bench, GEMM attention (--attention-impl gemm)"
  build/detrain-cuda bench --attention-impl gemm --steps "${STEPS:-20}" --warmup 5 --profile-steps 3 --json "$OUT/bench_gemm_attn.json" | tee "$OUT/bench_gemm_attn.txt" || rc=1
fi
if [ "${MEMCHECK:-0}" != 0 ] && command -v compute-sanitizer >/dev/null; then
  stamp "compute-sanitizer memcheck: 2 training steps, GEMM and flash attention"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/detrain-cuda train --device cuda --model tiny --attention-impl gemm \
    --train-iters 2 --eval-interval 0 --deterministic-mode --quiet > "$OUT/memcheck.txt" 2>&1; echo "memcheck gemm attention: rc=$?"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/detrain-cuda train --device cuda \
    --attention-impl flash --model tiny --num-attention-heads 2 --train-iters 2 --eval-interval 0 --quiet >> "$OUT/memcheck.txt" 2>&1; echo "memcheck flash attention (fast branch): rc=$?"
  timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/detrain-cuda train --device cuda \
    --attention-impl flash --model tiny --num-attention-heads 2 --train-iters 2 --eval-interval 0 --deterministic-mode --quiet >> "$OUT/memcheck.txt" 2>&1; echo "memcheck flash attention (det branch): rc=$?"
  tail -3 "$OUT/memcheck.txt"
fi
if [ "${TRACE_BENCH:-0}" != 0 ] && [ -x "${CARRY:-}/detrain-cuda-notrace" ]; then
  stamp "tracing overhead, GPT-2 124M (compiled out / off / each level)"
  DETRAIN_NOTRACE="$CARRY/detrain-cuda-notrace" bash bench/trace_overhead_gpu.sh | tee "$OUT/trace_overhead.txt" || rc=1
fi
if [ "${TESTS:-1}" != 0 ] && [ "${TORCH_CHECK:-1}" != 0 ]; then
  stamp "the GPU model against PyTorch (fp32 and bf16 autocast; tools/torch_check_gpu.sh)"
  DUMP_REFERENCE_GPU=build/gpu-tests/dump_reference_gpu OUT="$OUT/torch" bash tools/torch_check_gpu.sh || rc=1
fi
if [ "${PEERS:-1}" != 0 ]; then
  stamp "torch peers"
  PYTHONUNBUFFERED=1 timeout "${PEER_TIMEOUT:-300}" python3 bench/torch_peer.py --steps 10 --warmup 3 --json "$OUT/peers.json" || rc=1
fi
stamp "done rc=$rc (binaries: $(build/detrain-cuda --version 2>/dev/null))"
# The device tool brings back at most 8 files from $OUT: everything goes into all.tgz, and
# the summary files stay beside it.
tar czf /tmp/gpu-all.tgz -C "$OUT" . 2>/dev/null && find "$OUT" -mindepth 1 \( -type f -o -type l \) \
  ! -name log.txt ! -name bench.txt ! -name bench.json ! -name peers.json ! -name bench_gemm.txt \
  ! -name bench_attention.txt ! -name gpu_moe.txt ! -name gpu_dp.txt -delete && find "$OUT" -mindepth 1 -type d -empty -delete && mv /tmp/gpu-all.tgz "$OUT/all.tgz"
exit $rc
