#!/usr/bin/env bash
# Every flag of `detrain train` against the classes of bad values: empty, malformed, zero
# or negative where the flag's range excludes them, overlong, and a value that is itself a
# flag. Each must be refused before anything runs (exit 2, a message naming the flag), never
# crash and never quietly mean "use the default". The table below holds each flag's kind
# and smallest accepted value; a flag that `--help` lists and the table does not is a
# failure, so a new flag cannot arrive untested. Also: deterministic mode's check of the
# flags sees every argument, however many there are.
set -uo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail=0; cases=0

# flag kind min context  (kind: I int, U unsigned, F float, S string, E a choice; min: smallest accepted
# value, "-" none; context: companion flags the flag needs to be meaningful, '|' for spaces)
table="
--model S - -
--num-layers I 1 -
--hidden-size I 1 -
--num-attention-heads I 1 -
--seq-length I 1 -
--max-position-embeddings I 1 -
--vocab-size I 1 -
--micro-batch-size I 1 -
--global-batch-size I 1 -
--train-iters I 1 -
--lr F 0 -
--min-lr F 0 -
--lr-warmup-iters I 0 -
--lr-decay-iters I 1 -
--weight-decay F 0 -
--clip-grad F 0 -
--adam-beta1 F 0 -
--adam-beta2 F 0 -
--adam-eps F + -
--hidden-dropout F 0 -
--attention-dropout F 0 -
--num-experts I 0 -
--moe-router-topk I 1 --num-experts|4
--moe-layer-freq S - --num-experts|4
--moe-aux-loss-coeff F 0 --num-experts|4
--moe-expert-capacity-factor F 0 --num-experts|4
--device E - -
--seed U 0 -
--data-path S - -
--synthetic-tokens E - -
--val-fraction F 0 -
--save S - -
--save-interval I 1 --save|$d/sv
--load S - -
--init-from-hf S - -
--log-dir S - -
--log-interval I 1 -
--eval-interval I 0 -
--eval-iters I 1 -
--threads I 1 -
--op-variant S - -
--trace-level E - -
--trace-steps S - --trace-level|metrics|--trace-dir|$d/tr
--trace-ranks S - --trace-level|metrics|--trace-dir|$d/tr
--trace-dir S - --trace-level|metrics
--inject-nondeterminism S - -
--exit-signal-handler E - -
--exit-interval I 1 -
--exit-duration-in-mins F + -
--check-for-nan-in-loss-and-grad E - -
--dist-engine E - -
--rank-order S - -
--dist-timeout-sec F + -
--attention-impl E - --device|cuda
--gemm-epilogues E - --device|cuda
--gemm-own E - --device|cuda
--gemm-dot E - --device|cuda
--dw-batch E - --device|cuda
--bwd-overlap E - --device|cuda
--cuda-graphs E - --device|cuda
"
switches="--deterministic-mode --save-overwrite --no-load-optim --no-load-rng --debug-allow-injection --use-distributed-optimizer --quiet"

base=(--train-iters 2 --quiet --seq-length 16 --micro-batch-size 2 --eval-interval 0)
# The base arguments minus the flag under test (a later value would replace it, but the
# refusal must come from the value under test).
base_without() {
  local skip=$1 i out=()
  for ((i = 0; i < ${#base[@]}; i++)); do
    if [ "${base[$i]}" = "$skip" ]; then
      [ "$skip" = --quiet ] || i=$((i + 1))
      continue
    fi
    out+=("${base[$i]}")
  done
  printf '%s\n' "${out[@]}"
}

# refuse FLAG VALUE CONTEXT: `train ... FLAG VALUE` must exit 2 naming FLAG.
refuse() {
  local flag=$1 value=$2 ctx=$3 args out rc
  mapfile -t args < <(base_without "$flag")
  [ "$ctx" != - ] && { IFS='|' read -r -a c <<<"$ctx"; args+=("${c[@]}"); }
  cases=$((cases + 1))
  out=$(cd "$d" && timeout 60 "$DETRAIN" train "${args[@]}" "$flag" "$value" 2>&1); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF -- "$flag" <<<"$out"; then
    echo "FAIL: $flag '${value:0:40}' -> rc=$rc (want 2 and a message naming $flag): ${out:0:300}"
    fail=1
  fi
}

long=$(head -c 5000 /dev/zero | tr '\0' a)
listed=$("$DETRAIN" train --help | awk '$1 ~ /^--/ {print $1}')
for f in $listed; do
  grep -q "^$f " <<<"$table" && continue
  grep -qw -- "$f" <<<"$switches" && continue
  echo "FAIL: $f is listed by --help but not in this test's table"; fail=1
done

while read -r flag kind min ctx; do
  [ -n "$flag" ] || continue
  grep -qx -- "$flag" <<<"$listed" || { echo "FAIL: $flag is in the table but not in --help"; fail=1; }
  refuse "$flag" "" "$ctx"
  refuse "$flag" "--quiet" "$ctx"
  case $kind in
    S) refuse "$flag" "$long" "$ctx" ;;
    E) refuse "$flag" nosuch "$ctx"; refuse "$flag" "$long" "$ctx" ;;
    I|U|F)
      for v in abc " 1" "1 " "1x"; do refuse "$flag" "$v" "$ctx"; done
      [ "$kind" = F ] && for v in nan inf -inf 1e999 +1 0x1p3; do refuse "$flag" "$v" "$ctx"; done
      [ "$kind" != F ] && for v in 1.5 0x10 " -1" +1 123456789012345678901234567890; do refuse "$flag" "$v" "$ctx"; done
      case $min in
        1) refuse "$flag" 0 "$ctx"; refuse "$flag" -1 "$ctx" ;;
        0) refuse "$flag" -1 "$ctx"; refuse "$flag" -0.5 "$ctx" ;;
        +) refuse "$flag" 0 "$ctx"; refuse "$flag" -1 "$ctx" ;;
      esac ;;
  esac
