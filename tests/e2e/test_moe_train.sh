#!/usr/bin/env bash
# MoE training on the CPU end to end (issue 23; docs/moe.md), a 2-layer 64-wide model:
#   - 4 experts top-2 in every layer: two deterministic runs (2 threads and 1 thread) are
#     bitwise identical (compare on every *_hex field, cmp of both checkpoint files), the
#     loss decreases, moe_aux_loss is logged beside it and nothing is dropped;
#   - a run resumed from its step-6 checkpoint equals the uninterrupted one (steps 7-12
#     and the final checkpoint);
#   - capacity factor 1.0 with two micro-batches a step drops assignments (counted in
#     moe_dropped_tokens) and repeats bitwise; --moe-layer-freq 2 makes layer 0 MoE and
#     layer 1 dense (the checkpoint's tensors say so) and repeats bitwise;
#   - the default (non-deterministic) branches train too;
#   - the checkpoint is detrain's native layout, not a GPT-2: config.json says
#     detrain_moe and --init-from-hf refuses it; bad MoE flags and --device cuda are refused
#     with named errors;
#   - --inject-nondeterminism moe_combine@3 / moe_dprob@3: trace-diff names the op as the
#     origin at step 3.
set -uo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail=0
base=(--model tiny --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --micro-batch-size 4
      --eval-interval 0 --quiet --deterministic-mode --lr 3e-3 --lr-warmup-iters 2)
moe=(--num-experts 4 --moe-router-topk 2)
train() { "$DETRAIN" train "${base[@]}" "$@"; }
bad() { echo "FAIL: $*"; fail=1; }
same_ckpt() { # same_ckpt DIR_A DIR_B
  cmp -s "$1/model.safetensors" "$2/model.safetensors" && cmp -s "$1/optimizer.safetensors" "$2/optimizer.safetensors"
}

# two deterministic runs, 2 threads and 1 thread
train "${moe[@]}" --train-iters 12 --threads 2 --save "$d/a" --save-interval 6 --log-dir "$d/la" || bad "run a"
train "${moe[@]}" --train-iters 12 --threads 1 --save "$d/b" --log-dir "$d/lb" || bad "run b"
"$DETRAIN" compare "$d/la" "$d/lb" >/dev/null || bad "runs a and b differ (compare)"
same_ckpt "$d/a/iter_0000012" "$d/b/iter_0000012" || bad "checkpoints of runs a and b differ"
python3 - "$d/la/metrics.jsonl" <<'PY' || fail=1
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0], rows[-1]
ok = True
for r in rows:
    if "moe_aux_loss_hex" not in r or "moe_dropped_tokens_hex" not in r:
        print("FAIL: step %d lacks moe_aux_loss/moe_dropped_tokens" % r["step"]); ok = False; break
    if not (0 < r["moe_aux_loss"] < 1) or r["moe_dropped_tokens"] != 0:
        print("FAIL: step %d: aux %r dropped %r" % (r["step"], r["moe_aux_loss"], r["moe_dropped_tokens"])); ok = False
if not last["loss"] < first["loss"] - 0.3:
    print("FAIL: the loss does not decrease: %r -> %r" % (first["loss"], last["loss"])); ok = False
if ok: print("ok: two runs bitwise identical, loss %.4f -> %.4f, aux %.5f" % (first["loss"], last["loss"], last["moe_aux_loss"]))
sys.exit(0 if ok else 1)
PY

# resume from step 6 equals the uninterrupted run
train "${moe[@]}" --train-iters 12 --load "$d/a/iter_0000006" --save "$d/c" --log-dir "$d/lc" || bad "resumed run"
"$DETRAIN" compare "$d/la" "$d/lc" >/dev/null || bad "the resumed run differs from the uninterrupted one"
same_ckpt "$d/a/iter_0000012" "$d/c/iter_0000012" && echo "ok: resume from step 6 is bitwise the uninterrupted run" ||
  bad "the resumed run's final checkpoint differs"

# capacity dropping, two micro-batches a step, twice
cap=("${moe[@]}" --moe-expert-capacity-factor 1.0 --global-batch-size 8 --train-iters 6)
train "${cap[@]}" --log-dir "$d/lcap1" || bad "capacity run 1"
train "${cap[@]}" --threads 1 --log-dir "$d/lcap2" || bad "capacity run 2"
"$DETRAIN" compare "$d/lcap1" "$d/lcap2" >/dev/null || bad "capacity runs differ"
python3 - "$d/lcap1/metrics.jsonl" <<'PY' || fail=1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
dropped = [r["moe_dropped_tokens"] for r in rows]
# at most (2 layers x 2 micro-batches x N K = 4*32*2) assignments a step
assert all(0 <= x <= 2 * 2 * 256 and x == int(x) for x in dropped), dropped
assert sum(dropped) > 0, ("capacity factor 1.0 dropped nothing", dropped)
print("ok: capacity 1.0 drops %s assignments a step, two runs bitwise identical" % [int(x) for x in dropped])
PY

