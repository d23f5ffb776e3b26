#!/usr/bin/env bash
# On the GPU machine: detrain's bf16 GPU model against PyTorch on CUDA (docs/torch-reference.md,
# "The GPU model"). For each configuration, dump_reference_gpu records the first training
# steps and tools/torch_reference.py replays them against torch fp32 (TF32 off) and torch
# bf16 autocast, both loaded with detrain's parameters before every step:
#   gpt2-124m  L12 C768 NH12 V50257 T1024, B4, 3 steps, flash attention (the default)
#   small      L4 C256 NH4, V300 (Vp 384), T128 of 256, B8, 5 steps, lr 3e-3, no clipping,
#              GEMM attention (DT_ATTENTION=gemm)
# Prints each configuration's worst figures and PASS/FAIL; exits 0 when every configuration
# passes, 1 when one fails, 2 when the dump tool or PyTorch is missing.
#   DUMP_REFERENCE_GPU  the dump tool (default build/gpu-tests/dump_reference_gpu)
#   OUT                 logs and JSON summaries (default /tmp/detrain-torch-gpu)
#   CONFIGS             which configurations (default "gpt2-124m small")
#   PYTHON              the interpreter with PyTorch (default python3)
# The dumps (3.5 GB for gpt2-124m) go to a temporary folder that is removed at the end.
# usage: tools/torch_check_gpu.sh
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${DUMP_REFERENCE_GPU:-build/gpu-tests/dump_reference_gpu}
out=${OUT:-/tmp/detrain-torch-gpu}
py=${PYTHON:-python3}
[ -x "$bin" ] || { echo "torch_check_gpu: no dump tool at $bin: run make cuda (or set DUMP_REFERENCE_GPU)" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "torch_check_gpu: $py cannot import torch" >&2; exit 2; }
mkdir -p "$out"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/torch-check-gpu.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

declare -A flags=(
  [gpt2-124m]="--model gpt2-124m --micro-batch-size 4 --steps 3"
  [small]="--model small --vocab-size 300 --seq-length 128 --micro-batch-size 8 --steps 5 --lr 3e-3 --clip-grad 0"
)
# flash is the model's default where the shape allows; DT_ATTENTION=gemm forces the other
declare -A attention=([gpt2-124m]="-u DT_ATTENTION" [small]="DT_ATTENTION=gemm")
rc=0
for c in ${CONFIGS:-gpt2-124m small}; do
  [ -n "${flags[$c]:-}" ] || { echo "torch_check_gpu: unknown configuration $c" >&2; exit 2; }
  echo "== $c: ${flags[$c]} (env ${attention[$c]})"
  rm -rf "$tmp/dump"
  # shellcheck disable=SC2086  # the flags are words
  if ! env ${attention[$c]} "$bin" ${flags[$c]} --out "$tmp/dump" > "$out/dump_$c.txt" 2>&1; then
    echo "FAIL $c: the dump tool failed:"; tail -5 "$out/dump_$c.txt"; rc=1; continue
  fi
  "$py" "$here/torch_reference.py" "$tmp/dump" --device cuda --json "$out/torch_$c.json" \
      > "$out/torch_$c.txt" 2>&1
  prc=$?
  grep -E "^(dump made|worst|floor)" "$out/torch_$c.txt"
  case $prc in
    0) echo "PASS $c" ;;
    1) echo "FAIL $c:"; sed -n '/^FAIL:/,$p' "$out/torch_$c.txt" | head -20; rc=1 ;;
    *) echo "FAIL $c: torch_reference.py exited $prc:"; tail -5 "$out/torch_$c.txt"; rc=1 ;;
  esac
done
echo "torch_check_gpu: $([ $rc = 0 ] && echo PASS || echo FAIL) (logs in $out)"
exit $rc
