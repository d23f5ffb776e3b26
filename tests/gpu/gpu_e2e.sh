#!/usr/bin/env bash
# End to end on the GPU (build/detrain-cuda: src/train/loop.c on src/backend/cuda_backend.cu,
# src/model/gpt_cuda.cu):
#  - two deterministic-mode runs are bitwise identical (`detrain compare`, exit 0), with
#    dropout (GEMM attention) and without (flash attention, the default for that shape);
#  - a third run with a different seed differs (the comparison can fail);
#  - GPU and CPU runs of the same config start from the same loss (first step within 2%);
#  - env.json records the GPU and the pinned GEMM algorithms;
#  - --attention-impl flash-mma with --bwd-overlap off gives the default run's bits, and so
#    does --cuda-graphs off (every op launched one by one instead of replayed graphs); the
#    default run records --gemm-own gelu (the GELU GEMMs on our own kernel), and two runs
#    with --gemm-own off (every GEMM on cuBLASLt) are bitwise identical; the default run
#    records the attention backward's D from the attproj GEMM's DOT epilogue (so run f's
#    equal bits also say the mma.sync flash backward took that LD), --gemm-own off and
#    --gemm-dot off the D kernel, and --gemm-dot off runs are bitwise reproducible too;
#    the default run records --dw-batch on (every layer's qkv, fc, fcproj and attproj
#    weight gradients batched);
#    --dw-batch off is recorded, reproducible bitwise and within 1e-3 of the default run's
#    last loss; a run traced at op level has the default run's bits and the batched GEMMs'
#    events;
#    bad values of every CUDA flag are refused before anything runs, and --attention-impl
#    flash where the shape has no flash kernel;
#  - checkpoints: a 30-step run saving at 15 and 30 vs 15 steps saved then resumed to 30:
#    metrics bitwise identical (`detrain compare`) and both checkpoints of each step
#    identical tensor by tensor (`detrain compare` on checkpoints); a GPU checkpoint
#    verifies (`detrain ckpt verify`) and its env.json describes the GPU run; a corrupted
#    one is refused with the named error and nothing is written;
#  - `detrain bench` runs on a small recipe, timing steps end to end, with consistent figures.
# Not named test_*.sh: tests/run.sh (CI, no GPU) must not pick it up.
# The GPU model it checks: src/model/cuda/ (model.cuh, create.cu, linear.cu, forward.cu, backward.cu,
# step.cu, graphs.cu, streams.cu, trace.cu, describe.cu).
set -u
cd "$(dirname "$0")/../.."
D=${DETRAIN_CUDA:-build/detrain-cuda}
W=${1:-$(mktemp -d)}
mkdir -p "$W"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
common="--device cuda --model small --micro-batch-size 8 --global-batch-size 16 --train-iters 30 --eval-interval 10 --log-interval 10"
nodrop="$common"
common="$common --hidden-dropout 0.1 --attention-dropout 0.1"
"$D" train $common --deterministic-mode --log-dir "$W/a" || fail "run a"
"$D" train $common --deterministic-mode --log-dir "$W/b" >/dev/null || fail "run b"
"$D" compare "$W/a" "$W/b" || fail "two deterministic GPU runs differ"
"$D" train $common --deterministic-mode --seed 7 --log-dir "$W/c" >/dev/null || fail "run c"
if "$D" compare "$W/a" "$W/c" >/dev/null 2>&1; then fail "compare saw no difference with another seed"; fi
"$D" train $nodrop --deterministic-mode --log-dir "$W/d" >/dev/null || fail "run d"
"$D" train $nodrop --deterministic-mode --log-dir "$W/e" >/dev/null || fail "run e"
"$D" compare "$W/d" "$W/e" || fail "two deterministic GPU runs (flash attention) differ"
grep -q '"attention":"flash' "$W/d/env.json" || fail "run d did not use flash attention"
# the kernel choices that promise the same bits: the mma.sync flash kernels instead of the
# sm_90 wgmma ones, one stream instead of the weight-gradient stream
"$D" train $nodrop --attention-impl flash-mma --bwd-overlap off --deterministic-mode --log-dir "$W/f" >/dev/null \
  || fail "run f (--attention-impl flash-mma --bwd-overlap off)"
