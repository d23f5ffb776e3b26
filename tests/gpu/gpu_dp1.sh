#!/usr/bin/env bash
# Training through the NCCL engine with one rank (src/dist/comm_nccl.cu under
# `detrain-cuda train --dist-engine nccl`, launched as DETRAIN_RANK=0 DETRAIN_WORLD_SIZE=1
# with a file rendezvous), deterministic mode:
#  - two runs are bitwise identical (`detrain compare` on metrics and checkpoints, cmp on
#    the weights and optimizer state);
#  - a run saved at step 10 and resumed to 20 equals the uninterrupted run, bit for bit;
#  - the bits equal the single-process path's (--dist-engine single): one rank through
#    NCCL reduces nothing, so nothing may change;
#  - env.json records the NCCL engine and the NCCL version;
#  - NCCL_ALGO and NCCL_PROTO values with no deterministic guarantee are refused before
#    anything runs, naming the variable; a default-mode run through NCCL trains too.
# The code it checks: src/dist/comm_nccl.cu (the engine), src/backend/cuda_backend.cu (the
# gradient hook and the losses over ranks), src/model/cuda/step.cu (dt_gpt_cuda_reduce_grads),
# and the whole GPU model it trains: src/model/cuda/ (model.cuh, create.cu, linear.cu,
# forward.cu, backward.cu, graphs.cu, streams.cu, trace.cu, describe.cu).
# Needs libnccl.so.2 on LD_LIBRARY_PATH (tests/gpu/run_gpu_tests.sh and bench/gpu.sh put
# bench/find_nccl.sh's directory there). Not named test_*.sh: CI (no GPU) must not run it.
set -u
cd "$(dirname "$0")/../.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
W=${1:-$(mktemp -d)}
mkdir -p "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
if ! "$D" train --help 2>&1 | grep -q -- "--dist-engine"; then
  echo "FAIL: $D has no --dist-engine flag (the communicator factory, dt_comm_create, is not in this build): nothing to test"
  exit 1
fi
if ! bash bench/find_nccl.sh >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q libnccl.so.2; then
  echo "warning: bench/find_nccl.sh finds no libnccl.so.2; the NCCL runs below will say what is missing"
fi
common="--device cuda --model small --micro-batch-size 8 --global-batch-size 16 --lr-decay-iters 20
        --eval-interval 5 --log-interval 5 --hidden-dropout 0.1 --attention-dropout 0.1 --deterministic-mode"
# one rank through NCCL: detrain's own launch variables, a file rendezvous per run
nccl() { local tag=$1; shift
  DETRAIN_RANK=0 DETRAIN_WORLD_SIZE=1 DETRAIN_LOCAL_RANK=0 DETRAIN_RENDEZVOUS="file:$W/rv_$tag" \
    "$D" train "$@" --dist-engine nccl; }
nccl a $common --train-iters 20 --save "$W/sa" --save-interval 10 --log-dir "$W/a" >"$W/a.out" 2>&1 \
  || fail "NCCL run a: $(tail -3 "$W/a.out")"
nccl b $common --train-iters 20 --save "$W/sb" --save-interval 10 --log-dir "$W/b" >"$W/b.out" 2>&1 \
  || fail "NCCL run b: $(tail -3 "$W/b.out")"
"$D" compare "$W/a" "$W/b" || fail "two deterministic runs through NCCL differ"
"$D" compare "$W/sa" "$W/sb" || fail "their step-20 checkpoints differ"
for f in model optimizer; do
  cmp "$W/sa/iter_0000020/$f.safetensors" "$W/sb/iter_0000020/$f.safetensors" || fail "their step-20 $f.safetensors differ in bytes"
