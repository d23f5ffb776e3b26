#!/usr/bin/env bash
# Links build/tools/dump_reference_static: tools/dump_reference.c and its dump writer
# (tools/refdump) with OpenBLAS, libgomp and libgfortran linked in statically, for a
# machine that has PyTorch but no OpenBLAS or Debian packages to install (the GPU machine).
# Carry that one file there and run it in place of build/tools/dump_reference
# (docs/torch-reference.md).
# Then checks that the static and the normal build write byte-identical dumps (same library
# objects, same flags: only the linking differs).
# usage: tools/dump_reference_static.sh
set -euo pipefail
cd "$(dirname "$0")/.."
make build/libdetrain.a build/tools/dump_reference
out=build/tools/dump_reference_static
rm -f "$out"
blas_lib=/usr/lib/x86_64-linux-gnu/openblas-openmp
gcc -std=c11 -O2 -g -fopenmp -ffp-contract=off -fno-fast-math -fno-unsafe-math-optimizations \
    -D_GNU_SOURCE -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu/openblas-openmp \
    -static -o "$out" tools/dump_reference.c build/obj/tools/refdump/refdump.o build/libdetrain.a \
    "$blas_lib/libopenblas.a" -lgfortran -lquadmath -lm -lpthread 2>&1 |
    grep -v "dlopen.*statically linked\|gomp_target_init\|^/usr/bin/ld: .*libgomp.a" || true
[ -x "$out" ] || { echo "dump_reference_static: link failed" >&2; exit 1; }
strip "$out"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
flags=(--model tiny --num-layers 2 --hidden-size 64 --seq-length 32 --micro-batch-size 2 --steps 2)
build/tools/dump_reference "${flags[@]}" --out "$d/dyn" 2>/dev/null
"$out" "${flags[@]}" --out "$d/static" 2>/dev/null
for f in "$d"/dyn/*; do cmp "$f" "$d/static/${f##*/}"; done
echo "built $out ($(du -h "$out" | cut -f1)); its dumps are byte-identical to build/tools/dump_reference's"