grep -q '"attention":"flash"' "$W/f/env.json" || fail "run f did not use the mma.sync flash kernels"
grep -q '"bwd_overlap":"off"' "$W/f/env.json" || fail "run f did not turn the weight-gradient stream off"
"$D" compare "$W/d" "$W/f" || fail "flash-mma / one stream changed the bits of a deterministic run"
# a bad value of either is refused with its name and the accepted values
# the default run replays CUDA graphs (no dropout there); launching every op instead gives
# the same bits
grep -q '"cuda_graphs":"on' "$W/d/env.json" || fail "run d did not record CUDA graphs as on"
"$D" train $nodrop --cuda-graphs off --deterministic-mode --log-dir "$W/g" >/dev/null || fail "run g (--cuda-graphs off)"
grep -q '"cuda_graphs":"off"' "$W/g/env.json" || fail "run g did not turn CUDA graphs off"
"$D" compare "$W/d" "$W/g" || fail "CUDA graph replays changed the bits of a deterministic run"
grep -q '"gemm_own":"gelu' "$W/d/env.json" || fail "run d did not record our own GEMM on the GELU GEMMs (the default)"
# every GEMM on cuBLASLt (--gemm-own off): recorded, and two runs bitwise identical
"$D" train $nodrop --gemm-own off --deterministic-mode --log-dir "$W/h" >/dev/null || fail "run h (--gemm-own off)"
"$D" train $nodrop --gemm-own off --deterministic-mode --log-dir "$W/i" >/dev/null || fail "run i (--gemm-own off)"
grep -q '"gemm_own":"off"' "$W/h/env.json" || fail "run h did not record --gemm-own off"
# the fc bias gradient: from the dGELU GEMM's epilogue on our kernel, a column sum without it
grep -q '"fc_bias_grad":"the fcproj dGELU GEMM' "$W/d/env.json" || fail "run d did not record the fused fc bias gradient"
grep -q '"fc_bias_grad":"a column sum of dfch"' "$W/h/env.json" || fail "run h did not record the fc bias column sum"
# the attention backward's D: from the attproj input-gradient GEMM (DOT epilogue), or the D kernel
grep -q '"attention_d":"the attproj input-gradient GEMM' "$W/d/env.json" || fail "run d did not record D from the GEMM"
grep -q '"attention_d":"the D kernel"' "$W/h/env.json" || fail "run h (--gemm-own off) did not record the D kernel"
"$D" train $nodrop --gemm-dot off --deterministic-mode --log-dir "$W/j" >/dev/null || fail "run j (--gemm-dot off)"
"$D" train $nodrop --gemm-dot off --deterministic-mode --log-dir "$W/k" >/dev/null || fail "run k (--gemm-dot off)"
grep -q '"attention_d":"the D kernel"' "$W/j/env.json" || fail "run j (--gemm-dot off) did not record the D kernel"
"$D" compare "$W/j" "$W/k" || fail "two deterministic GPU runs with --gemm-dot off differ"
"$D" compare "$W/h" "$W/i" || fail "two deterministic GPU runs with --gemm-own off differ"
# --dw-batch on (the default): the qkv, fc, fcproj and attproj weight gradients of every layer
# in one batched GEMM a kind after the layers. The default run (no hidden dropout) records
# all four; --dw-batch off (one GEMM a layer) is recorded, two runs are bitwise identical,
# and its last loss is within 1e-3 of the default run's (the batched plans' bits need not
# equal the single calls': said, not required)
grep -q '"dw_batch":"qkv, fc, fcproj, attproj' "$W/d/env.json" \
  || fail "run d did not record dw_batch qkv, fc, fcproj, attproj (the default)"
"$D" train $nodrop --dw-batch off --deterministic-mode --log-dir "$W/m" >/dev/null || fail "run m (--dw-batch off)"
"$D" train $nodrop --dw-batch off --deterministic-mode --log-dir "$W/n" >/dev/null || fail "run n (--dw-batch off)"
grep -q '"dw_batch":"off' "$W/m/env.json" || fail "run m did not record --dw-batch off"
"$D" compare "$W/m" "$W/n" || fail "two deterministic GPU runs with --dw-batch off differ"
if "$D" compare "$W/d" "$W/m" >/dev/null 2>&1; then echo "--dw-batch off: the default run's bits"
else echo "--dw-batch off: other bits than the default run (the batched GEMMs' plans)"; fi
python3 - "$W/d/metrics.jsonl" "$W/m/metrics.jsonl" <<'PY' || fail "--dw-batch off: last loss off the default run's"
import json, sys
d = [json.loads(l)["loss"] for l in open(sys.argv[1]) if '"loss"' in l][-1]
m = [json.loads(l)["loss"] for l in open(sys.argv[2]) if '"loss"' in l][-1]
print(f"last loss: default {d:.6f} --dw-batch off {m:.6f}")
sys.exit(0 if abs(d - m) / abs(d) < 1e-3 else 1)
PY
# tracing changes no bit: run d traced at op level (every op, module and semantic event, the
# batched weight gradients' own event) has run d's metrics bit for bit
"$D" train $nodrop --deterministic-mode --trace-level op --trace-dir "$W/tro" --log-dir "$W/o" >/dev/null \
  || fail "run o (traced at op level)"
