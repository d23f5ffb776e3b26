#!/usr/bin/env bash
# Run control (issue 20): a real SIGTERM at a random moment finishes the step, saves and
# exits 0, and the run resumed from that checkpoint is bitwise the uninterrupted one;
# --exit-interval and --exit-duration-in-mins stop the same way; a non-finite loss stops
# the run at that step with nothing saved past the last finite one; --inject-nondeterminism
# refuses ops the backend does not have and fails a run in which it never fired.
set -uo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail=0
T=(train --deterministic-mode --model tiny --micro-batch-size 4 --seq-length 64 --eval-interval 0 --quiet)

# the uninterrupted run
"$DETRAIN" "${T[@]}" --train-iters 150 --save "$d/u" --log-dir "$d/ul" || { echo "FAIL: uninterrupted run"; exit 1; }

# SIGTERM at a random moment of the same run
delay=$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.6 + rand() * 1.5 }')
"$DETRAIN" "${T[@]}" --train-iters 150 --save "$d/i" --log-dir "$d/il" > "$d/i.out" 2>&1 &
pid=$!
sleep "$delay"
kill -TERM $pid
wait $pid; rc=$?
cat "$d/i.out"
k=$(sed -n 's/^detrain: stopped after step \([0-9]*\) of 150 by SIGTERM; saved.*/\1/p' "$d/i.out")
if [ $rc -ne 0 ] || [ -z "$k" ]; then
  echo "FAIL: SIGTERM after ${delay}s: rc=$rc, no 'stopped after step' line (did the run end before the signal?)"; fail=1
else
  echo "ok: SIGTERM after ${delay}s stopped the run after step $k, exit 0"
  "$DETRAIN" ckpt verify "$d/i" > /dev/null || { echo "FAIL: the signal's checkpoint does not verify"; fail=1; }
  "$DETRAIN" "${T[@]}" --train-iters 150 --load "$d/i" --save "$d/i" --log-dir "$d/il" || { echo "FAIL: resume"; fail=1; }
  "$DETRAIN" compare "$d/ul" "$d/il" || { echo "FAIL: the resumed run differs from the uninterrupted one"; fail=1; }
  "$DETRAIN" compare "$d/u" "$d/i" > /dev/null || { echo "FAIL: the final checkpoints differ"; fail=1; }
fi

# --exit-interval: stops after step 20 of 150 with a checkpoint; resumed, it is the same run
"$DETRAIN" "${T[@]}" --train-iters 40 --save "$d/e" --log-dir "$d/el" --exit-interval 20 > "$d/e.out" 2>&1 \
  || { echo "FAIL: --exit-interval run: $(cat "$d/e.out")"; fail=1; }
grep -q "stopped after step 20 of 40 by --exit-interval 20; saved" "$d/e.out" || { echo "FAIL: --exit-interval: $(cat "$d/e.out")"; fail=1; }
[ "$(cat "$d/e/latest_checkpointed_iteration.txt")" = 20 ] || { echo "FAIL: --exit-interval: tracker $(cat "$d/e/latest_checkpointed_iteration.txt")"; fail=1; }
"$DETRAIN" "${T[@]}" --train-iters 40 --load "$d/e" --log-dir "$d/el" || fail=1
"$DETRAIN" "${T[@]}" --train-iters 40 --log-dir "$d/fl" || fail=1
"$DETRAIN" compare "$d/fl" "$d/el" > /dev/null || { echo "FAIL: --exit-interval then resume differs from the uninterrupted run"; fail=1; }

# --exit-duration-in-mins: a short budget stops the run early, saving
"$DETRAIN" "${T[@]}" --train-iters 100000 --save "$d/t" --exit-duration-in-mins 0.01 > "$d/t.out" 2>&1 \
  || { echo "FAIL: --exit-duration-in-mins: $(cat "$d/t.out")"; fail=1; }
grep -q "by --exit-duration-in-mins 0.01; saved" "$d/t.out" || { echo "FAIL: --exit-duration-in-mins: $(cat "$d/t.out")"; fail=1; }
"$DETRAIN" ckpt verify "$d/t" > /dev/null || { echo "FAIL: the duration's checkpoint does not verify"; fail=1; }

# a non-finite loss stops the run at that step; nothing past the last finite step is saved
out=$("$DETRAIN" "${T[@]}" --lr 1e30 --train-iters 10 --save "$d/n" --save-interval 1 --log-dir "$d/nl" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "step 2: loss is .* not finite" <<<"$out" || { echo "FAIL: non-finite loss: rc=$rc $out"; fail=1; }
[ "$(cat "$d/n/latest_checkpointed_iteration.txt" 2>/dev/null)" = 1 ] || { echo "FAIL: non-finite: checkpoints past step 1: $(ls "$d/n")"; fail=1; }
[ -e "$d/n/iter_0000002" ] && { echo "FAIL: a checkpoint of the non-finite step"; fail=1; }
[ "$(wc -l < "$d/nl/metrics.jsonl")" = 1 ] || { echo "FAIL: the non-finite step was logged"; fail=1; }
# turned off (recorded in env.json), the same run goes to its end
"$DETRAIN" "${T[@]}" --lr 1e30 --train-iters 4 --check-for-nan-in-loss-and-grad off --log-dir "$d/no" \
  || { echo "FAIL: --check-for-nan-in-loss-and-grad off"; fail=1; }
grep -q '"check-for-nan-in-loss-and-grad":"off"' "$d/no/env.json" || { echo "FAIL: the check's setting is not in env.json"; fail=1; }

# --inject-nondeterminism names an op of this backend, exactly, at a step of the run
I=(--debug-allow-injection --train-iters 3)
out=$("$DETRAIN" "${T[@]}" "${I[@]}" --inject-nondeterminism nosuch_op@2 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "the cpu backend has no op 'nosuch_op'; its ops: adamw," <<<"$out" || { echo "FAIL: unknown op: $rc $out"; fail=1; }
out=$("$DETRAIN" "${T[@]}" "${I[@]}" --inject-nondeterminism LayerNorm_bwd@2 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "no op 'LayerNorm_bwd'" <<<"$out" || { echo "FAIL: op name in another case: $rc $out"; fail=1; }
out=$("$DETRAIN" "${T[@]}" "${I[@]}" --inject-nondeterminism layernorm_bwd@9 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "step 9 is outside this run" <<<"$out" || { echo "FAIL: step outside the run: $rc $out"; fail=1; }
out=$("$DETRAIN" "${T[@]}" "${I[@]}" --inject-nondeterminism dropout_fwd@2 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "never fired: op 'dropout_fwd' did not run" <<<"$out" || { echo "FAIL: injection that never fires: $rc $out"; fail=1; }
"$DETRAIN" "${T[@]}" "${I[@]}" --inject-nondeterminism layernorm_bwd@2 --log-dir "$d/inj" || { echo "FAIL: a valid injection"; fail=1; }
"$DETRAIN" "${T[@]}" --train-iters 3 --log-dir "$d/noinj" || fail=1
"$DETRAIN" compare "$d/noinj" "$d/inj" > /dev/null 2>&1 && { echo "FAIL: the injection changed nothing"; fail=1; }
exit $fail
