#!/usr/bin/env bash
# Run locks (src/core/runlock.h): while a run holds --save W and --log-dir L, a second run
# on either gets an error naming the directory and the holder's pid and writes nothing
# there; after the holder is killed with SIGKILL its locks do not block, and a resumed run
# takes both directories. One run may use one directory as both --save and --log-dir.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d)
holder=
cleanup() { [ -n "$holder" ] && kill -9 "$holder" 2>/dev/null; rm -rf "$d"; }
trap cleanup EXIT
common=(--model tiny --num-layers 1 --hidden-size 32 --seq-length 16 --micro-batch-size 2
        --lr-decay-iters 8 --eval-interval 0 --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }

# the holder: a long run saving every step
"$DETRAIN" train "${common[@]}" --train-iters 1000000 --save "$d/W" --save-interval 1 --log-dir "$d/L" &
holder=$!
for _ in $(seq 200); do
  [ "$(cat "$d/W/.detrain.lock" 2>/dev/null)" = "$holder" ] && [ "$(cat "$d/L/.detrain.lock" 2>/dev/null)" = "$holder" ] \
    && [ -s "$d/W/latest_checkpointed_iteration.txt" ] && break
  kill -0 "$holder" 2>/dev/null || fail "the holder run died"
  sleep 0.05
done
[ "$(cat "$d/W/.detrain.lock")" = "$holder" ] || fail "the lock file does not record the holder's pid $holder"

# second runs on the same save dir (resuming it, as a restart would) and on the same log dir
set +e
"$DETRAIN" train "${common[@]}" --train-iters 1000000 --load "$d/W" --save "$d/W" --log-dir "$d/L2" 2>"$d/err1"; rc1=$?
"$DETRAIN" train "${common[@]}" --train-iters 2 --log-dir "$d/L" 2>"$d/err2"; rc2=$?
set -e
kill -0 "$holder" 2>/dev/null || fail "the holder died while the second runs were refused"
[ $rc1 -eq 2 ] || fail "second run on --save: exit $rc1: $(cat "$d/err1")"
grep -qF -- "--save $d/W is in use by another run (pid $holder holds $d/W/.detrain.lock)" "$d/err1" \
  || fail "second run on --save: $(cat "$d/err1")"
[ ! -e "$d/L2" ] || fail "the refused run created its log dir"
[ $rc2 -eq 2 ] || fail "second run on --log-dir: exit $rc2: $(cat "$d/err2")"
grep -qF -- "--log-dir $d/L is in use by another run (pid $holder holds $d/L/.detrain.lock)" "$d/err2" \
  || fail "second run on --log-dir: $(cat "$d/err2")"
echo "ok refused: $(cat "$d/err1")"

# kill -9: the kernel drops the flocks; the lock files stay with the dead pid in them
kill -9 "$holder"; wait "$holder" 2>/dev/null || true
dead=$holder; holder=
[ "$(cat "$d/W/.detrain.lock")" = "$dead" ] || fail "the lock file should still name the dead pid"
step=$(cat "$d/W/latest_checkpointed_iteration.txt")
"$DETRAIN" train "${common[@]}" --train-iters $((step + 2)) --load "$d/W" --save "$d/W" --log-dir "$d/L" \
  2>"$d/err3" || fail "a lock left by a killed run blocks: $(cat "$d/err3")"
[ "$(cat "$d/W/latest_checkpointed_iteration.txt")" = $((step + 2)) ] || fail "the resumed run did not save"
"$DETRAIN" ckpt verify "$d/W" >/dev/null || fail "the resumed run's checkpoint does not verify"

# a lock held by any other process (here flock(1)) is refused too; one directory may be
# both --save and --log-dir of one run
flock "$d/W/.detrain.lock" sleep 30 & holder=$!
for _ in $(seq 100); do
  set +e; flock -n "$d/W/.detrain.lock" true; r=$?; set -e
  [ $r -ne 0 ] && break
  sleep 0.05
done
set +e; "$DETRAIN" train "${common[@]}" --train-iters 40 --load "$d/W" --save "$d/W" 2>"$d/err4"; rc4=$?; set -e
grep -qF "is in use by another run" "$d/err4" && [ $rc4 -eq 2 ] || fail "flock(1) holder: exit $rc4, $(cat "$d/err4")"
kill "$holder"; wait "$holder" 2>/dev/null || true; holder=
"$DETRAIN" train "${common[@]}" --train-iters 2 --save "$d/S" --log-dir "$d/S" || fail "--save DIR --log-dir DIR"
[ -s "$d/S/metrics.jsonl" ] && [ -d "$d/S/iter_0000002" ] || fail "same dir: $(ls "$d/S")"
echo "runlock: all cases passed"
