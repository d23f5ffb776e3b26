#!/usr/bin/env bash
# `detrain bench` is the training loop of `detrain train` with timers, not a copy: its
# worker, on the CPU backend with the tiny model, writes the same metrics bit for bit as
# `detrain train` with the same flags (the same optimizer settings, schedule, data and
# micro-batch keys) in deterministic mode; in default mode, whose reductions race, the same
# losses within 1e-4. The bench itself runs both workers and reports.
set -uo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail=0
common=(--device cpu --model tiny --micro-batch-size 4 --seq-length 64 --global-batch-size 8 --lr 3e-3)
for mode in default det; do
  det=(); [ $mode = det ] && det=(--deterministic-mode)
  "$DETRAIN" bench --worker $mode --warmup 2 --steps 3 --profile-steps 1 "${common[@]}" --log-dir "$d/bench_$mode" \
    > "$d/worker_$mode.txt" 2>&1 || { echo "FAIL: bench worker $mode: $(tail -3 "$d/worker_$mode.txt")"; fail=1; continue; }
  grep -q "^DT_BENCH mode=$mode step_ms=" "$d/worker_$mode.txt" || { echo "FAIL: no DT_BENCH line ($mode)"; fail=1; }
  "$DETRAIN" train "${common[@]}" "${det[@]}" --train-iters 6 --eval-interval 0 --quiet --log-dir "$d/train_$mode" \
    || { echo "FAIL: train $mode"; fail=1; continue; }
  if [ $mode = default ]; then
    python3 - "$d/bench_$mode/metrics.jsonl" "$d/train_$mode/metrics.jsonl" <<'PY' || { echo "FAIL: default: losses differ"; fail=1; }
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:])
assert len(a) == len(b) == 6, (len(a), len(b))
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"ok: default: the bench's losses are train's within {worst:.1e} (the racing reductions' rounding)")
assert worst < 1e-4
PY
  elif "$DETRAIN" compare "$d/bench_$mode" "$d/train_$mode" > "$d/cmp_$mode.txt" 2>&1; then
    echo "ok: $mode: the bench's loop gives train's bits ($(head -1 "$d/cmp_$mode.txt"))"
  else
    echo "FAIL: $mode: bench and train differ:"; cat "$d/cmp_$mode.txt"; fail=1
  fi
done
# the comparison can fail: another learning rate is another trajectory
"$DETRAIN" train "${common[@]}" --deterministic-mode --lr 1e-3 --train-iters 6 --eval-interval 0 --quiet --log-dir "$d/other" || fail=1
if "$DETRAIN" compare "$d/bench_det" "$d/other" >/dev/null 2>&1; then echo "FAIL: compare missed another lr"; fail=1; fi
# the parent: both workers, one report
out=$("$DETRAIN" bench --warmup 1 --steps 2 --profile-steps 0 "${common[@]}" 2>&1) || { echo "FAIL: bench: $out"; fail=1; }
grep -q "median of 2 steps (end to end) after 1 warm-up" <<<"$out" || { echo "FAIL: bench header: $out"; fail=1; }
grep -q "^step ms (median) " <<<"$out" || { echo "FAIL: bench table: $out"; fail=1; }
# the token distribution it measured on: the built-in corpus is skewed (its top byte takes a
# large share of a batch); --synthetic-tokens uniform is not
share() { sed -n "s/^top token's share (median) *\([0-9.]*\)%.*/\1/p" <<<"$1"; }
real=$(share "$out")
uni=$("$DETRAIN" bench --warmup 1 --steps 1 --profile-steps 0 "${common[@]}" --synthetic-tokens uniform 2>&1)
uni=$(share "$uni")
if [ -z "$real" ] || [ -z "$uni" ] || ! awk -v r="$real" -v u="$uni" 'BEGIN { exit !(r > 10 && u < 5) }'; then
  echo "FAIL: top token's share: built-in corpus '$real'%, uniform '$uni'% (want > 10 and < 5)"; fail=1
else echo "ok: top token's share: built-in corpus $real%, uniform $uni%"; fi
# the bench's own flags stay its own
out=$("$DETRAIN" bench "${common[@]}" --train-iters 5 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--train-iters is the bench's own" <<<"$out" || { echo "FAIL: --train-iters: $rc $out"; fail=1; }
out=$("$DETRAIN" bench "${common[@]}" --lr abc 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q -- "--lr 'abc'" <<<"$out" || { echo "FAIL: bad train flag: $rc $out"; fail=1; }
exit $fail