# --moe-layer-freq 2: layer 0 MoE, layer 1 dense
train "${moe[@]}" --moe-layer-freq 2 --train-iters 4 --save "$d/f" --log-dir "$d/lf1" || bad "layer-freq run"
train "${moe[@]}" --moe-layer-freq 1,0 --train-iters 4 --log-dir "$d/lf2" || bad "layer pattern run"
"$DETRAIN" compare "$d/lf1" "$d/lf2" >/dev/null || bad "--moe-layer-freq 2 and 1,0 differ"
python3 - "$d/f/iter_0000004" <<'PY' || fail=1
import json, struct, sys
d = sys.argv[1]
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = {k: v for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__"}
c = json.load(open(d + "/config.json"))
assert c["model_type"] == "detrain_moe" and c["moe_layers"] == [1, 0], c
assert h["fcw"]["shape"] == [1, 256, 64], h["fcw"]
assert h["moe_w1"]["shape"] == [1, 4, 256, 64] and h["moe_wr"]["shape"] == [1, 4, 64], (h["moe_w1"], h["moe_wr"])
assert "transformer.h.0.mlp.c_fc.weight" not in h
print("ok: --moe-layer-freq 2 = 1,0: one MoE and one dense layer in the native checkpoint")
PY

# the default branches (atomic combine and dprob, threaded GEMMs) train
"$DETRAIN" train --model tiny --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
  --micro-batch-size 4 --eval-interval 0 --quiet "${moe[@]}" --train-iters 3 --log-dir "$d/ldef" ||
  bad "default-mode MoE run"
grep -q '"moe_aux_loss_hex"' "$d/ldef/metrics.jsonl" || bad "default-mode run lacks moe_aux_loss"

# refusals, each naming the problem
expect() { # expect "<message fragment>" cmd...
  local want=$1; shift
  local out; out=$("$@" 2>&1); local rc=$?
  if [ $rc -eq 0 ] || ! grep -qF -- "$want" <<<"$out"; then bad "$* -> rc=$rc: $out (wanted: $want)"
  else echo "ok: refused: $want"; fi
}
expect "--moe-router-topk 5 exceeds --num-experts 4" train --num-experts 4 --moe-router-topk 5 --train-iters 1
expect "the pattern has 3 entries; the model has 2 layers" train "${moe[@]}" --moe-layer-freq 1,0,1 --train-iters 1
expect "a pattern holds 0 or 1 entries" train "${moe[@]}" --moe-layer-freq 1,x --train-iters 1
expect "selects no layer" train "${moe[@]}" --moe-layer-freq 0,0 --train-iters 1
expect "--moe-layer-freq '0': expected N >= 1" train "${moe[@]}" --moe-layer-freq 0 --train-iters 1
expect "--moe-router-topk needs --num-experts > 0" train --moe-router-topk 1 --train-iters 1
expect "--moe-expert-capacity-factor needs --num-experts > 0" train --moe-expert-capacity-factor 1 --train-iters 1
expect "--num-experts 2000 is out of range" train --num-experts 2000 --train-iters 1
expect "--moe-aux-loss-coeff -1 is out of range" train "${moe[@]}" --moe-aux-loss-coeff -1 --train-iters 1
expect "the CUDA backend has no MoE layers yet" train "${moe[@]}" --device cuda --train-iters 1
expect "is a detrain MoE model, not a Hugging Face GPT-2" train --init-from-hf "$d/a/iter_0000012" --train-iters 1
train --train-iters 1 --save "$d/dense" || bad "dense run"
expect "--init-from-hf loads a dense GPT-2; it cannot initialise an MoE model" \
  train "${moe[@]}" --init-from-hf "$d/dense/iter_0000001" --train-iters 1
expect "was saved with num_experts = 4 but this run has 0 (--num-experts)" train --load "$d/a/iter_0000006" --train-iters 12

# an injection into the MoE path is found by trace-diff at its op
tr=("${moe[@]}" --train-iters 4 --debug-allow-injection --trace-level op --trace-steps 3-4)
train "${tr[@]}" --trace-dir "$d/t-clean" || bad "traced clean run"
for op in moe_combine moe_dprob; do
  train "${tr[@]}" --inject-nondeterminism "$op@3" --trace-dir "$d/t-$op" || { bad "injected run $op"; continue; }
  "$DETRAIN" trace-diff --json "$d/t-clean" "$d/t-$op" > "$d/$op.json"
  python3 - "$d/$op.json" "$op" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1])); op = sys.argv[2]
fm = r["ranks"][0]["first_mismatch"]
assert fm["class"] == "origin_candidate" and fm["event"]["op"] == op and fm["event"]["step"] == 3, fm
print("ok: trace-diff names %s at step 3 (%s)" % (op, fm["event"]["scope"]))
PY
done
exit $fail
