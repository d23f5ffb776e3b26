#!/usr/bin/env bash
# Bitwise checkpoint resume (DESIGN §1 guarantee 2) on a small model with dropout on and
# gradient accumulation (global batch = 2 x micro batch):
#   1. an uninterrupted 50-step run vs the same run resumed from its step-25 checkpoint:
#      every metric of steps 26-50 and every tensor of the final checkpoints identical;
#   2. a chain of resumes (10 steps at a time, each resumed from the previous save, the
#      same log directory reused): all 50 steps and the final checkpoint identical;
#   3. a run killed mid-save, resumed into the same log directory: identical to the
#      uninterrupted run on all 50 steps;
#   4. negative controls: another seed, and no dropout, must be reported as different.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2
        --global-batch-size 4 --hidden-dropout 0.1 --attention-dropout 0.1 --lr-decay-iters 50
        --eval-interval 10 --eval-iters 1 --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }

"$DETRAIN" train "${common[@]}" --train-iters 50 --save "$d/full" --save-interval 25 --log-dir "$d/lfull"
[ "$(cat "$d/full/latest_checkpointed_iteration.txt")" = 50 ] || fail "tracker should name 50"
[ -f "$d/full/iter_0000025/state.json" ] || fail "no checkpoint at step 25"

# 1. resume from step 25
"$DETRAIN" train "${common[@]}" --train-iters 50 --load "$d/full/iter_0000025" --save "$d/res" \
  --log-dir "$d/lres"
out=$("$DETRAIN" compare "$d/lfull" "$d/lres")
echo "$out"
grep -q "bitwise identical: 25 steps (steps 26-50)" <<<"$out" || fail "resumed metrics differ"
first=$(head -c 12 "$d/lres/metrics.jsonl")
[ "$first" = '{"step":26,"' ] || fail "resumed log must start at step 26, starts with $first"
out=$("$DETRAIN" compare "$d/full" "$d/res")
echo "$out"
grep -q "bitwise identical: step 50" <<<"$out" || fail "final checkpoints differ"
for f in model.safetensors optimizer.safetensors config.json; do
  cmp "$d/full/iter_0000050/$f" "$d/res/iter_0000050/$f" || fail "$f not byte-identical"
done

# 2. a chain of resumes, 10 steps each, one save dir and one log dir
"$DETRAIN" train "${common[@]}" --train-iters 10 --save "$d/chain" --save-interval 10 --log-dir "$d/lchain"
for k in 20 30 40 50; do
  "$DETRAIN" train "${common[@]}" --train-iters $k --load "$d/chain" --save "$d/chain" \
    --save-interval 10 --log-dir "$d/lchain"
  [ "$(cat "$d/chain/latest_checkpointed_iteration.txt")" = $k ] || fail "tracker should name $k"
done
out=$("$DETRAIN" compare "$d/lfull" "$d/lchain")
echo "$out"
grep -q "bitwise identical: 50 steps (steps 1-50)" <<<"$out" || fail "chained metrics differ"
"$DETRAIN" compare "$d/full" "$d/chain" | tee "$d/cmp_chain"
grep -q "bitwise identical: step 50" "$d/cmp_chain" || fail "chained checkpoint differs"
for k in 10 20 30 40; do
  "$DETRAIN" ckpt verify "$d/chain/iter_00000$k" >/dev/null || fail "chain iter $k does not verify"
done

# 3. a run killed while saving step 40 (it logged steps up to 40, its last complete
#    checkpoint is step 20), resumed into the same log directory: the log reads as the
#    uninterrupted run (the resumed segment replaces steps 21-40)
set +e
DT_CRASH_AT=after-open:model.safetensors@2 "$DETRAIN" train "${common[@]}" --train-iters 50 --save "$d/kill" \
  --save-interval 20 --log-dir "$d/lkill" 2>/dev/null
rc=$?
set -e
[ $rc -eq 77 ] || fail "crash run: exit $rc, expected 77"
[ "$(cat "$d/kill/latest_checkpointed_iteration.txt")" = 20 ] || fail "crash run: tracker should name 20"
"$DETRAIN" train "${common[@]}" --train-iters 50 --load "$d/kill" --save "$d/kill" --save-interval 20 \
  --log-dir "$d/lkill"
[ "$(grep -c '^{"step":40,' "$d/lkill/metrics.jsonl")" = 2 ] || fail "the crashed run should have logged step 40"
out=$("$DETRAIN" compare "$d/lfull" "$d/lkill")
echo "$out"
grep -q "bitwise identical: 50 steps (steps 1-50)" <<<"$out" || fail "crash + resume into the same log differs"
"$DETRAIN" compare "$d/full" "$d/kill" >/dev/null || fail "crash + resume: final checkpoint differs"

# 4. negative control: the comparison must be able to fail
"$DETRAIN" train "${common[@]}" --train-iters 50 --seed 99 --save "$d/other" --log-dir "$d/lother"
set +e
"$DETRAIN" compare "$d/full" "$d/other" >"$d/cmp_other"; rc=$?
set -e
cat "$d/cmp_other"
[ $rc -eq 1 ] || fail "different seeds: compare exit $rc, expected 1"
grep -q 'DIFFERENT model.safetensors: tensor "transformer.wte.weight": first difference at element 0 \[0, 0\]: 0x' "$d/cmp_other" \
  || fail "no first differing element reported"
# dropout is really on: the same run without it differs
nodrop=(); skip=0
for a in "${common[@]}"; do
  if [ $skip -eq 1 ]; then skip=0; continue; fi
  case "$a" in --hidden-dropout|--attention-dropout) skip=1; continue;; esac
  nodrop+=("$a")
done
"$DETRAIN" train "${nodrop[@]}" --train-iters 5 --log-dir "$d/lnodrop"
set +e; "$DETRAIN" compare "$d/lfull" "$d/lnodrop" >/dev/null; rc=$?; set -e
[ $rc -eq 1 ] || fail "a run without dropout should differ (compare exit $rc)"
echo "resume: all cases passed"
