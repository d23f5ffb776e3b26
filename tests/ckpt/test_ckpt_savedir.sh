#!/usr/bin/env bash
# A --save directory holding checkpoints of another run is refused (docs/checkpoints.md,
# "The save directory"): it holds a tracker or an iter_NNNNNNN directory and this run does
# not resume from it. The refusal names the directory, what it holds and what to do, and
# writes nothing (the save dir is unchanged, no log dir is created). --load of the save
# dir (or one of its iteration directories, under any spelling) resumes it;
# --save-overwrite replaces the checkpoints of the steps the new run saves.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 1 --hidden-size 32 --seq-length 16 --micro-batch-size 2
        --lr-decay-iters 8 --eval-interval 0 --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }
sums() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum); }

"$DETRAIN" train "${common[@]}" --train-iters 4 --save "$d/W" --save-interval 2
sums "$d/W" >"$d/W.sum"
# refused: expect_refused NAME WANT-TEXT [train flags...]
expect_refused() {
  local name=$1 want=$2; shift 2
  set +e
  "$DETRAIN" train "${common[@]}" --log-dir "$d/l_$name" "$@" 2>"$d/err"; local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$name: exit $rc, expected 2 (refused): $(cat "$d/err")"
  grep -qF -- "$want" "$d/err" || fail "$name: stderr lacks '$want': $(cat "$d/err")"
  grep -qF -- "--save-overwrite" "$d/err" || fail "$name: the message does not say what to do"
  [ ! -e "$d/l_$name" ] || fail "$name: the refused run created its log dir"
  sums "$d/W" | cmp -s - "$d/W.sum" || fail "$name: the refused run changed the save dir"
  echo "ok $name: $(head -c 300 "$d/err")"
}

# a fresh run (no --load) into W
expect_refused fresh "--save $d/W holds checkpoints of another run (latest_checkpointed_iteration.txt names step 4; 2 iteration directories, iter_0000002 to iter_0000004) and this run does not resume from it (no --load)" \
  --train-iters 4 --save "$d/W"
# a run resumed from a checkpoint in another directory
"$DETRAIN" train "${common[@]}" --train-iters 2 --save "$d/other"
expect_refused other_load "--load names no checkpoint in it" --train-iters 4 --load "$d/other" --save "$d/W"
# iteration directories without a tracker are checkpoints too
cp -r "$d/W" "$d/W2"; rm "$d/W2/latest_checkpointed_iteration.txt"
set +e; "$DETRAIN" train "${common[@]}" --train-iters 4 --save "$d/W2" 2>"$d/err"; rc=$?; set -e
[ $rc -eq 2 ] && grep -qF "(2 iteration directories, iter_0000002 to iter_0000004)" "$d/err" \
  || fail "no tracker: exit $rc, $(cat "$d/err")"

# resuming W under several spellings is allowed (the same directory, by inode)
ln -s "$d/W" "$d/Wlink"; ln -s "$d/Wr" "$d/Wrlink"
for l in "$d/Wr" "$d/Wr/iter_0000002" "$d/Wrlink/iter_0000004" "$d/Wr/../Wr/iter_0000002/"; do
  rm -rf "$d/Wr"; cp -r "$d/W" "$d/Wr"
  "$DETRAIN" train "${common[@]}" --train-iters 6 --load "$l" --save "$d/Wr" \
    || fail "resuming from $l into its own save dir was refused"
  [ "$(cat "$d/Wr/latest_checkpointed_iteration.txt")" = 6 ] || fail "resume from $l: tracker is not 6"
done
"$DETRAIN" train "${common[@]}" --train-iters 6 --load "$d/Wlink" --save "$d/W" \
  || fail "--load through a symlink to the save dir was refused"

# a save dir holding no checkpoint (empty, a lock file, a leftover iter_N.tmp) is fine
mkdir -p "$d/E/iter_0000002.tmp"; touch "$d/E/.detrain.lock" "$d/E/notes.txt"
"$DETRAIN" train "${common[@]}" --train-iters 2 --save "$d/E" || fail "a save dir without checkpoints was refused"
[ ! -e "$d/E/iter_0000002.tmp" ] && [ -e "$d/E/notes.txt" ] || fail "E: $(ls -a "$d/E")"

# --save-overwrite: another run (another seed) replaces the checkpoints of its steps
"$DETRAIN" train "${common[@]}" --train-iters 2 --seed 7 --save "$d/ref7"
"$DETRAIN" train "${common[@]}" --train-iters 2 --seed 7 --save "$d/W" --save-overwrite \
  || fail "--save-overwrite was refused"
[ "$(cat "$d/W/latest_checkpointed_iteration.txt")" = 2 ] || fail "overwrite: the tracker does not name the new run's step"
"$DETRAIN" compare "$d/ref7" "$d/W" >/dev/null || fail "overwrite: iter_0000002 is not the new run's checkpoint"
"$DETRAIN" ckpt verify "$d/W/iter_0000006" >/dev/null || fail "overwrite: other steps must stay as they were"
echo "savedir: all cases passed"
