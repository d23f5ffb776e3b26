#!/usr/bin/env bash
# A special file (a real fifo, a symlink to /dev/zero, a directory) in place of a file
# detrain reads never hangs it: `ckpt verify`, `train --load`, `compare` of checkpoints
# and of logs, `trace-diff`, `--init-from-hf` and `--data-path` refuse it with an error
# naming the file and its kind (src/core/regular_file.h). Every command runs under a
# timeout: exit 124 means it hung. A fifo planted under a save's temporary name does not
# block the save either (durable.h: temp files are created afresh).
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 1 --hidden-size 32 --seq-length 16 --micro-batch-size 2
        --lr-decay-iters 8 --eval-interval 0 --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }
"$DETRAIN" train "${common[@]}" --train-iters 2 --save "$d/base" --log-dir "$d/lbase" --trace-level op \
  --trace-dir "$d/tbase"

# expect RC WANT-TEXT cmd...: the command exits RC (not 124: a hang) and says WANT-TEXT
expect() {
  local rc_want=$1 want=$2; shift 2
  set +e; timeout 20 "$@" >"$d/out" 2>"$d/err"; local rc=$?; set -e
  [ $rc -ne 124 ] || fail "hung (killed after 20 s): $*"
  [ $rc -eq "$rc_want" ] || fail "exit $rc, expected $rc_want: $* : $(cat "$d/err")"
  grep -qF -- "$want" "$d/err" || fail "stderr lacks '$want': $* : $(cat "$d/err")"
}
n=0
for f in model.safetensors config.json optimizer.safetensors env.json state.json latest_checkpointed_iteration.txt; do
  for kind in fifo zero dir; do
    c="$d/c"; rm -rf "$c"; cp -r "$d/base" "$c"
    p="$c/iter_0000002/$f"; [ $f = latest_checkpointed_iteration.txt ] && p="$c/$f"
    rm -f "$p"
    case $kind in fifo) mkfifo "$p"; what="is a fifo, not a regular file";;
                  zero) ln -s /dev/zero "$p"; what="is a character device, not a regular file";;
                  dir) mkdir "$p"; what="is a directory, not a regular file";; esac
    expect 1 "'$p' $what" "$DETRAIN" ckpt verify "$c"
    expect 2 "'$p' $what" "$DETRAIN" train "${common[@]}" --train-iters 4 --load "$c" --save "$c"
    expect 2 "'$p' $what" "$DETRAIN" compare "$d/base" "$c"
    n=$((n + 1))
  done
done

# a log's metrics.jsonl and env.json, a trace rank file, Hugging Face config.json, a shard
mkdir "$d/l1" "$d/l2"; mkfifo "$d/l1/metrics.jsonl"; cp "$d/lbase/metrics.jsonl" "$d/l2/"
expect 2 "metrics.jsonl' is a fifo" "$DETRAIN" compare "$d/l1" "$d/l2"
mkdir "$d/t1"; mkfifo "$d/t1/rank_000000.trace"
expect 2 "is a fifo, not a regular file" "$DETRAIN" trace-diff "$d/tbase/rank_000000.trace" "$d/t1/rank_000000.trace"
mkdir "$d/hf"; cp "$d/base/iter_0000002/model.safetensors" "$d/hf/"; mkfifo "$d/hf/config.json"
expect 2 "config.json' is a fifo, not a regular file" "$DETRAIN" train "${common[@]}" --train-iters 1 --init-from-hf "$d/hf"
mkfifo "$d/shard.bin"
expect 2 "not a regular file" "$DETRAIN" train "${common[@]}" --train-iters 1 --data-path "$d/shard.bin"
expect 2 "not a regular file" "$DETRAIN" data info "$d/shard.bin"

# a fifo under the tracker's and a file's temporary names: the save replaces them
mkdir "$d/s"; mkfifo "$d/s/latest_checkpointed_iteration.txt.tmp"
set +e; timeout 20 "$DETRAIN" train "${common[@]}" --train-iters 2 --save "$d/s"; rc=$?; set -e
[ $rc -eq 0 ] || fail "a fifo at the tracker's temporary name: exit $rc (124: the save hung)"
"$DETRAIN" ckpt verify "$d/s" >/dev/null || fail "the save over a planted fifo does not verify"
echo "special files: $n checkpoint cases and 6 other readers passed"
