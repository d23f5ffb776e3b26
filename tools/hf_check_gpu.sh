#!/usr/bin/env bash
# Both directions of the Hugging Face GPT-2 check, on a machine with PyTorch and
# transformers (tools/hf_compare.py says what is compared and with what tolerance):
#   reverse: transformers saves a random GPT-2 -> detrain imports it (dt_hf_gpt2_import)
#            and runs its forward on the same tokens -> logits/loss match transformers';
#   forward: detrain exports those weights (dt_hf_gpt2_export) -> from_pretrained loads
#            them -> transformers' logits/loss match the ones detrain computed.
# The detrain side is the --forward mode of tests/ckpt/test_hf_gpt2.c, compiled here from
# the few sources it needs (so no full build is required).
# usage: tools/hf_check_gpu.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-$(mktemp -d)}
mkdir -p "$W"
blas=$(ls -d /usr/include/x86_64-linux-gnu/openblas-* 2>/dev/null | head -1)
gcc -std=c11 -O2 -fopenmp -ffp-contract=off -D_GNU_SOURCE -Iinclude -Isrc -Itests ${blas:+-I$blas} \
  tests/ckpt/test_hf_gpt2.c src/ckpt/*.c src/core/status.c src/core/json.c src/core/determinism.c src/core/philox.c \
  src/model/gpt.c src/ops/*.c -lopenblas -lm -o "$W/hf_forward"
rc=0
run() { echo "+ $*"; "$@" || rc=1; }
for shape in "small:--n-layer 2 --n-head 4 --n-embd 64 --vocab-size 300 --n-positions 64 --batch 2 --seq 32" \
             "gpt2-124m:--n-layer 12 --n-head 12 --n-embd 768 --vocab-size 50257 --n-positions 1024 --batch 1 --seq 64"; do
  name=${shape%%:*}; opts=${shape#*:}
  echo "== $name"
  run python3 tools/hf_compare.py make-init "$W/$name-hf" $opts
  run "$W/hf_forward" --forward "$W/$name-hf" "$W/$name-dt"
  run python3 tools/hf_compare.py compare-files "$W/$name-hf/logits_check.bin" "$W/$name-dt/logits_check.bin"
  run python3 tools/hf_compare.py check "$W/$name-dt"
done
echo "hf_check_gpu: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
