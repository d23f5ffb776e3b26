#!/usr/bin/env bash
# Runs every GPU test (needs a CUDA GPU): one binary per tests/gpu/test_*.cu (ops against
# the CPU, replays and negative controls, the model) and the end-to-end scripts named below.
# Benchmarks and tuners (bench_*, tune_gemm) are not tests: bench/gpu.sh runs them. The
# kernel registry counts exactly these as GPU tests (src/gate/registry.c, dt_test_runner:
# a script counts when a line here runs it as `bash PATH`). Prints "N passed, N failed";
# exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
for t in build/gpu-tests/test_*; do
  [ -x "$t" ] || continue
  if "$t"; then pass=$((pass+1)); echo "PASS $t"; else fail=$((fail+1)); echo "FAIL $t"; fi
done
if bash tests/gpu/gpu_e2e.sh; then pass=$((pass+1)); echo "PASS gpu_e2e.sh"; else fail=$((fail+1)); echo "FAIL gpu_e2e.sh"; fi
if bash tests/gpu/gpu_trace.sh; then pass=$((pass+1)); echo "PASS gpu_trace.sh"; else fail=$((fail+1)); echo "FAIL gpu_trace.sh"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
