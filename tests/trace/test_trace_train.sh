#!/usr/bin/env bash
# The tracing workflow end to end on the trainer (issue 5): for several ops X, a run with
# --inject-nondeterminism X@3 against a clean twin — compare reports the first divergence
# at step 3 or later, trace-diff at op level names X as the origin candidate with every
# later mismatch downstream, and a window that starts after step 3 reports the origin
# outside the capture. Two clean deterministic runs traced at op level show no mismatch.
# The GPU runs the same script (tests/gpu/gpu_trace.sh): TRACE_DEVICE=cuda with DETRAIN
# pointing at build/detrain-cuda, and TRACE_OPS naming the ops to inject into.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 2 --seq-length 32 --micro-batch-size 2 --train-iters 5
        --eval-interval 0 --quiet --deterministic-mode --debug-allow-injection
        --device "${TRACE_DEVICE:-cpu}")
run() { "$DETRAIN" train "${common[@]}" "$@"; }
run --trace-level op --trace-steps 3-4 --trace-dir "$d/clean" --log-dir "$d/clean-log"
run --trace-level op --trace-steps 3-4 --trace-dir "$d/clean2" --log-dir "$d/clean2-log"
"$DETRAIN" trace-diff "$d/clean" "$d/clean2" >/dev/null   # exit 0: no mismatch
"$DETRAIN" compare "$d/clean-log" "$d/clean2-log" >/dev/null
for op in ${TRACE_OPS:-encoder_bwd layernorm_bwd attention_bwd matmul_bwd adamw}; do
  run --inject-nondeterminism "$op@3" --trace-level op --trace-steps 3-4 --trace-dir "$d/$op" --log-dir "$d/$op-log"
  set +e
  cmp_out=$("$DETRAIN" compare "$d/clean-log" "$d/$op-log"); cmp_rc=$?
  "$DETRAIN" trace-diff --json "$d/clean" "$d/$op" > "$d/$op.json"; diff_rc=$?
  set -e
  [ $cmp_rc -eq 1 ] || { echo "$op: compare rc=$cmp_rc: $cmp_out"; exit 1; }
  [ $diff_rc -eq 1 ] || { echo "$op: trace-diff rc=$diff_rc"; exit 1; }
  python3 - "$d/$op.json" "$op" "$cmp_out" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1])); op = sys.argv[2]; cmp_out = sys.argv[3]
m = re.search(r"step (\d+)", cmp_out)
assert m and int(m.group(1)) >= 3, ("compare must first differ at step >= 3", cmp_out)
rank = r["ranks"][0]
fm = rank["first_mismatch"]
assert fm["class"] == "origin_candidate", fm
assert fm["event"]["op"] == op and fm["event"]["step"] == 3, fm["event"]
assert rank["later_inputs_match"] == 0, ("later mismatches must all be downstream", rank)
print("%s: origin candidate at step 3 (%s), %d later mismatches downstream; compare: %s"
      % (op, fm["event"]["scope"], rank["later_downstream"], cmp_out.strip().splitlines()[0]))
PY
  # the window starts after the injection: the origin is outside the capture
  run --trace-level op --trace-steps 4-5 --trace-dir "$d/clean-late-$op"
  run --inject-nondeterminism "$op@3" --trace-level op --trace-steps 4-5 --trace-dir "$d/$op-late"
  set +e; out=$("$DETRAIN" trace-diff "$d/clean-late-$op" "$d/$op-late"); rc=$?; set -e
  [ $rc -eq 1 ] && grep -qi "outside the capture" <<<"$out" || { echo "$op late window: $out"; exit 1; }
done
# injection is refused in deterministic mode without the debug flag
set +e
out=$("$DETRAIN" train --deterministic-mode --inject-nondeterminism adamw@1 --train-iters 1 --quiet 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && grep -q -- "--inject-nondeterminism" <<<"$out"
# an existing trace file is never overwritten, and the refused run creates nothing (no log
# directory, no checkpoint directory)
set +e; out=$(run --trace-level op --trace-dir "$d/clean" --log-dir "$d/refused-log" --save "$d/refused-ckpt" 2>&1); rc=$?; set -e
[ $rc -ne 0 ] && grep -q "rank_000000.trace" <<<"$out"
[ ! -e "$d/refused-log" ] && [ ! -e "$d/refused-ckpt" ] || { echo "a run refused for its old trace left files"; exit 1; }
echo ok
