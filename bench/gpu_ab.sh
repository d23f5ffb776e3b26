#!/usr/bin/env bash
# One device call's A/B of a change: two detrain-cuda binaries, the base (PREV) and the
# change (CUR), on the 124M recipe (B16 T1024, the built-in corpus: real text).
#  - bits (BITS=1, the default): both train 3 deterministic steps from the same seed and
#    save; the weights and optimizer states must be byte-identical (cmp), for a change
#    that promises the base's bits; BITS_ARGS adds train flags to those runs (e.g.
#    "--data-path F": another token distribution than the built-in corpus);
#  - speed through `detrain train`, the path users run (TRAIN_ROUNDS rounds, default 3,
#    the order reversed every other round): each binary trains 40 steps in deterministic
#    and in default mode; the median step_ms of steps 11-40 from metrics.jsonl, the
#    process's peak resident memory (host RSS) and its peak address space (VmPeak) go to
#    $OUT/ab_train.txt;
#  - speed through `bench --worker det` (ROUNDS rounds, default 0): PREV, CUR and CUR under
#    each of VARIANTS (flags of CUR, e.g. "--dw-batch=off"), 20 timed steps after 5
#    warm-up ones; the DT_BENCH lines go to $OUT/ab.txt.
# usage (device): PREV=build/carry/prev-detrain-cuda CUR=build/carry/detrain-cuda bash bench/gpu_ab.sh
set -uo pipefail
cd "$(dirname "$0")/.."
prev=${PREV:?PREV: the base binary}
cur=${CUR:?CUR: the changed binary}
out=${OUT:-/tmp/gpu_ab}
mkdir -p "$out"
rc=0
recipe="--device cuda --model gpt2-124m --micro-batch-size 16 --global-batch-size 16 --seq-length 1024"
if [ "${BITS:-1}" = 1 ]; then
  w=$(mktemp -d)
  args="$recipe --train-iters 3 --eval-interval 100 --log-interval 1 --deterministic-mode ${BITS_ARGS:-}"
  "$prev" train $args --save "$w/p" --log-dir "$w/lp" > "$out/ab_train_prev.txt" 2>&1 || { echo "FAIL: the base's run"; rc=1; }
  "$cur" train $args --save "$w/c" --log-dir "$w/lc" > "$out/ab_train_cur.txt" 2>&1 || { echo "FAIL: the change's run"; rc=1; }
  for f in model.safetensors optimizer.safetensors; do
    if cmp "$w/p/iter_0000003/$f" "$w/c/iter_0000003/$f"; then echo "bits: $f equal after 3 steps"
    else echo "FAIL: bits: $f differs after 3 steps"; rc=1; fi
  done
  rm -rf "$w"
fi
# median step ms of steps 11-40 and the peak host RSS of one training run
train_round() { # train_round TAG BIN MODE
  local tag=$1 bin=$2 mode=$3 w det=""
  w=$(mktemp -d)
  [ "$mode" = det ] && det=--deterministic-mode
  python3 - "$bin" $recipe --train-iters 40 --eval-interval 0 --log-interval 100 --quiet $det --log-dir "$w/log" <<'PY' \
    || { echo "FAIL: train $tag $mode"; rc=1; }
import json, resource, statistics, subprocess, sys, time
p = subprocess.Popen([sys.argv[1], "train"] + sys.argv[2:])
vm = 0  # VmPeak (kB) of /proc: the address space's high-water mark, sampled while it runs
while p.poll() is None:
    try:
        for l in open(f"/proc/{p.pid}/status"):
            if l.startswith("VmPeak:"): vm = max(vm, int(l.split()[1]))
    except OSError:
        pass
    time.sleep(0.2)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
if p.returncode: sys.exit(p.returncode)
log = sys.argv[sys.argv.index("--log-dir") + 1] + "/metrics.jsonl"
ms = [json.loads(l)["step_ms"] for l in open(log)][10:40]
print(f"median_step_ms={statistics.median(ms):.3f} peak_rss_mib={rss:.0f} peak_vm_mib={vm / 1024:.0f}")
PY
  rm -rf "$w"
}
for r in $(seq 1 "${TRAIN_ROUNDS:-3}"); do
  if [ $((r % 2)) = 1 ]; then order="prev cur"; else order="cur prev"; fi
  for mode in det default; do
    for tag in $order; do
      if [ $tag = prev ]; then bin=$prev; else bin=$cur; fi
      echo "train round $r $tag $mode $(train_round $tag "$bin" $mode)" | tee -a "$out/ab_train.txt"
    done
  done
done
for r in $(seq 1 "${ROUNDS:-0}"); do
  if [ $((r % 2)) = 1 ]; then order="prev cur ${VARIANTS:-}"; else order="${VARIANTS:-} cur prev"; fi
  for tag in $order; do
    case $tag in prev) cmd=("$prev" bench) ;; cur) cmd=("$cur" bench) ;; *) cmd=("$cur" bench "$tag") ;; esac
    line=$("${cmd[@]}" --worker det --steps 20 --warmup 5 --profile-steps 1 2>/dev/null | grep DT_BENCH) || { echo "FAIL: bench $tag"; rc=1; }
    echo "round $r $tag $line" | tee -a "$out/ab.txt" | cut -c1-160
  done
done
echo "done rc=$rc"
exit $rc
