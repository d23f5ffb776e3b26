#!/usr/bin/env bash
# CI check that every CUDA source (and tests/kernels/harness_cuda.cu) compiles
# (`make cuda-objs`: nvcc, sm_90, the project's flags) on a machine with nvcc and no GPU,
# that `make cuda` links build/detrain-cuda and one binary per tests/gpu/*.cu (so a GPU
# test that no longer builds is caught here, not on the device), that the CUPTI tracer
# tools/gpu_gaps compiles,
# and that `make cuda` refuses clearly, instead of building a CPU-only binary, when nvcc
# is missing. The GPU tests themselves run on a GPU
# machine (bench/gpu.sh).
set -u
cd "$(dirname "$0")/../.."
fails=0
if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1; then
  echo "FAIL: nvcc not found; CI must have the CUDA toolkit to compile the .cu files"
  exit 1
fi
cu_src=$(find src -type f -name '*.cu' | sort)  # every depth: src/ops/<family>/, as the Makefile
n=$(echo "$cu_src" | wc -l)
if [ "$n" -lt 5 ]; then echo "FAIL: only $n .cu files found"; fails=$((fails+1)); fi
if ! make -j2 cuda-objs; then echo "FAIL: make cuda-objs"; fails=$((fails+1)); fi
# product sources and the CUDA test support (the kernel harness's CUDA backend)
for f in $cu_src tests/kernels/*.cu; do
  o="build/cuda/obj/${f%.cu}.cu.o"
  [ -s "$o" ] || { echo "FAIL: $f did not produce $o"; fails=$((fails+1)); }
done
# the whole CUDA build links: the trainer and every GPU test program
if ! make -j2 cuda; then echo "FAIL: make cuda"; fails=$((fails+1)); fi
[ -x build/detrain-cuda ] || { echo "FAIL: no build/detrain-cuda"; fails=$((fails+1)); }
for f in tests/gpu/*.cu; do
  b="build/gpu-tests/$(basename "${f%.cu}")"
  [ -x "$b" ] || { echo "FAIL: $f did not link into $b"; fails=$((fails+1)); }
done
# the developers' CUPTI tracer (bench/gpu_gaps.sh builds it on the GPU machine): it compiles
# cleanly against the toolkit's CUPTI headers
cuda_root=$(dirname "$(dirname "$(command -v "${NVCC:-nvcc}")")")
cupti_inc=
for d in "$cuda_root/include" "$cuda_root/extras/CUPTI/include"; do
  [ -z "$cupti_inc" ] && [ -f "$d/cupti.h" ] && cupti_inc=$d
done
if [ -z "$cupti_inc" ]; then
  echo "FAIL: no cupti.h under $cuda_root (the CUDA toolkit ships it; tools/gpu_gaps needs it)"; fails=$((fails+1))
elif ! gcc -std=c11 -fsyntax-only -Wall -Wextra -Werror -Wmissing-prototypes -I"$cuda_root/include" -I"$cupti_inc" \
    tools/gpu_gaps/gpu_gaps.c; then
  echo "FAIL: tools/gpu_gaps/gpu_gaps.c does not compile"; fails=$((fails+1))
fi
# no nvcc: a clear error and a non-zero exit, never a silent CPU build
out=$(make NVCC=/nonexistent/nvcc cuda-objs 2>&1); rc=$?
if [ $rc -eq 0 ]; then echo "FAIL: make cuda-objs succeeded without nvcc"; fails=$((fails+1)); fi
echo "$out" | grep -q "not found: the CUDA build needs the CUDA toolkit" || {
  echo "FAIL: missing-nvcc message not shown: $out"; fails=$((fails+1)); }
[ $fails -eq 0 ] && echo "cuda compile: $n files OK, detrain-cuda and $(ls tests/gpu/*.cu | wc -l) GPU test programs linked"
exit $fails
