#!/usr/bin/env bash
# One device call's A/B of a change: two detrain-cuda binaries, the base (PREV) and the
# change (CUR), on the 124M recipe.
#  - bits (BITS=1, the default): both train 3 deterministic steps from the same seed and save;
#    the weights and optimizer states must be byte-identical (cmp), for a change that
#    promises the base's bits;
#  - speed: ROUNDS rounds (default 3), each `bench --worker det` of PREV, CUR and CUR under
#    each of VARIANTS (env settings, e.g. "DT_GEMM_OWN=on"; order reversed every other
#    round), 20 timed steps after 5 warm-up ones, one profiled step; the DT_BENCH lines
#    (step ms, tokens/s, the ranges) go to $OUT/ab.txt.
# usage (device): PREV=build/carry/prev-detrain-cuda CUR=build/carry/detrain-cuda bash bench/gpu_ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
prev=${PREV:?PREV: the base binary}
cur=${CUR:?CUR: the changed binary}
out=${OUT:-/tmp/gpu_ab}
mkdir -p "$out"
rc=0
if [ "${BITS:-1}" = 1 ]; then
  w=$(mktemp -d)
  args="--device cuda --model gpt2-124m --micro-batch-size 16 --global-batch-size 16 --seq-length 1024
        --train-iters 3 --eval-interval 100 --log-interval 1 --deterministic-mode"
  "$prev" train $args --save "$w/p" --log-dir "$w/lp" > "$out/ab_train_prev.txt" 2>&1 || { echo "FAIL: the base's run"; rc=1; }
  "$cur" train $args --save "$w/c" --log-dir "$w/lc" > "$out/ab_train_cur.txt" 2>&1 || { echo "FAIL: the change's run"; rc=1; }
  for f in model.safetensors optimizer.safetensors; do
    if cmp "$w/p/iter_0000003/$f" "$w/c/iter_0000003/$f"; then echo "bits: $f equal after 3 steps"
    else echo "FAIL: bits: $f differs after 3 steps"; rc=1; fi
  done
  rm -rf "$w"
fi
# VARIANTS: settings of CUR timed too, each round ("NAME=value" words, one a variant)
for r in $(seq 1 "${ROUNDS:-3}"); do
  if [ $((r % 2)) = 1 ]; then order="prev cur ${VARIANTS:-}"; else order="${VARIANTS:-} cur prev"; fi
  for tag in $order; do
    case $tag in prev) cmd=("$prev") ;; cur) cmd=("$cur") ;; *) cmd=(env "$tag" "$cur") ;; esac
    line=$("${cmd[@]}" bench --worker det --steps 20 --warmup 5 --profile-steps 1 2>/dev/null | grep DT_BENCH) || { echo "FAIL: bench $tag"; rc=1; }
    echo "round $r $tag $line" | tee -a "$out/ab.txt" | cut -c1-160
  done
done
echo "done rc=$rc"
exit $rc
