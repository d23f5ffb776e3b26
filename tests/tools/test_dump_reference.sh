#!/usr/bin/env bash
# build/tools/dump_reference (the input of the PyTorch cross-check, docs/torch-reference.md):
# on a tiny config the dump is complete and consistent (check_reference_dump.py), two dumps
# made with 1 and 2 threads are byte-identical file by file (deterministic mode), the
# checker rejects a damaged dump, and bad flags exit non-zero. DUMP_REFERENCE=PATH runs
# another build of the tool.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${DUMP_REFERENCE:-build/tools/dump_reference}
check=tests/tools/check_reference_dump.py
[ -x "$bin" ] || { echo "missing $bin: run make (or make $bin)"; exit 1; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT

L=2 C=64 NH=4 V=300 T=32 B=2 S=3
args=(--model tiny --num-layers $L --hidden-size $C --num-attention-heads $NH --vocab-size $V
      --seq-length $T --micro-batch-size $B --steps $S --seed 5)
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$bin" "${args[@]}" --out "$d/a"
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$bin" "${args[@]}" --out "$d/b"
python3 "$check" "$d/a" $L $C $NH $V $T $B $S

# deterministic mode: same files, same bytes, whatever the thread count
[ "$(ls "$d/a")" = "$(ls "$d/b")" ] || { echo "file lists differ"; exit 1; }
for f in "$d"/a/*; do
  cmp "$f" "$d/b/$(basename "$f")" || { echo "dumps differ in $(basename "$f")"; exit 1; }
done
echo "two dumps (1 and 2 threads) byte-identical: $(ls "$d/a" | wc -l) files"

# the dump depends on its inputs: another seed gives other weights and batches
"$bin" "${args[@]}" --seed 6 --out "$d/c" 2>/dev/null
if cmp -s "$d/a/params_0.bin" "$d/c/params_0.bin" || cmp -s "$d/a/tokens_1.bin" "$d/c/tokens_1.bin"; then
  echo "--seed has no effect on the dump"; exit 1
fi

# the checker can fail: a truncated gradient file, a zeroed tensor's gradient, a wrong norm
expect_reject() {  # what, a phrase the checker's report must contain
  if python3 "$check" "$d/bad" $L $C $NH $V $T $B $S 2>"$d/err"; then
    echo "checker accepted a dump with $1"; exit 1
  fi
  grep -q "$2" "$d/err" || { echo "checker missed $1:"; cat "$d/err"; exit 1; }
  echo "checker rejects $1: $(grep "$2" "$d/err" | head -1)"
  rm -rf "$d/bad"
}
cp -r "$d/a" "$d/bad"; truncate -s -4 "$d/bad/grads_2.bin"; expect_reject "a truncated file" "531452 bytes"
cp -r "$d/a" "$d/bad"; rm "$d/bad/params_3.bin"; expect_reject "a missing file" "missing \['params_3.bin'\]"
cp -r "$d/a" "$d/bad"
python3 - "$d/bad" <<'PY'
import json, sys
ix = json.load(open(sys.argv[1] + "/index.json"))
t = next(t for t in ix["tensors"] if t["name"] == "ln2b")
with open(sys.argv[1] + "/grads_1.bin", "r+b") as f:
    f.seek(4 * t["offset"])
    f.write(bytes(4 * t["numel"]))
PY
expect_reject "an all-zero gradient" "gradient of ln2b is all zero"
cp -r "$d/a" "$d/bad"
python3 - "$d/bad/index.json" <<'PY'
import json, struct, sys
ix = json.load(open(sys.argv[1]))
log = ix["step_log"][1]
v = struct.unpack("<d", struct.pack("<Q", int(log["grad_norm_hex"], 16)))[0] * (1 + 1e-5)
log["grad_norm_hex"] = "0x%016x" % struct.unpack("<Q", struct.pack("<d", v))[0]
json.dump(ix, open(sys.argv[1], "w"))
PY
expect_reject "a wrong grad norm" "step 2: grad_norm"

# bad flags: a clear error and a non-zero exit
for bad in "--steps 0" "--bogus 1" "--vocab-size 100" "--num-attention-heads 3" "--lr x" "--model huge"; do
  # shellcheck disable=SC2086
  if "$bin" --out "$d/x" --model tiny $bad 2>"$d/err"; then echo "accepted: $bad"; exit 1; fi
  echo "rejects $bad: $(head -1 "$d/err")"
done
if "$bin" --model tiny 2>"$d/err"; then echo "accepted a missing --out"; exit 1; fi
echo "test_dump_reference: PASS"
