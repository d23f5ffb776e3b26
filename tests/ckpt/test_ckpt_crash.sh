#!/usr/bin/env bash
# Crash safety of checkpoint saves. For every crash point of a save (durable.h lists them;
# ckpt.h says which files a save writes), a run resumed from the step-10 checkpoint is
# killed (DT_CRASH_AT) while saving step 20. Then:
#   - the process died at that point (exit 77, or SIGKILL with DT_CRASH_MODE=kill);
#   - the tracker still names 10 (20 once the new tracker was renamed into place: the save
#     had completed);
#   - `detrain ckpt verify` accepts the save directory, and iter_0000010 is byte-identical
#     to before the crash;
#   - resuming from the save directory reproduces the uninterrupted run's step-20
#     checkpoint bitwise, and its metrics.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2
        --global-batch-size 4 --hidden-dropout 0.1 --attention-dropout 0.1 --lr-decay-iters 20
        --eval-interval 0 --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }

# the uninterrupted reference, and the step-10 checkpoint every case starts from
"$DETRAIN" train "${common[@]}" --train-iters 20 --save "$d/ref" --save-interval 10 --log-dir "$d/lref"
"$DETRAIN" train "${common[@]}" --train-iters 10 --save "$d/base"

points=()
for f in model.safetensors config.json optimizer.safetensors state.json latest_checkpointed_iteration.txt; do
  for p in after-open partial-write before-fsync before-rename after-rename after-dirsync; do
    points+=("$p:$f")
  done
done
points+=(dir-created:iter_0000020 header-written:model.safetensors header-written:optimizer.safetensors
         "tensor-written:model.safetensors@5" "tensor-written:optimizer.safetensors@20" "tensor-written@40"
         after-dirsync:env.json before-tracker after-tracker)

n=0
for point in "${points[@]}" "kill:after-rename:model.safetensors" "kill:partial-write:state.json"; do
  mode=exit
  if [ "${point%%:*}" = kill ]; then mode=kill; point=${point#kill:}; fi
  w="$d/w"; rm -rf "$w" "$d/lw"; cp -r "$d/base" "$w"
  set +e
  DT_CRASH_AT="$point" DT_CRASH_MODE=$mode "$DETRAIN" train "${common[@]}" --train-iters 20 --load "$w" \
    --save "$w" --save-interval 10 2>"$d/err"
  rc=$?
  set -e
  want=77; [ $mode = kill ] && want=137
  [ $rc -eq $want ] || { cat "$d/err"; fail "$point ($mode): exit $rc, expected $want (point never reached?)"; }
  # once the new tracker is renamed into place the save is complete (a process crash cannot
  # undo a rename; the directory fsync only matters for power loss)
  case "$point" in
    after-tracker|after-rename:latest_*|after-dirsync:latest_*) expect=20;;
    *) expect=10;;
  esac
  [ "$(cat "$w/latest_checkpointed_iteration.txt")" = $expect ] || fail "$point: tracker is not $expect"
  "$DETRAIN" ckpt verify "$w" >"$d/verify" || fail "$point: the surviving checkpoint does not verify"
  grep -q "iter_00000$expect: OK" "$d/verify" || fail "$point: verify did not check iter $expect"
  for f in model.safetensors optimizer.safetensors config.json state.json env.json; do
    cmp -s "$d/base/iter_0000010/$f" "$w/iter_0000010/$f" || fail "$point: iter_0000010/$f changed"
  done
  if [ $expect = 10 ]; then
    "$DETRAIN" train "${common[@]}" --train-iters 20 --load "$w" --save "$w" --log-dir "$d/lw"
    "$DETRAIN" compare "$d/lref" "$d/lw" | grep -q "bitwise identical: 10 steps (steps 11-20)" \
      || fail "$point: resumed metrics differ"
  fi
  "$DETRAIN" compare "$d/ref" "$w" >"$d/cmp" || { cat "$d/cmp"; fail "$point: step-20 checkpoint differs"; }
  n=$((n + 1))
done
echo "crash: $n crash points passed"
