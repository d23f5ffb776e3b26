#!/usr/bin/env bash
# Bad input to `detrain train`: each case exits non-zero with a message that names the
# problem. Deterministic mode refuses flags without a deterministic path and bad env values.
set -uo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail=0
expect() { # expect "<message fragment>" cmd...
  local want=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$want" <<<"$out"; then
    echo "FAIL: $* -> rc=$rc, output: $out (wanted: $want)"; fail=1
  else echo "ok: $want"; fi
}
T=(train --train-iters 2 --quiet --seq-length 16 --micro-batch-size 2)
expect "unknown flag '--no-such-flag'" "$DETRAIN" "${T[@]}" --no-such-flag
expect "--lr 'abc' is not a valid finite number" "$DETRAIN" "${T[@]}" --lr abc
expect "--micro-batch-size 0 is out of range" "$DETRAIN" "${T[@]}" --micro-batch-size 0
expect "--train-iters needs a value" "$DETRAIN" "${T[@]}" --train-iters
expect "unknown model preset 'huge'" "$DETRAIN" "${T[@]}" --model huge
expect "--num-attention-heads 3 must divide --hidden-size 128" "$DETRAIN" "${T[@]}" --num-attention-heads 3
expect "not a multiple of --micro-batch-size" "$DETRAIN" "${T[@]}" --global-batch-size 3
expect "--op-variant gemm=fast has no deterministic path" "$DETRAIN" "${T[@]}" --deterministic-mode --op-variant gemm=fast
expect "unknown op" "$DETRAIN" "${T[@]}" --op-variant nosuch=fast
expect "NCCL_ALGO='Tree' is not a deterministic setting; accepted: " env NCCL_ALGO=Tree "$DETRAIN" "${T[@]}" --deterministic-mode
expect "CUBLAS_WORKSPACE_CONFIG=':1:1' is not a deterministic setting; accepted: :4096:8 or :16:8" env CUBLAS_WORKSPACE_CONFIG=:1:1 "$DETRAIN" "${T[@]}" --deterministic-mode
expect "OMP_DYNAMIC='true' is not a deterministic setting" env OMP_DYNAMIC=true "$DETRAIN" "${T[@]}" --deterministic-mode
expect "OMP_NUM_THREADS='4,2' is not a deterministic setting" env OMP_NUM_THREADS=4,2 "$DETRAIN" "${T[@]}" --deterministic-mode
# the same env values are fine in default mode where they are not checked (except threads)
NCCL_ALGO=Tree "$DETRAIN" "${T[@]}" >/dev/null || { echo "FAIL: default mode should not check NCCL_ALGO"; fail=1; }
# data problems
printf 'not a shard at all, just some text that is long enough................' > "$d/bad.bin"
expect "bad.bin" "$DETRAIN" "${T[@]}" --data-path "$d/bad.bin"
expect "matches no files" "$DETRAIN" "${T[@]}" --data-path "$d/none_*.bin"
# a log dir that already holds a run is not overwritten
"$DETRAIN" "${T[@]}" --log-dir "$d/run" >/dev/null
cp "$d/run/metrics.jsonl" "$d/before"
expect "metrics.jsonl" "$DETRAIN" "${T[@]}" --log-dir "$d/run"
cmp -s "$d/before" "$d/run/metrics.jsonl" || { echo "FAIL: existing metrics.jsonl changed"; fail=1; }
exit $fail
