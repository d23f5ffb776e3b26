#!/usr/bin/env bash
# Crash safety of checkpoint saves: every write point of a fresh save and of a save that
# replaces an existing iter_N/ (a run resumed from an earlier checkpoint into the same
# save directory), with the atomic exchange and with its fallback (DT_CKPT_NO_EXCHANGE=1).
# durable.h lists the crash points; ckpt.h gives the order of a save. For each point the
# run is stopped there (DT_CRASH_AT: exit 77, or SIGKILL with DT_CRASH_MODE=kill), then:
#   - the tracker names the checkpoint it should at that point;
#   - `detrain ckpt verify` accepts the save directory (the tracker's checkpoint) and
#     iter_0000003 is byte-identical to before;
#   - resuming reproduces the uninterrupted run bitwise: its metrics (`detrain compare` of
#     the logs) and its step-6 checkpoint (`detrain compare` of the checkpoints).
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2
        --global-batch-size 4 --hidden-dropout 0.1 --attention-dropout 0.1 --lr-decay-iters 6
        --eval-interval 0 --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }
T=latest_checkpointed_iteration.txt

# the uninterrupted reference; the step-3 checkpoint fresh saves start from; a save dir
# whose iter_0000006 holds other bytes (another seed's step 6) for the replace cases, so
# a torn replacement cannot pass by writing the same bytes again
"$DETRAIN" train "${common[@]}" --train-iters 6 --save "$d/ref" --save-interval 3 --log-dir "$d/lref"
"$DETRAIN" train "${common[@]}" --train-iters 3 --save "$d/base"
"$DETRAIN" train "${common[@]}" --train-iters 6 --seed 99 --save "$d/other"
cp -r "$d/ref" "$d/full"
rm -rf "$d/full/iter_0000006"; cp -r "$d/other/iter_0000006" "$d/full/"
"$DETRAIN" ckpt verify "$d/full" >/dev/null || fail "setup: the replace base does not verify"

files=(model.safetensors config.json optimizer.safetensors state.json $T)
file_points() { # file_points SUFFIX: the six durable-write points of every file
  for f in "${files[@]}"; do
    for p in after-open partial-write before-fsync before-rename after-rename after-dirsync; do
      echo "$p:$f$1"
    done
  done
}
inner=(dir-created:iter_0000006.tmp header-written:model.safetensors header-written:optimizer.safetensors
       "tensor-written:model.safetensors@5" "tensor-written:optimizer.safetensors@20" "tensor-written@40"
       after-dirsync:env.json before-publish:iter_0000006)

# run_case SCENARIO POINT EXPECTED-TRACKER [env...]: one crash and the checks above.
# POINT may be "kill:P" (SIGKILL) and "P>Q" (crash at P, then the retry crashes at Q).
n=0
run_case() {
  local scen=$1 spec=$2 expect=$3; shift 3
  local w="$d/w" src="$d/full"; rm -rf "$w" "$d/lw"
  [ $scen = fresh ] && src="$d/base"
  cp -r "$src" "$w"
  local mode=exit point=$spec
  if [ "${point%%:*}" = kill ]; then mode=kill; point=${point#kill:}; fi
  local pts=("${point%%>*}"); [ "${point#*>}" != "$point" ] && pts+=("${point#*>}")
  local load="$w"; [ $scen != fresh ] && load="$w/iter_0000003"
  for p in "${pts[@]}"; do
    set +e
    env "$@" DT_CRASH_AT="$p" DT_CRASH_MODE=$mode "$DETRAIN" train "${common[@]}" --train-iters 6 \
      --load "$load" --save "$w" --save-interval 3 2>"$d/err"
    local rc=$?
    set -e
    local want=77; [ $mode = kill ] && want=137
    [ $rc -eq $want ] || { cat "$d/err"; fail "$scen $spec: exit $rc at $p, expected $want (point never reached?)"; }
  done
  [ "$(cat "$w/$T")" = "$expect" ] || fail "$scen $spec: tracker is $(cat "$w/$T"), expected $expect"
  "$DETRAIN" ckpt verify "$w" >"$d/verify" 2>&1 || { cat "$d/verify"; fail "$scen $spec: the tracker's checkpoint does not verify"; }
  grep -q "iter_000000$expect: OK" "$d/verify" || fail "$scen $spec: verify did not check iter $expect"
  for f in model.safetensors optimizer.safetensors config.json state.json env.json; do
    cmp -s "$src/iter_0000003/$f" "$w/iter_0000003/$f" || fail "$scen $spec: iter_0000003/$f changed"
  done
  # resume: from the tracker when it still names step 3, else again from step 3
  local from="$w"; [ "$expect" = 6 ] && from="$w/iter_0000003"
  env "$@" "$DETRAIN" train "${common[@]}" --train-iters 6 --load "$from" --save "$w" --log-dir "$d/lw"
  "$DETRAIN" compare "$d/lref" "$d/lw" | grep -q "bitwise identical: 3 steps (steps 4-6)" \
    || fail "$scen $spec: resumed metrics differ"
  "$DETRAIN" compare "$d/ref" "$w" >"$d/cmp" || { cat "$d/cmp"; fail "$scen $spec: step-6 checkpoint differs"; }
  [ "$(cat "$w/$T")" = 6 ] || fail "$scen $spec: tracker is not 6 after the resumed run"
  ls "$w" | grep -q '\.tmp$\|\.old$' && fail "$scen $spec: the resumed run left $(ls "$w")"
  n=$((n + 1))
}

# 1. fresh save of step 6 (no iter_0000006 yet); the tracker names 3 until its own rename
for p in $(file_points "") "${inner[@]}" after-rename:iter_0000006 after-dirsync:iter_0000006 \
         before-tracker after-tracker kill:after-rename:model.safetensors kill:partial-write:state.json \
         "partial-write:state.json>removing:iter_0000006.tmp" "after-dirsync:env.json>removed:iter_0000006.tmp"; do
  case "$p" in after-tracker|*:$T) expect=6;; *) expect=3;; esac
  case "$p" in after-open:$T|partial-write:$T|before-fsync:$T|before-rename:$T) expect=3;; esac
  run_case fresh "$p" $expect
