#!/usr/bin/env bash
# Runs every GPU test (needs a CUDA GPU): one binary per tests/gpu/test_*.cu (ops against
# the CPU, replays and negative controls, the model, the NCCL engine) and the end-to-end
# scripts named below (gpu_dp1.sh: training through the NCCL engine with one rank).
# Benchmarks and tuners (bench_*, tune_gemm) are not tests: bench/gpu.sh runs them. The
# kernel registry counts exactly these as GPU tests (src/gate/registry.c, dt_test_runner:
# a script counts when a line here runs it as `bash PATH`). Prints "N passed, N failed";
# exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.."
# The NCCL engine dlopen()s libnccl.so.2: test_gpu_comm and gpu_dp1.sh need it found.
if nccl_dir=$(bash bench/find_nccl.sh); then
  export LD_LIBRARY_PATH="$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; echo "NCCL from $nccl_dir"
else
  echo "NCCL not found (bench/find_nccl.sh): test_gpu_comm and gpu_dp1.sh will fail"
fi
pass=0; fail=0
for t in build/gpu-tests/test_*; do
  [ -x "$t" ] || continue
  if "$t"; then pass=$((pass+1)); echo "PASS $t"; else fail=$((fail+1)); echo "FAIL $t"; fi
done
if bash tests/gpu/gpu_e2e.sh; then pass=$((pass+1)); echo "PASS gpu_e2e.sh"; else fail=$((fail+1)); echo "FAIL gpu_e2e.sh"; fi
if bash tests/gpu/gpu_trace.sh; then pass=$((pass+1)); echo "PASS gpu_trace.sh"; else fail=$((fail+1)); echo "FAIL gpu_trace.sh"; fi
if bash tests/gpu/gpu_dp1.sh; then pass=$((pass+1)); echo "PASS gpu_dp1.sh"; else fail=$((fail+1)); echo "FAIL gpu_dp1.sh"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