"$D" compare "$W/d" "$W/o" 2>/dev/null || fail "tracing at op level changed the bits of a deterministic run"
grep -aq "matmul_dw_batched" "$W/tro"/rank_*.trace || fail "run o's trace has no matmul_dw_batched event"
for bad in --attention-impl --bwd-overlap --cuda-graphs --gemm-own --gemm-dot --dw-batch --gemm-epilogues; do
  "$D" train $nodrop --train-iters 1 "$bad" bogus --log-dir "$W/bad$bad" >/dev/null 2>"$W/bad$bad.err" \
    && fail "$bad bogus was accepted"
  grep -q -- "$bad 'bogus' is not a choice; accepted" "$W/bad$bad.err" || fail "$bad bogus: unexpected error: $(cat "$W/bad$bad.err")"
  [ -e "$W/bad$bad" ] && fail "$bad bogus: the refused run made its log dir"
done
# the run asks for flash attention where the shape has none: refused, not run otherwise
"$D" train $common --train-iters 1 --attention-impl flash >/dev/null 2>"$W/flash.err" && fail "--attention-impl flash with attention dropout ran"
grep -q -- "--attention-impl flash: flash attention does not take this shape" "$W/flash.err" || fail "flash refusal: $(cat "$W/flash.err")"
grep -q '"attention":"gemm"' "$W/a/env.json" || fail "run a (attention dropout) did not use GEMM attention"
grep -q '"gemm_algos"' "$W/a/env.json" || fail "env.json lacks the GEMM algorithms"
grep -q '"gpu"' "$W/a/env.json" || fail "env.json lacks the GPU"
# GPU vs CPU: same init, same data: the first loss agrees to bf16 accuracy
"$D" train --device cpu --model small --micro-batch-size 8 --global-batch-size 16 --train-iters 1 --eval-interval 0 --deterministic-mode --log-dir "$W/cpu" >/dev/null || fail "cpu run"
python3 - "$W/d/metrics.jsonl" "$W/cpu/metrics.jsonl" <<'PY' || fail "first-step loss GPU vs CPU"
import json, sys
g = json.loads(open(sys.argv[1]).readline())["loss"]
c = json.loads(open(sys.argv[2]).readline())["loss"]
print(f"first-step loss: gpu {g:.6f} cpu {c:.6f}")
sys.exit(0 if abs(g - c) / c < 0.005 else 1)
PY
# checkpoints: uninterrupted (saves at 15 and 30) vs 15 steps, then resumed to 30. Eval
# every 5 steps so both segments' last steps evaluate like the uninterrupted run; the lr
# schedule is fixed by --lr-decay-iters (it defaults to --train-iters).
ck="--device cuda --model small --micro-batch-size 8 --global-batch-size 16 --hidden-dropout 0.1
    --attention-dropout 0.1 --lr-decay-iters 30 --eval-interval 5 --log-interval 5 --deterministic-mode"
"$D" train $ck --train-iters 30 --save "$W/sa" --save-interval 15 --log-dir "$W/ra" >/dev/null || fail "ckpt run a"
"$D" train $ck --train-iters 15 --save "$W/sb" --log-dir "$W/rb1" >/dev/null || fail "ckpt run b (to 15)"
"$D" train $ck --train-iters 30 --load "$W/sb" --save "$W/sb" --log-dir "$W/rb2" 2>"$W/rb2.err" \
  || fail "ckpt run b resumed: $(cat "$W/rb2.err")"
! grep -q "another environment" "$W/rb2.err" || fail "GPU resume warned about the environment: $(cat "$W/rb2.err")"
"$D" compare "$W/ra" "$W/rb1" || fail "steps 1-15 differ"
"$D" compare "$W/ra" "$W/rb2" || fail "resumed steps 16-30 differ from the uninterrupted run"
"$D" compare "$W/sa/iter_0000015" "$W/sb/iter_0000015" || fail "step-15 checkpoints differ"
"$D" compare "$W/sa" "$W/sb" || fail "final (step 30) checkpoints differ"
cmp "$W/sa/iter_0000030/model.safetensors" "$W/sb/iter_0000030/model.safetensors" || fail "step-30 weights differ in bytes"
cmp "$W/sa/iter_0000030/optimizer.safetensors" "$W/sb/iter_0000030/optimizer.safetensors" \
  || fail "step-30 optimizer states differ in bytes"