done
nfresh=$n

# 2. replacing iter_0000006 that the tracker names (resumed from step 3 into the same save
#    dir): the directories are exchanged atomically, so the tracker always names 6 and
#    iter_0000006 is always the whole old or the whole new checkpoint
for p in $(file_points "") "${inner[@]}" after-rename:iter_0000006 after-dirsync:iter_0000006 \
         removing:iter_0000006.tmp removed:iter_0000006.tmp before-tracker after-tracker \
         kill:after-dirsync:env.json kill:after-rename:iter_0000006 kill:removing:iter_0000006.tmp; do
  run_case replace "$p" 6
done
nreplace=$((n - nfresh))

# 3. the same without an atomic exchange: the tracker is first pointed at step 3 (the
#    newest other checkpoint that verifies), then the old iter_0000006 goes aside
for p in before-tracker "after-tracker" after-rename:$T old-aside:iter_0000006 \
         after-rename:iter_0000006 after-dirsync:iter_0000006 removing:iter_0000006.old \
         removed:iter_0000006.old "before-tracker@2" "after-rename:$T@2" "after-tracker@2" \
         kill:old-aside:iter_0000006; do
  case "$p" in before-tracker) expect=6;; *@2) expect=6;; *) expect=3;; esac
  [ "$p" = "before-tracker@2" ] && expect=3
  run_case fallback "$p" $expect DT_CKPT_NO_EXCHANGE=1
done

# the fallback with no other checkpoint to name meanwhile refuses, leaving the save dir
# as it was (only the checkpoint the tracker names)
w="$d/w"; rm -rf "$w"; mkdir "$w"; cp -r "$d/full/iter_0000006" "$w/"; echo 6 >"$w/$T"
set +e
DT_CKPT_NO_EXCHANGE=1 "$DETRAIN" train "${common[@]}" --train-iters 6 --load "$d/base" --save "$w" \
  --save-overwrite 2>"$d/err"; rc=$?
set -e
[ $rc -ne 0 ] || fail "fallback without another checkpoint: the save was not refused"
grep -q "cannot replace .*iter_0000006, which .* names, atomically" "$d/err" || fail "refusal message: $(cat "$d/err")"
[ "$(cat "$w/$T")" = 6 ] && "$DETRAIN" ckpt verify "$w" >/dev/null && [ "$(ls "$w" | wc -l)" = 2 ] \
  || fail "the refused save changed the save dir: $(ls "$w")"
cmp -s "$w/iter_0000006/state.json" "$d/full/iter_0000006/state.json" || fail "refused save changed iter_0000006"

# the reproduction of issue 20: 6 steps saved every 2, resumed from step 4 into the same
# save dir, killed once env.json of the new step 6 is durable (a second later, so env.json's
# start time differs from the old one's)
r="$d/r"; c6=("${common[@]}" --train-iters 6)
"$DETRAIN" train "${c6[@]}" --save "$r" --save-interval 2
sleep 1.1
set +e
DT_CRASH_AT=after-dirsync:env.json DT_CRASH_MODE=kill "$DETRAIN" train "${c6[@]}" --load "$r/iter_0000004" \
  --save "$r" --save-interval 2 2>/dev/null; rc=$?
set -e
[ $rc -eq 137 ] || fail "issue reproduction: exit $rc, expected 137"
"$DETRAIN" ckpt verify "$r" >/dev/null || fail "issue reproduction: the tracker's checkpoint does not verify"
echo "crash: $n crash points passed ($nfresh fresh, $nreplace replacing, $((n - nfresh - nreplace)) fallback), fallback refusal and the issue's reproduction"
