#!/usr/bin/env bash
# Bounded mutation fuzz of the safetensors reader and the strict JSON reader under
# AddressSanitizer + UndefinedBehaviorSanitizer (fuzz driver: tests/ckpt/fuzz/st_fuzz.c).
# 60000 mutants of a fixed seed file with fixed RNG seeds; any sanitizer report, crash,
# leak or unexpected status fails the test. Runs in well under 60 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/fuzz
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# gcc ships the sanitizer runtimes (libasan, libubsan) with its libgcc-dev package.
${CC:-gcc} -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -fno-omit-frame-pointer \
  -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Werror \
  tests/ckpt/fuzz/st_fuzz.c src/ckpt/safetensors.c src/ckpt/sha256.c \
  src/ckpt/durable.c src/core/status.c src/core/json.c src/core/json_read.c src/core/regular_file.c \
  -lm -o "$out/st_fuzz"
export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
timeout 60 "$out/st_fuzz" 30000 1 "$work"
timeout 60 "$out/st_fuzz" 30000 2 "$work"
echo "fuzz: ok"
