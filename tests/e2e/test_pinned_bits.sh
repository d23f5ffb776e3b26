#!/usr/bin/env bash
# The CPU metrics of three deterministic runs, pinned bit for bit (tests/e2e/pinned/*.hex,
# recorded at commit ebe5b54): `tiny` 30 steps, `small` 6 steps, and `tiny` with hidden and
# attention dropout 0.1. A refactor that changes any bit of loss, eval loss, grad norm,
# param norm, lr or num-zeros fails here. OpenBLAS picks its kernels by CPU, and the pins
# were made with its Haswell kernels: the runs ask for them (OPENBLAS_CORETYPE=Haswell, which
# every x86-64 CPU with AVX2 and FMA runs) and the test checks env.json's blas_kernel says so.
# On a CPU without them the pins cannot apply, and the test says so and passes.
set -uo pipefail
: "${DETRAIN:?}"
here=$(cd "$(dirname "$0")" && pwd)
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
if ! grep -qw avx2 /proc/cpuinfo || ! grep -qw fma /proc/cpuinfo; then
  echo "not applicable: this CPU lacks AVX2/FMA, so OpenBLAS cannot run the Haswell kernels the pins were made with"
  exit 0
fi
export OPENBLAS_CORETYPE=Haswell
fail=0
check() { # check NAME train-flags...
  local name=$1; shift
  if ! "$DETRAIN" train --deterministic-mode --quiet --log-dir "$d/$name" "$@"; then
    echo "FAIL: $name did not run"; fail=1; return
  fi
  grep -q '"blas_kernel":"Haswell"' "$d/$name/env.json" || {
    echo "FAIL: $name: env.json does not record the Haswell kernels"; fail=1; return; }
  python3 "$here/pinned_hex.py" "$d/$name/metrics.jsonl" > "$d/$name.hex"
  if cmp -s "$here/pinned/$name.hex" "$d/$name.hex"; then
    echo "ok: $name: $(wc -l < "$d/$name.hex") steps bitwise equal to the pin"
  else
    echo "FAIL: $name differs from tests/e2e/pinned/$name.hex:"; diff "$here/pinned/$name.hex" "$d/$name.hex" | head -6
    fail=1
  fi
}
check tiny-30 --model tiny --train-iters 30
check small-6 --model small --train-iters 6
check tiny-dropout-30 --model tiny --train-iters 30 --hidden-dropout 0.1 --attention-dropout 0.1
exit $fail
