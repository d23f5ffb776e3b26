#!/usr/bin/env bash
# Hugging Face compatibility of checkpoints and --init-from-hf:
#   - a checkpoint's iteration directory is a GPT2LMHeadModel directory: model.safetensors
#     passes the independent stdlib reader (tests/ckpt/st_spec_check.py --hf-dir: spec,
#     names and shapes against config.json) and optimizer.safetensors follows the spec;
#   - --init-from-hf DIR takes the sizes from DIR/config.json when no size flag is given
#     and loads the weights exactly: with lr = 0 the saved weights are byte-identical;
#   - a size flag that contradicts config.json is a named error, nothing written;
#   - training from the trained weights starts at a lower loss than from the seeded init.
set -euo pipefail
: "${DETRAIN:?}"
cd "$(dirname "$0")/../.."
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
sizes=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --max-position-embeddings 32)
run=(--model tiny --seq-length 16 --micro-batch-size 2 --eval-interval 0 --deterministic-mode --threads 1 --quiet)

"$DETRAIN" train "${run[@]}" "${sizes[@]}" --train-iters 30 --lr 3e-3 --save "$d/a" --log-dir "$d/la"
it="$d/a/iter_0000030"
python3 tests/ckpt/st_spec_check.py --hf-dir "$it"
python3 tests/ckpt/st_spec_check.py "$it/optimizer.safetensors"
python3 - "$it/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
want = {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "n_positions": 32, "vocab_size": 256}
bad = {k: (c.get(k), v) for k, v in want.items() if c.get(k) != v}
assert not bad, bad
PY

# sizes from config.json (no size flags; the tiny preset alone would be 4 layers, 128 wide);
# lr = 0 leaves the weights as loaded
"$DETRAIN" train "${run[@]}" --init-from-hf "$it" --train-iters 1 --lr 0 --min-lr 0 --save "$d/b"
cmp "$it/model.safetensors" "$d/b/iter_0000001/model.safetensors" || fail "weights changed on import"
cmp "$it/config.json" "$d/b/iter_0000001/config.json" || fail "config.json changed on import"

# contradicting size flag: named error, nothing written
set +e
"$DETRAIN" train "${run[@]}" --init-from-hf "$it" --hidden-size 32 --save "$d/c" --log-dir "$d/lc" 2>"$d/err"
rc=$?
set -e
[ $rc -ne 0 ] && grep -q '"n_embd" is 64 but the model has --hidden-size 32' "$d/err" || fail "mismatch: $(cat "$d/err")"
[ ! -e "$d/c" ] && [ ! -e "$d/lc" ] || fail "mismatch: something was written"
set +e; "$DETRAIN" train "${run[@]}" --init-from-hf "$d/nowhere" 2>"$d/err"; rc=$?; set -e
[ $rc -ne 0 ] && grep -q "init-from-hf" "$d/err" || fail "missing dir: $(cat "$d/err")"

# the imported weights are the trained ones: step-1 loss below a fresh start's
"$DETRAIN" train "${run[@]}" --init-from-hf "$it" --train-iters 1 --log-dir "$d/lhf"
"$DETRAIN" train "${run[@]}" "${sizes[@]}" --train-iters 1 --log-dir "$d/lfresh"
python3 - "$d/lhf/metrics.jsonl" "$d/lfresh/metrics.jsonl" <<'PY'
import json, sys
hf, fresh = (json.loads(open(p).readline())["loss"] for p in sys.argv[1:3])
print("step-1 loss: from HF weights %.4f, fresh init %.4f" % (hf, fresh))
assert hf < fresh - 0.3, (hf, fresh)
PY
echo "hf: all cases passed"
