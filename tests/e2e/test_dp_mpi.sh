#!/usr/bin/env bash
# Data parallel in the training loop (src/dist/dp.c, src/train/loop.c) between real OpenMPI processes (the MPI engine,
# build/libdetrain-mpi.so from `make mpi`), `tiny` model, a few steps, deterministic mode,
# N = 2 and 3 ranks, global batch 6 = micro-batch 1 x accumulation x N:
#   - two runs bitwise identical (compare: every *_hex metric; checkpoints tensor by tensor);
#   - a run resumed from its step-2 checkpoint identical to the uninterrupted one;
#   - ZeRO-1 (--use-distributed-optimizer) on and off: identical bits, checkpoints included
#     (the optimizer shards gathered);
#   - allocation independence: --rank-order reversed (logical ranks on other processes)
#     gives identical bits;
#   - the same global batch on 1 process: the same first-step loss bit for bit (the same
#     samples, the same masks), and every metric within a stated relative tolerance after
#     (the gradient sum adds per-rank partials, so the last bits differ: docs/distributed.md,
#     layout independence);
#   - MoE layers: two runs identical, ZeRO-1 the same bits, aux loss and dropped count
#     combined over the ranks;
#   - resume with another N refused in deterministic mode, naming both sizes, and accepted
#     in default mode;
#   - bench --ranks 2 reports the communication time of both reductions (and refuses to
#     run under mpirun);
#   - a rank killed mid-run: the others stop with the engine's timeout error, well within
#     the time the run would take.
set -u
cd "$(dirname "$0")/../.."
detrain=${DETRAIN:-$PWD/build/detrain}
plugin=$PWD/build/libdetrain-mpi.so
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
for f in "$plugin" "$detrain"; do
  [ -e "$f" ] || { echo "FAIL: $f is missing: build it with \`make mpi\` (OpenMPI from scripts/install-deps.sh)"; exit 1; }
done
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found: bash scripts/install-deps.sh installs OpenMPI"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dt_dp_XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mpi() { timeout 120 mpirun --allow-run-as-root --oversubscribe --quiet "$@"; }
run=(train --model tiny --seq-length 32 --micro-batch-size 1 --global-batch-size 6 --train-iters 4
     --eval-interval 2 --eval-iters 3 --deterministic-mode --quiet --threads 1 --dist-timeout-sec 60)
# train NP NAME [flags]: logs in $tmp/NAME, checkpoints in $tmp/NAME.ck
train() {
  local np=$1 name=$2; shift 2
  if [ "$np" = 1 ]; then "$detrain" "${run[@]}" --log-dir "$tmp/$name" --save "$tmp/$name.ck" "$@" > "$tmp/$name.log" 2>&1
  else mpi -np "$np" "$detrain" "${run[@]}" --log-dir "$tmp/$name" --save "$tmp/$name.ck" "$@" > "$tmp/$name.log" 2>&1; fi
  local rc=$?
  [ $rc = 0 ] || { fail "$name: the run failed (rc $rc)"; tail -5 "$tmp/$name.log"; }
  return $rc
}
# same WHAT A B: metrics (the steps both hold) and the last checkpoints bitwise identical
same() {
  local what=$1 a=$2 b=$3 out
  if out=$("$detrain" compare "$tmp/$a" "$tmp/$b" 2>&1) && grep -q "bitwise identical" <<<"$out" &&
     "$detrain" compare "$tmp/$a.ck" "$tmp/$b.ck" > "$tmp/ck_${a}_${b}.txt" 2>&1; then pass "$what"
  else fail "$what"; echo "$out" | head -5; head -5 "$tmp/ck_${a}_${b}.txt"; fi
}

