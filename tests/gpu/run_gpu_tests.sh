#!/usr/bin/env bash
# Runs every GPU test (needs a CUDA GPU): the op/replay/model binary and the end-to-end
# script. Prints "N passed, N failed"; exits non-zero on any failure.
set -u
cd "$(dirname "$0")/../.."
pass=0; fail=0
for t in build/gpu-tests/*; do
  [ -x "$t" ] || continue
  if "$t"; then pass=$((pass+1)); echo "PASS $t"; else fail=$((fail+1)); echo "FAIL $t"; fi
done
if bash tests/gpu/gpu_e2e.sh; then pass=$((pass+1)); echo "PASS gpu_e2e.sh"; else fail=$((fail+1)); echo "FAIL gpu_e2e.sh"; fi
if bash tests/gpu/gpu_trace.sh; then pass=$((pass+1)); echo "PASS gpu_trace.sh"; else fail=$((fail+1)); echo "FAIL gpu_trace.sh"; fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