done <<<"$table"

# a switch takes no value
for s in $switches; do
  cases=$((cases + 1))
  out=$("$DETRAIN" train "${base[@]}" "$s=1" 2>&1); rc=$?
  [ $rc -eq 2 ] && grep -qF -- "$s" <<<"$out" || { echo "FAIL: $s=1 -> rc=$rc: $out"; fail=1; }
done

# a CUDA flag on the CPU would change nothing: refused, even with a valid value; with
# --device cuda a bad value is refused by the flag's own check, before any CUDA call (this
# binary may have no CUDA at all)
for f in --attention-impl=gemm --gemm-epilogues=off --gemm-own=off --gemm-dot=off --dw-batch=off \
         --bwd-overlap=off --cuda-graphs=off; do
  cases=$((cases + 1))
  out=$("$DETRAIN" train "${base[@]}" "$f" 2>&1); rc=$?
  [ $rc -eq 2 ] && grep -qF -- "${f%%=*} applies to --device cuda only" <<<"$out" \
    || { echo "FAIL: $f on the CPU -> rc=$rc: $out"; fail=1; }
  cases=$((cases + 1))
  out=$("$DETRAIN" train "${base[@]}" --device cuda --deterministic-mode "${f%%=*}=bogus" 2>&1); rc=$?
  [ $rc -eq 2 ] && grep -qF -- "${f%%=*} 'bogus' is not a choice" <<<"$out" \
    || { echo "FAIL: ${f%%=*}=bogus with --device cuda -> rc=$rc: $out"; fail=1; }
done

# --trace-steps that select no step of the run trace nothing: refused
cases=$((cases + 1))
out=$("$DETRAIN" train "${base[@]}" --trace-level metrics --trace-dir "$d/t2" --trace-steps 5-9 2>&1); rc=$?
[ $rc -eq 2 ] && grep -qF -- "--trace-steps" <<<"$out" || { echo "FAIL: --trace-steps past the run -> rc=$rc: $out"; fail=1; }
[ -e "$d/t2" ] && { echo "FAIL: a refused run created its --trace-dir"; fail=1; }

# deterministic mode sees every argument: thousands of harmless ones, then one it refuses
many=()
for ((i = 0; i < 4000; i++)); do many+=(--op-variant gemm=det); done
for last in "--op-variant encoder_bwd=fast" "--no-load-rng"; do
  cases=$((cases + 1))
  # shellcheck disable=SC2086
  out=$("$DETRAIN" train "${base[@]}" --deterministic-mode "${many[@]}" $last 2>&1); rc=$?
  if [ $rc -ne 2 ] || ! grep -qF "has no deterministic path" <<<"$out"; then
    echo "FAIL: deterministic mode with 8000 arguments then '$last' -> rc=$rc: ${out:0:300}"; fail=1
  fi
done

# the good values of the same flags still run (a refusal of everything would pass above)
cases=$((cases + 1))
"$DETRAIN" train "${base[@]}" --lr-warmup-iters 0 --clip-grad 0 --seed 0 --threads 1 \
  --lr-decay-iters 1 --hidden-dropout 0 >/dev/null 2>&1 || { echo "FAIL: good values refused"; fail=1; }
echo "$cases cases"
exit $fail