for np in 2 3; do
  train $np a$np --save-interval 2 || continue
  [ "$(wc -l < "$tmp/a$np/metrics.jsonl")" = 4 ] && [ -e "$tmp/a$np/rank_001/env.json" ] &&
    [ ! -e "$tmp/a$np/rank_001/metrics.jsonl" ] && pass "np=$np: rank 0 logs 4 steps, every rank writes its env.json" ||
    fail "np=$np: the outputs (rank 0's metrics, rank_NNN/env.json)"
  grep -q '"consumed_samples":24' "$tmp/a$np/metrics.jsonl" && pass "np=$np: consumed samples stay global" ||
    fail "np=$np: consumed samples after 4 steps of 6 are not 24"
  train $np b$np && same "np=$np: two runs bitwise identical" a$np b$np
  train $np z$np --use-distributed-optimizer && same "np=$np: ZeRO-1 on and off give the same bits" a$np z$np
  order=$([ $np = 2 ] && echo 1,0 || echo 2,1,0)
  train $np o$np --rank-order $order && same "np=$np: --rank-order $order gives the same bits" a$np o$np
  train $np r$np --load "$tmp/a$np.ck/iter_0000002" &&
    same "np=$np: resumed from step 2 identical to the uninterrupted run" a$np r$np
done

# MoE layers (the CPU): two runs identical, ZeRO-1 the same bits, the aux loss and the
# dropped assignments combined over the ranks (logged, within 1e-5 of one process)
moe=(--num-experts 4 --moe-router-topk 2 --moe-expert-capacity-factor 1.0)
if train 2 m2 "${moe[@]}" && train 2 mb2 "${moe[@]}" && train 2 mz2 "${moe[@]}" --use-distributed-optimizer && train 1 m1 "${moe[@]}"; then
  same "MoE np=2: two runs bitwise identical" m2 mb2
  same "MoE np=2: ZeRO-1 on and off give the same bits" m2 mz2
  python3 - "$tmp/m1/metrics.jsonl" "$tmp/m2/metrics.jsonl" <<'PY' && pass "MoE np=2 vs 1 process: aux loss within 1e-5, step-1 dropped count equal" || fail "MoE np=2 vs 1 process"
import json, sys
one, two = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert len(one) == len(two) == 4
worst = max(abs(x["moe_aux_loss"] - y["moe_aux_loss"]) / abs(x["moe_aux_loss"]) for x, y in zip(one, two))
print("MoE: aux loss max relative difference %.3g" % worst)
# step 1: the same micro-batches through the same parameters, so the dropped count is equal
print("MoE: dropped assignments at step 1: %s (1 process), %s (2 ranks)" % (one[0]["moe_dropped_tokens"], two[0]["moe_dropped_tokens"]))
sys.exit(0 if worst < 1e-5 and one[0]["moe_dropped_tokens"] == two[0]["moe_dropped_tokens"] > 0 else 1)
PY
fi

# the same global batch on one process: the same samples and masks, so step 1's loss is
# bitwise equal; after that, within a relative 1e-5 (a few fp32 roundings in the sums)
if train 1 one; then
  python3 - "$tmp/one/metrics.jsonl" "$tmp/a2/metrics.jsonl" "$tmp/a3/metrics.jsonl" <<'PY' && pass "DP=2, DP=3 vs DP=1: step-1 loss bitwise, all within 1e-5" || fail "DP=2, DP=3 vs DP=1"
import json, sys
one = [json.loads(l) for l in open(sys.argv[1])]
ok = True
for path in sys.argv[2:]:
    other = [json.loads(l) for l in open(path)]
    assert len(one) == len(other) == 4, (len(one), len(other))
    ok &= one[0]["loss_hex"] == other[0]["loss_hex"]
    worst = 0.0
    for x, y in zip(one, other):
        for k in ("loss", "grad_norm", "param_norm", "eval_loss"):
            if k in x:
                worst = max(worst, abs(x[k] - y[k]) / abs(x[k]))
    print("%s: max relative difference to DP=1 %.3g over 4 steps" % (path.split("/")[-2], worst))
    ok &= worst < 1e-5
sys.exit(0 if ok else 1)
PY
fi

