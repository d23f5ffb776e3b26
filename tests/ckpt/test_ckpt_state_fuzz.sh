#!/usr/bin/env bash
# Bounded mutation fuzz of the checkpoint state-file reader under AddressSanitizer + UBSan
# (driver: tests/ckpt/test_ckpt_state_fuzz.c, built here in its fuzz-only mode from the
# few sources it needs). The seed is a real checkpoint saved by `detrain train`; 2 x 5000
# mutants with fixed seeds. Any sanitizer report, leak, crash or unexpected status fails.
set -euo pipefail
: "${DETRAIN:?}"
cd "$(dirname "$0")/../.."
out=build/fuzz
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
${CC:-gcc} -std=c11 -O1 -g -D_GNU_SOURCE -DDT_FUZZ_ONLY -Iinclude -Isrc -Itests -fno-omit-frame-pointer \
  -fsanitize=address,undefined -fno-sanitize-recover=all -Wall -Wextra -Werror \
  tests/ckpt/test_ckpt_state_fuzz.c src/ckpt/ckpt_view.c src/ckpt/safetensors.c \
  src/ckpt/sha256.c src/ckpt/durable.c src/ckpt/tracker.c src/core/status.c src/core/json.c \
  src/core/json_read.c src/core/regular_file.c -lm -o "$out/ckpt_state_fuzz"
"$DETRAIN" train --model tiny --num-layers 1 --hidden-size 16 --num-attention-heads 2 --vocab-size 256 \
  --max-position-embeddings 16 --seq-length 16 --micro-batch-size 2 --train-iters 3 --eval-interval 0 \
  --deterministic-mode --threads 1 --quiet --hidden-dropout 0.1 --save "$work/ck"
export ASAN_OPTIONS=abort_on_error=0:detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
timeout 60 "$out/ckpt_state_fuzz" 5000 1 "$work/ck/iter_0000003"
timeout 60 "$out/ckpt_state_fuzz" 5000 2 "$work/ck/iter_0000003"
"$DETRAIN" ckpt verify "$work/ck" >/dev/null # restored intact
echo "state fuzz: ok"
