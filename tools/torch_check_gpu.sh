#!/usr/bin/env bash
# On the GPU machine: detrain's bf16 GPU model against PyTorch on CUDA (docs/torch-reference.md,
# "The GPU model"). For each configuration, dump_reference_gpu records the first training
# steps and tools/torch_reference.py replays them against torch fp32 (TF32 off) and torch
# bf16 autocast, both loaded with detrain's parameters before every step:
#   gpt2-124m  L12 C768 NH12 V50257 T1024, B4, 3 steps, flash attention (the default)
#   small      L4 C256 NH4, V300 (Vp 384), T128 of 256, B8, 5 steps, lr 3e-3, no clipping,
#              GEMM attention (--attention-impl gemm)
# After the small configuration passes, two negative controls damage a copy of its dump
# and require the comparison to fail where it should: one gradient tensor (ln2b, step 2)
# scaled by 1.02, below the fixed 5e-2 gradient tolerance but 2.5x above the floor check's
# limit, and one step's loss off by 1%.
# Prints each configuration's worst figures and PASS/FAIL; exits 0 when every configuration
# passes and every negative control fails, 1 otherwise, 2 when the dump tool or PyTorch is
# missing.
#   DUMP_REFERENCE_GPU  the dump tool (default build/gpu-tests/dump_reference_gpu)
#   OUT                 logs and JSON summaries (default /tmp/detrain-torch-gpu)
#   CONFIGS             which configurations (default "gpt2-124m small")
#   PYTHON              the interpreter with PyTorch (default python3)
#   TORCH_DEVICE        where torch runs (default cuda)
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

dev=${TORCH_DEVICE:-cuda}

# negative NAME PHRASE EDIT: damages a copy of $tmp/dump with the Python EDIT (argv[1]: the
# copy) and requires torch_reference.py to fail with PHRASE among its failures.
negative() {
  rm -rf "$tmp/bad" && cp -r "$tmp/dump" "$tmp/bad" && "$py" -c "$3" "$tmp/bad" || return 1
  "$py" "$here/torch_reference.py" "$tmp/bad" --device "$dev" > "$out/negative_$1.txt" 2>&1
  local prc=$?
  if [ $prc = 1 ] && sed -n '/^FAIL:/,$p' "$out/negative_$1.txt" | grep -q "$2"; then
    echo "negative control $1: caught ($(sed -n '/^FAIL:/,$p' "$out/negative_$1.txt" | grep -c '^  ') failures, e.g.$(grep -m1 "$2" "$out/negative_$1.txt" | sed 's/^ *//; s/^/ /'))"
    return 0
  fi
  echo "negative control $1: NOT caught (exit $prc; see $out/negative_$1.txt)"
  return 1
}
scale_grad='
import json, sys
from array import array
d = sys.argv[1]
t = next(t for t in json.load(open(d + "/index.json"))["tensors"] if t["name"] == "ln2b")
with open(d + "/grads_2.bin", "r+b") as f:
    f.seek(4 * t["offset"]); a = array("f"); a.frombytes(f.read(4 * t["numel"]))
    f.seek(4 * t["offset"]); f.write(array("f", [x * 1.02 for x in a]).tobytes())'
shift_loss='
import json, struct, sys
p = sys.argv[1] + "/index.json"; ix = json.load(open(p)); e = ix["step_log"][2]
e["loss"] = struct.unpack("<d", struct.pack("<Q", int(e["loss_hex"], 16)))[0] * 1.01
e["loss_hex"] = "0x%016x" % struct.unpack("<Q", struct.pack("<d", e["loss"]))[0]
json.dump(ix, open(p, "w"))'

declare -A flags=(
  [gpt2-124m]="--model gpt2-124m --micro-batch-size 4 --steps 3"
  [small]="--model small --vocab-size 300 --seq-length 128 --micro-batch-size 8 --steps 5 --lr 3e-3 --clip-grad 0"
)
# flash is the model's default where the shape allows; --attention-impl gemm forces the other
declare -A attention=([gpt2-124m]="--attention-impl auto" [small]="--attention-impl gemm")
rc=0
for c in ${CONFIGS:-gpt2-124m small}; do
  [ -n "${flags[$c]:-}" ] || { echo "torch_check_gpu: unknown configuration $c" >&2; exit 2; }
  echo "== $c: ${attention[$c]} ${flags[$c]}"
  rm -rf "$tmp/dump"
  # shellcheck disable=SC2086  # the flags are words
  if ! "$bin" ${attention[$c]} ${flags[$c]} --out "$tmp/dump" > "$out/dump_$c.txt" 2>&1; then
    echo "FAIL $c: the dump tool failed:"; tail -5 "$out/dump_$c.txt"; rc=1; continue
  fi
  "$py" "$here/torch_reference.py" "$tmp/dump" --device "$dev" --json "$out/torch_$c.json" \
      > "$out/torch_$c.txt" 2>&1
  prc=$?
  grep -E "^(dump made|worst|floor)" "$out/torch_$c.txt"
  case $prc in
    0) echo "PASS $c"
       if [ "$c" = small ]; then
         negative grad_ln2b_x1.02 "grad ln2b" "$scale_grad" || rc=1
         negative loss_step3_x1.01 "step 3 loss" "$shift_loss" || rc=1
       fi ;;
    1) echo "FAIL $c:"; sed -n '/^FAIL:/,$p' "$out/torch_$c.txt" | head -20; rc=1 ;;
    *) echo "FAIL $c: torch_reference.py exited $prc:"; tail -5 "$out/torch_$c.txt"; rc=1 ;;
  esac
done
echo "torch_check_gpu: $([ $rc = 0 ] && echo PASS || echo FAIL) (logs in $out)"
exit $rc
