#!/usr/bin/env bash
# The CPU trainer's independent checks that need PyTorch, transformers or TensorBoard,
# run in one call on the GPU machine (which has them, but no OpenBLAS: the detrain
# programs travel as static binaries built here).
#
# Here, first:  bash tools/dump_reference_static.sh && bash tools/hf_check_gpu.sh --build &&
#               bash tools/gpu_machine_checks.sh --prepare
# There:        bash tools/gpu_machine_checks.sh   (carry build/tools, runs/gpu-checks)
# Writes its log to $OUT/gpu_machine_checks.log when OUT is set.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --prepare ]; then
  # a real training log, resumed once into the same dir, for TensorBoard's reader
  rm -rf runs/gpu-checks; mkdir -p runs/gpu-checks
  set -e
  build/detrain train --deterministic-mode --train-iters 40 --eval-interval 10 --quiet \
    --save runs/gpu-checks/ckpt --save-interval 40 --log-dir runs/gpu-checks/log
  echo "prepared runs/gpu-checks"
  exit 0
fi
log=${OUT:-/tmp}/gpu_machine_checks.log
export PYTHONUNBUFFERED=1
rc=0
step() { echo "== $*" | tee -a "$log"; "$@" 2>&1 | tee -a "$log"; local r=${PIPESTATUS[0]}; [ $r = 0 ] || rc=1; echo "== rc=$r" | tee -a "$log"; }
python3 -c 'import torch, transformers, tensorboard; print("torch", torch.__version__, "transformers", transformers.__version__, "tensorboard", tensorboard.__version__)' | tee -a "$log"
d=$(mktemp -d)
step build/tools/dump_reference_static --out "$d/ref"
step python3 tools/torch_reference.py "$d/ref"
step build/tools/dump_reference_static --model tiny --vocab-size 300 --seq-length 64 --micro-batch-size 4 --steps 5 --lr 3e-3 --clip-grad 0 --out "$d/ref_tiny"
step python3 tools/torch_reference.py "$d/ref_tiny"
step bash tools/hf_check_gpu.sh "$d/hf"
step python3 tools/check_tensorboard.py runs/gpu-checks/log
# a checkpoint of a real run loads into transformers with no missing or unexpected keys
step python3 -c '
import sys, torch
from transformers import GPT2LMHeadModel
m, info = GPT2LMHeadModel.from_pretrained(sys.argv[1], output_loading_info=True)
bad = {k: v for k, v in info.items() if v and k != "missing_keys"} or [k for k in info["missing_keys"] if "lm_head" not in k]
print("loading info:", info)
ids = torch.tensor([[72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100]])
loss = m(ids, labels=ids).loss.item()
print("loss on a short byte sequence: %.4f" % loss)
sys.exit(1 if bad or not (0 < loss < 10) else 0)' runs/gpu-checks/ckpt/iter_0000040
echo "gpu_machine_checks: $([ $rc = 0 ] && echo PASS || echo FAIL)" | tee -a "$log"
exit $rc