[ "$(wc -l <"$W/rb2/metrics.jsonl")" -eq 15 ] || fail "the resumed log holds $(wc -l <"$W/rb2/metrics.jsonl") steps, expected 15"
"$D" ckpt verify "$W/sa" || fail "a GPU checkpoint does not verify"
grep -q '"gemm_algos"' "$W/sa/iter_0000015/env.json" || fail "the checkpoint's env.json lacks the GEMM algorithms"
grep -q '"gpu"' "$W/sa/iter_0000015/env.json" || fail "the checkpoint's env.json lacks the GPU"
# the comparisons can fail: two steps' checkpoints differ; another seed is refused
# (binding config)
"$D" compare "$W/sa/iter_0000015" "$W/sa/iter_0000030" >/dev/null 2>&1 && fail "checkpoint compare saw no difference"
"$D" train $ck --train-iters 30 --seed 7 --load "$W/sb/iter_0000015" --log-dir "$W/rseed" >/dev/null 2>"$W/rseed.err" \
  && fail "a resume with another seed was accepted"
grep -q "seed = 1234 but this run has 7" "$W/rseed.err" || fail "another seed: unexpected error: $(cat "$W/rseed.err")"
# corrupted: one bit of the first tensor's data in model.safetensors
cp -r "$W/sb/iter_0000015" "$W/bad"
python3 - "$W/bad/model.safetensors" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[8 + struct.unpack("<Q", b[:8])[0] + 100] ^= 0x10
open(p, "wb").write(b)
PY
"$D" train $ck --train-iters 30 --load "$W/bad" --save "$W/sbad" --log-dir "$W/rbad" 2>"$W/rbad.err" >/dev/null
rc=$?
[ $rc -ne 0 ] || fail "a corrupted GPU checkpoint was accepted"
grep -q "model.safetensors': tensor .* does not match its recorded SHA-256" "$W/rbad.err" \
  || fail "corrupted checkpoint: unexpected error: $(cat "$W/rbad.err")"
[ ! -e "$W/sbad" ] && [ ! -e "$W/rbad" ] || fail "a refused resume wrote files"
"$D" ckpt verify "$W/bad" >/dev/null 2>&1 && fail "ckpt verify accepted a corrupted GPU checkpoint"
echo "corrupted checkpoint refused: $(head -c 300 "$W/rbad.err")"
# default mode (deterministic mode refuses it): --no-load-optim resumes a default-mode
# checkpoint with fresh AdamW state (t counts from 0 again)
nodet=$(echo "$ck" | sed 's/--deterministic-mode//')
"$D" train $nodet --train-iters 15 --save "$W/sdef" >/dev/null || fail "default-mode run to 15"
"$D" train $nodet --train-iters 20 --load "$W/sdef" --no-load-optim --save "$W/sfresh" \
  >/dev/null 2>"$W/rfresh.err" || fail "--no-load-optim resume on the GPU: $(cat "$W/rfresh.err")"
python3 - "$W/sfresh/iter_0000020/state.json" <<'PY' || fail "--no-load-optim: AdamW t after 5 fresh updates"
import json, sys
t = json.load(open(sys.argv[1]))["optimizer"]["t"]
print(f"--no-load-optim resume 15 -> 20: AdamW t = {t}")
sys.exit(0 if t == 5 else 1)
PY
# `detrain bench` on a small recipe: both workers run, the step is timed end to end, and
# each worker's median lies between its min and max and agrees with its token rate
"$D" bench --model small --micro-batch-size 8 --seq-length 256 --steps 5 --warmup 2 --profile-steps 1 \
  >"$W/bench.txt" 2>&1 || fail "detrain bench (small): $(tail -3 "$W/bench.txt")"
grep -q "median of 5 steps (end to end) after 2 warm-up" "$W/bench.txt" || fail "bench header: $(head -3 "$W/bench.txt")"
for mode in det default; do
  "$D" bench --worker $mode --model small --micro-batch-size 8 --seq-length 256 --steps 5 --warmup 2 \
    --profile-steps 1 >"$W/bench_$mode.txt" 2>&1 || fail "bench worker $mode"
  python3 - "$W/bench_$mode.txt" <<'PY' || fail "bench worker $mode: inconsistent figures"
import sys
f = dict(kv.split("=", 1) for kv in open(sys.argv[1]).read().split("DT_BENCH", 1)[1].split() if "=" in kv)
ms, lo, hi, tok = (float(f[k]) for k in ("step_ms", "step_min", "step_max", "tok_s"))
print(f"bench worker: step {ms:.3f} ms (min {lo:.3f}, max {hi:.3f}), {tok:.0f} tok/s")
sys.exit(0 if 0 < lo <= ms <= hi and abs(tok * ms / 1e3 - 8 * 256) < 1e-3 * 8 * 256 else 1)
PY
done

[ $fails -eq 0 ] && echo "gpu e2e: PASS" || echo "gpu e2e: $fails failure(s)"
exit $fails
