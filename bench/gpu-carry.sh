#!/usr/bin/env bash
# Builds the GPU binaries on this (CPU) machine for a GPU machine that has the CUDA driver
# but no OpenBLAS: `make cuda` with OpenBLAS, libgfortran and libquadmath linked in
# statically, then packs build/detrain-cuda, build/gpu-tests/* and a build with the trace
# hooks compiled out (detrain-cuda-notrace) into build/carry.tar.xz
# (small enough for the device tool's 64 MiB carry limit).
# There:  mkdir -p build/carry && tar xJf build/carry.tar.xz -C build/carry &&
#         CARRY=build/carry bash bench/gpu.sh
# usage: bench/gpu-carry.sh
set -euo pipefail
cd "$(dirname "$0")/.."
blas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.a
[ -f "$blas" ] || { echo "gpu-carry: $blas missing: run scripts/install-deps.sh" >&2; exit 1; }
gcclib=$(dirname "$(gcc -print-libgcc-file-name)")
static_blas="$blas $gcclib/libgfortran.a $gcclib/libquadmath.a"
# Relink the executables even when nothing else changed (a normal `make cuda` links them
# against the shared OpenBLAS).
rm -f build/detrain-cuda build/gpu-tests/*
make -j"$(nproc)" cuda CUDA_BLAS="$static_blas"
rm -rf build/carry && mkdir -p build/carry
cp build/detrain-cuda build/gpu-tests/* build/carry/
# The same binary with every trace hook compiled away: the baseline of "tracing off costs
# nothing" (bench/trace_overhead_gpu.sh).
rm -f build-notrace/detrain-cuda
make -j"$(nproc)" BUILD=build-notrace EXTRA_CFLAGS=-DDT_BENCH_NO_TRACE build-notrace/detrain-cuda \
    CUDA_BLAS="$static_blas"
cp build-notrace/detrain-cuda build/carry/detrain-cuda-notrace
strip build/carry/*
tar cJf build/carry.tar.xz -C build/carry .
echo "packed $(ls build/carry | wc -l) binaries into build/carry.tar.xz ($(du -h build/carry.tar.xz | cut -f1))"