done
# resume: 10 steps, then from the checkpoint to 20
nccl c1 $common --train-iters 10 --save "$W/sc" --log-dir "$W/c1" >"$W/c1.out" 2>&1 || fail "NCCL run c (to 10): $(tail -3 "$W/c1.out")"
nccl c2 $common --train-iters 20 --load "$W/sc" --save "$W/sc" --log-dir "$W/c2" >"$W/c2.out" 2>&1 \
  || fail "NCCL run c resumed: $(tail -3 "$W/c2.out")"
"$D" compare "$W/a" "$W/c1" || fail "steps 1-10 of the resumed run differ"
"$D" compare "$W/a" "$W/c2" || fail "the resumed steps 11-20 differ from the uninterrupted run"
for f in model optimizer; do
  cmp "$W/sa/iter_0000020/$f.safetensors" "$W/sc/iter_0000020/$f.safetensors" || fail "resumed step-20 $f.safetensors differs in bytes"
done
# the single-process path: the same bits
"$D" train $common --train-iters 20 --save "$W/ss" --save-interval 10 --dist-engine single --log-dir "$W/s" >"$W/s.out" 2>&1 \
  || fail "single-process run: $(tail -3 "$W/s.out")"
"$D" compare "$W/a" "$W/s" || fail "one rank through NCCL differs from the single-process path"
for f in model optimizer; do
  cmp "$W/sa/iter_0000020/$f.safetensors" "$W/ss/iter_0000020/$f.safetensors" || fail "NCCL vs single: step-20 $f.safetensors differ"
done
python3 - "$W/a/metrics.jsonl" "$W/s/metrics.jsonl" <<'PY' || fail "the metric series differ in bytes (*_hex)"
import json, sys
clock = {"step_ms_hex", "tok_per_s_hex"}  # how the process ran (metrics/compare.c ignores them too)
rows = [[{k: v for k, v in json.loads(l).items() if k.endswith("_hex") and k not in clock} for l in open(p)]
        for p in sys.argv[1:]]
assert rows[0] and rows[0] == rows[1], "hex fields differ"
assert any(r for r in rows[0]), "no *_hex fields besides the wall clock's"
print(f"{len(rows[0])} metric rows, *_hex fields identical through NCCL and single")
PY
# what env.json says
grep -q '"engine":"nccl"' "$W/a/env.json" || fail "env.json does not record the NCCL engine: $(grep -o '"dist"[^}]*' "$W/a/env.json")"
grep -q '"nccl_version":"2\.' "$W/a/env.json" || fail "env.json does not record the NCCL version (the factory's dist record should include dt_comm_nccl_record())"
# deterministic mode refuses NCCL settings it cannot vouch for, before anything runs
for bad in "NCCL_ALGO=Tree" "NCCL_PROTO=LL256"; do
  env "$bad" DETRAIN_RANK=0 DETRAIN_WORLD_SIZE=1 DETRAIN_RENDEZVOUS="file:$W/rv_bad" \
    "$D" train $common --train-iters 2 --dist-engine nccl --log-dir "$W/bad" >"$W/bad.out" 2>&1 \
    && fail "$bad was accepted in deterministic mode"
  grep -q "${bad%%=*}='${bad#*=}' is not a deterministic setting" "$W/bad.out" || fail "$bad: unexpected message: $(tail -2 "$W/bad.out")"
  [ ! -e "$W/bad" ] || fail "$bad: the refused run wrote $W/bad"
done
# default mode through NCCL trains
nodet=$(echo "$common" | sed 's/--deterministic-mode//')
nccl d $nodet --train-iters 5 --log-dir "$W/d" >"$W/d.out" 2>&1 || fail "default-mode NCCL run: $(tail -3 "$W/d.out")"
[ "$(wc -l <"$W/d/metrics.jsonl" 2>/dev/null || echo 0)" -eq 5 ] || fail "the default-mode NCCL run logged no 5 steps"
if [ $fails -eq 0 ]; then echo "gpu_dp1: PASS"; [ -z "${1:-}" ] && rm -rf "$W"; exit 0; fi
echo "gpu_dp1: $fails failure(s); logs in $W"
exit 1
