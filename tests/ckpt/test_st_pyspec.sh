#!/usr/bin/env bash
# safetensors files written by detrain, checked by an independent reader written in
# Python's standard library (tests/ckpt/st_spec_check.py): the generic sample (several
# dtypes, a scalar, an empty tensor, sizes that force header padding) and a Hugging Face
# GPT-2 export of a small config (names, shapes, config.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/tests/ckpt/test_safetensors --emit "$work/sample.safetensors"
python3 tests/ckpt/st_spec_check.py "$work/sample.safetensors" --expect-sample
# The checker must be able to fail: a non-space byte at the end of the header is caught.
python3 - "$work/sample.safetensors" "$work/bad.safetensors" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
n = int.from_bytes(b[:8], "little")
b[8 + n - 1] = ord("x")
open(sys.argv[2], "wb").write(b)
PY
if python3 tests/ckpt/st_spec_check.py "$work/bad.safetensors" 2>/dev/null; then
  echo "checker accepted a broken file"; exit 1; fi
build/tests/ckpt/test_hf_gpt2 --emit "$work/hf"
python3 tests/ckpt/st_spec_check.py --hf-dir "$work/hf"
echo "pyspec: ok"
