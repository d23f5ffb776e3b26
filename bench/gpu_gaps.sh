#!/usr/bin/env bash
# Idle time inside a step on the GPU machine: builds tools/gpu_gaps/gpu_gaps.c (a CUPTI activity
# tracer loaded through CUDA_INJECTION64_PATH) against the machine's CUPTI and runs one
# `detrain bench` worker under it. Prints each step's span, busy and idle time and its
# largest gaps (tools/gpu_gaps/gpu_gaps.c says how they are counted).
# usage: bench/gpu_gaps.sh [DETRAIN] [MODE det|default] [extra bench args...]
# env: OUT (default .) for gaps.txt.*
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/detrain-cuda}; mode=${2:-det}; shift $(( $# > 2 ? 2 : $# ))
out=${OUT:-.}
cuda=${CUDA_HOME:-/usr/local/cuda}
inc=; lib=
for d in "$cuda/extras/CUPTI" "$cuda/targets/x86_64-linux" "$cuda" \
         $(python3 -c 'import nvidia, os; print(" ".join(os.path.join(p, "cuda_cupti") for p in nvidia.__path__))' 2>/dev/null); do
  if [ -z "$inc" ] && [ -f "$d/include/cupti.h" ]; then inc=$d/include; fi
  for l in "$d/lib64" "$d/lib"; do
    if [ -z "$lib" ] && ls "$l"/libcupti.so* >/dev/null 2>&1; then lib=$l; fi
  done
done
[ -n "$inc" ] && [ -n "$lib" ] || { echo "gpu_gaps: no CUPTI headers/library found under $cuda or the Python nvidia packages" >&2; exit 1; }
# the newest record layouts this CUPTI declares
newest() { grep -o "CUpti_Activity$1[0-9]*\b" "$inc/cupti_activity.h" | sort -V | tail -1; }
so=$out/libgpu_gaps.so
[ -f "$lib/libcupti.so" ] || ln -sf "$(ls "$lib"/libcupti.so.* | head -1)" "$out/libcupti.so"
gcc -O2 -shared -fPIC -I"$cuda/include" -I"$inc" -DGAPS_KERNEL_RECORD="$(newest Kernel)" \
    -DGAPS_MEMCPY_RECORD="$(newest Memcpy)" -DGAPS_MEMSET_RECORD="$(newest Memset)" \
    tools/gpu_gaps/gpu_gaps.c -L"$lib" -L"$out" -lcupti -Wl,-rpath,"$lib" -o "$so"
echo "gpu_gaps: CUPTI $inc, records $(newest Kernel) $(newest Memcpy) $(newest Memset)"
CUDA_INJECTION64_PATH=$(readlink -f "$so") GAPS_OUT="$out/gaps.txt" GAPS_DUMP="${GAPS_DUMP:-$out/segment.txt}" \
    "$bin" bench --worker "$mode" --steps 10 --warmup 5 --profile-steps 0 "$@"
cat "$out"/gaps.txt.*
