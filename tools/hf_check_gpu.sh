#!/usr/bin/env bash
# Both directions of the Hugging Face GPT-2 check, on a machine with PyTorch and
# transformers (tools/hf_compare.py says what is compared and with what tolerance):
#   reverse: transformers saves a random GPT-2 -> detrain imports it (dt_hf_gpt2_import)
#            and runs its forward on the same tokens -> logits/loss match transformers';
#   forward: detrain exports those weights (dt_hf_gpt2_export) -> from_pretrained loads
#            them -> transformers' logits/loss match the ones detrain computed.
# The detrain side is the --forward mode of tests/ckpt/test_hf_gpt2.c. The GPU machine has
# no OpenBLAS, so that program is linked statically here first:
#   tools/hf_check_gpu.sh --build        (on the CPU machine: builds build/tools/hf_forward_static)
#   tools/hf_check_gpu.sh [WORKDIR]      (on the GPU machine, carrying that file)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/tools/hf_forward_static
if [ "${1:-}" = --build ]; then
  make build/libdetrain.a
  mkdir -p build/tools
  gcc -std=c11 -O2 -fopenmp -ffp-contract=off -D_GNU_SOURCE -Iinclude -Isrc -Itests \
      -I/usr/include/x86_64-linux-gnu/openblas-openmp -static -o "$bin" tests/ckpt/test_hf_gpt2.c \
      build/libdetrain.a /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.a \
      -lgfortran -lquadmath -lm -lpthread 2>&1 |
      grep -v "dlopen.*statically linked\|gomp_target_init\|^/usr/bin/ld: .*libgomp.a" || true
  [ -x "$bin" ] || { echo "hf_check_gpu: static link failed" >&2; exit 1; }
  strip "$bin"
  echo "built $bin"
  exit 0
fi
[ -x "$bin" ] || { echo "hf_check_gpu: $bin missing: run tools/hf_check_gpu.sh --build first" >&2; exit 2; }
W=${1:-$(mktemp -d)}
mkdir -p "$W"
cp "$bin" "$W/hf_forward"
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
