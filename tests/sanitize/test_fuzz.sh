#!/usr/bin/env bash
# Bounded, seeded fuzzing under AddressSanitizer + UndefinedBehaviorSanitizer (issue 20):
#   1. reader_fuzz (tests/ckpt/fuzz/reader_fuzz.c, linked with the sanitized library):
#      token shards and the dataset over them, trace files, metrics logs and their
#      comparison, env.json fingerprints, the checkpoint tracker; mutants of real files;
#   2. argv_fuzz (tests/ckpt/fuzz/argv_fuzz.c): the corpus tests/sanitize/argv_corpus.txt,
#      then random argument vectors for train, compare, trace-diff, ckpt and data, run
#      against the sanitized detrain: every case must exit 0, 1 or 2 within 30 s, with no
#      sanitizer report.
# The safetensors, JSON and checkpoint state readers have their own fuzz tests
# (tests/ckpt/test_st_fuzz.sh, test_ckpt_state_fuzz.sh). Fixed seeds and iteration counts;
# a failure prints the seed, the iteration and the arguments to replay it:
#   build/fuzz/argv_fuzz build/sanitize/detrain WORKDIR SEED ITERATIONS
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${DETRAIN:?}"
. tests/sanitize/sanitized_build.sh
sanitized_make $B/detrain $B/libdetrain.a >/dev/null || { echo "FAIL: sanitized build"; exit 1; }
out=build/fuzz; mkdir -p "$out"
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
gcc -std=c11 -O1 -g -D_GNU_SOURCE -Iinclude -Isrc -Wall -Wextra -Werror $san tests/ckpt/fuzz/reader_fuzz.c \
  $B/libdetrain.a -lopenblas -fopenmp -lm -o "$out/reader_fuzz"
gcc -std=c11 -O1 -g -D_GNU_SOURCE -Wall -Wextra -Werror tests/ckpt/fuzz/argv_fuzz.c -o "$out/argv_fuzz"
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
export OMP_NUM_THREADS=1
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:allocator_may_return_null=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# fixtures, made with the plain binary
tiny=(--model tiny --num-layers 1 --hidden-size 16 --num-attention-heads 2 --seq-length 8
      --micro-batch-size 1 --eval-interval 0 --quiet --threads 1)
"$DETRAIN" train "${tiny[@]}" --train-iters 2 --save "$w/ck" --log-dir "$w/l1" --trace-level op --trace-dir "$w/t1"
"$DETRAIN" train "${tiny[@]}" --train-iters 3 --log-dir "$w/l2" --seed 5
head -c 3000 README.md >"$w/bytes.txt"
"$DETRAIN" data tokenize --bytes "$w/bytes.txt" --out "$w/shard.bin" >/dev/null
mkfifo "$w/fifo"; ln -s /dev/zero "$w/zero"; mkdir "$w/empty" "$w/hf" "$w/m"
head -c 200 /dev/urandom >"$w/garbage"
cp "$w/ck/iter_0000002/model.safetensors" "$w/ck/iter_0000002/config.json" "$w/hf/"

# 1. the readers
for spec in "shard 4000" "trace 10000" "metrics 6000" "env 6000" "tracker 3000"; do
  set -- $spec
  seedfile=$w/shard.bin
  case $1 in trace) seedfile=$w/t1/rank_000000.trace;; metrics) seedfile=$w/l1/metrics.jsonl;;
              env) seedfile=$w/l1/env.json;; tracker) seedfile=$w/ck/latest_checkpointed_iteration.txt;; esac
  timeout 120 "$out/reader_fuzz" "$1" "$2" 1 "$seedfile" "$w/m" || { echo "FAIL: reader_fuzz $1"; exit 1; }
done
echo "readers done after ${SECONDS}s"

# 2. the command line: the corpus, then random vectors
timeout 400 "$out/argv_fuzz" "$PWD/$B/detrain" "$w" 1 ${ARGV_FUZZ_ITERS:-250} tests/sanitize/argv_corpus.txt \
  || { echo "FAIL: argv_fuzz (each failing case above: its arguments, exit and stderr)"; exit 1; }
echo "fuzz: ok (${SECONDS}s)"