# resume with another number of ranks: refused in deterministic mode, naming both sizes
mpi -np 3 "$detrain" "${run[@]}" --load "$tmp/a2.ck" --log-dir "$tmp/n3" > "$tmp/n3.log" 2>&1
if grep -q "data_parallel_size = 2 but this run has 3" "$tmp/n3.log" && [ ! -e "$tmp/n3/metrics.jsonl" ]; then
  pass "resume of a 2-rank checkpoint on 3 ranks refused naming both"
else fail "resume with another N"; tail -5 "$tmp/n3.log"; fi

# in default mode another N resumes: the checkpoint holds the whole state and the global
# data position (the trajectory continues with another reduction order)
def=(train --model tiny --seq-length 32 --micro-batch-size 1 --global-batch-size 6 --eval-interval 0 --quiet --threads 1
     --lr-decay-iters 4 --dist-timeout-sec 60)
if mpi -np 2 "$detrain" "${def[@]}" --train-iters 2 --save "$tmp/d2.ck" > "$tmp/d2.log" 2>&1 &&
   mpi -np 3 "$detrain" "${def[@]}" --train-iters 4 --load "$tmp/d2.ck" --save "$tmp/d3.ck" --log-dir "$tmp/d3" > "$tmp/d3.log" 2>&1 &&
   grep -q '"data_parallel_size": 3' "$tmp/d3.ck/iter_0000004/state.json" && grep -q '"consumed_samples":24' "$tmp/d3/metrics.jsonl"; then
  pass "default mode: a 2-rank checkpoint resumes on 3 ranks (consumed samples continue)"
else fail "default mode resume with another N"; tail -3 "$tmp/d2.log" "$tmp/d3.log"; fi

# bench --ranks 2: each mode as 2 MPI processes, the communication time side by side
out=$(timeout 120 "$detrain" bench --ranks 2 --device cpu --model tiny --seq-length 32 --micro-batch-size 1 \
      --global-batch-size 4 --threads 1 --warmup 1 --steps 2 --profile-steps 0 2>&1)
if grep -q "ranks 2; median of 2 steps" <<<"$out" && grep -qE "^comm ms a step \(2 ranks, mpi\) +[0-9.]+ +[0-9.]+ +-?[0-9.]+%" <<<"$out" &&
   grep -q "library   rank-ordered" <<<"$out"; then pass "bench --ranks 2 reports the communication time and its tax"
else fail "bench --ranks 2"; echo "$out" | tail -12; fi
out=$(mpi -np 2 "$detrain" bench --device cpu --model tiny 2>&1)
grep -q "run \`detrain bench --ranks 2 ...\` without mpirun" <<<"$out" && pass "bench under mpirun refused with what to run" ||
  { fail "bench under mpirun"; echo "$out" | tail -3; }

# a rank killed after its first step: the two others fail with the timeout error (mpirun
# --enable-recovery keeps them running so that they meet it, and exits 0 itself), long
# before the run's end
start=$(date +%s)
timeout 120 mpirun --allow-run-as-root --oversubscribe --quiet --enable-recovery -np 3 "$detrain" "${run[@]}" \
  --train-iters 200 --dist-timeout-sec 4 --log-dir "$tmp/kill" > "$tmp/kill.log" 2>&1 &
job=$!
for _ in $(seq 200); do [ -s "$tmp/kill/metrics.jsonl" ] && break; sleep 0.2; done
victim=""
for p in $(pgrep -f "detrain train .*$tmp/kill"); do
  tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$p
done
[ -n "$victim" ] && kill -9 "$victim"
wait $job; rc=$?
secs=$(( $(date +%s) - start ))
if [ -n "$victim" ] && [ $rc != 124 ] && [ $secs -lt 60 ] && [ "$(wc -l < "$tmp/kill/metrics.jsonl")" -lt 200 ] &&
   [ "$(grep -c "did not complete within --dist-timeout-sec 4" "$tmp/kill.log")" = 2 ]; then
  pass "a killed rank: the others stop with the timeout error (rc $rc, ${secs}s)"
else fail "a killed rank (victim '${victim}', rc $rc, ${secs}s)"; tail -8 "$tmp/kill.log"; fi

echo "$fails failed"
[ $fails = 0 ]
