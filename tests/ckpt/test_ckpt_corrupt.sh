#!/usr/bin/env bash
# Strict load: corrupted checkpoints and configs that would change the trajectory are
# errors that name the problem; the run exits non-zero and writes nothing (no log
# directory, no save directory); `detrain ckpt verify` rejects the same corruptions.
# "forged" cases rewrite a file AND recompute every digest in state.json (a stdlib Python
# forger below), so only the semantic checks (dtype, shape) can catch them.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
common=(--model tiny --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2
        --global-batch-size 4 --hidden-dropout 0.1 --lr-decay-iters 20 --eval-interval 0
        --deterministic-mode --threads 1 --quiet)
fail() { echo "FAIL: $*"; exit 1; }
"$DETRAIN" train "${common[@]}" --train-iters 10 --save "$d/base"
base="$d/base/iter_0000010"
"$DETRAIN" ckpt verify "$d/base" >/dev/null || fail "pristine checkpoint does not verify"

forge() { # forge DIR KIND: rewrite model.safetensors' header (or env.json), re-digest all
python3 - "$1" "$2" <<'PY'
import hashlib, json, struct, sys
d, kind = sys.argv[1], sys.argv[2]
p = d + "/model.safetensors"
raw = open(p, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr, data = json.loads(raw[8:8 + n]), raw[8 + n:]
if kind == "shape":   # same bytes, transposed shape
    s = hdr["transformer.wpe.weight"]["shape"]; s.reverse()
elif kind == "dtype": # same size, another dtype
    hdr["transformer.ln_f.bias"]["dtype"] = "I32"
if kind == "env":     # another environment: a contract field of env.json
    e = open(d + "/env.json").read()
    assert '"cpu_model":"' in e
    open(d + "/env.json", "w").write(e.replace('"cpu_model":"', '"cpu_model":"other '))
else:
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    open(p, "wb").write(struct.pack("<Q", len(text)) + text + data)
st = json.load(open(d + "/state.json"))
for name in st["files"]:
    b = open(d + "/" + name, "rb").read()
    st["files"][name] = {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
for e in st["tensors"]["model.safetensors"]:
    h = hdr[e["name"]]; e["dtype"] = h["dtype"]; e["shape"] = h["shape"]
st["state_sha256"] = "0" * 64
text = json.dumps(st, indent=2) + "\n"
text = text.replace('"state_sha256": "' + "0" * 64, '"state_sha256": "' + hashlib.sha256(text.encode()).hexdigest())
open(d + "/state.json", "w").write(text)
PY
}

flip_data() { # flip_data FILE K: flip one bit of the K-th byte of the data buffer
python3 - "$1" "$2" <<'PY'
import struct, sys
p, k = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, "rb").read())
b[8 + struct.unpack("<Q", b[:8])[0] + k] ^= 0x10
open(p, "wb").write(b)
PY
}

forge_state() { # forge_state DIR KIND: a consistent-looking edit of state.json (and of a
                # safetensors file for the format/empty kinds), every digest recomputed
python3 - "$1" "$2" <<'PY'
import hashlib, json, struct, sys
d, kind = sys.argv[1], sys.argv[2]
st = json.load(open(d + "/state.json"))
def rewrite_header(name, edit):
    p = d + "/" + name
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr, data = json.loads(raw[8:8 + n]), raw[8 + n:]
    hdr, data = edit(hdr, data)
    text = json.dumps(hdr, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    open(p, "wb").write(struct.pack("<Q", len(text)) + text + data)
if kind == "tokens":
    st["consumed_tokens"] += 1
elif kind == "samples":
    st["consumed_samples"] += 4
elif kind == "micro":
    st["rng"]["dropout_micro_steps"] += 1
elif kind == "seed":   # rng seed and permutation key agree with each other, not with config
    st["rng"]["seed"] = st["data"]["permutation_key"] = 77
elif kind == "optim_format":
    def edit(h, data):
        h["__metadata__"]["format"] = "pt"
        return h, data
    rewrite_header("optimizer.safetensors", edit)
elif kind == "empty_model":
    rewrite_header("model.safetensors", lambda h, data: ({"__metadata__": h["__metadata__"]}, b""))
    st["tensors"]["model.safetensors"] = []
for name in st["files"]:
    b = open(d + "/" + name, "rb").read()
    st["files"][name] = {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()}
st["state_sha256"] = "0" * 64
text = json.dumps(st, indent=2) + "\n"
text = text.replace('"state_sha256": "' + "0" * 64, '"state_sha256": "' + hashlib.sha256(text.encode()).hexdigest())
open(d + "/state.json", "w").write(text)
PY
}

# case NAME EXPECTED-STDERR-TEXT SETUP [extra train flags...]
case_() {
  local name=$1 want=$2 setup=$3; shift 3
  local c="$d/c_$name"
  rm -rf "$c"; cp -r "$d/base" "$c"
  local it="$c/iter_0000010"
  eval "$setup"
  set +e
  "$DETRAIN" train "${common[@]}" --train-iters 20 --load "$c" --save "$d/s_$name" --log-dir "$d/l_$name" \
    "$@" 2>"$d/err_$name"
  local rc=$?
  set -e
  [ $rc -ne 0 ] || fail "$name: train accepted it"
  grep -qF -- "$want" "$d/err_$name" || fail "$name: stderr lacks '$want': $(cat "$d/err_$name")"
  [ ! -e "$d/s_$name" ] && [ ! -e "$d/l_$name" ] || fail "$name: something was written"
  echo "ok $name: $(head -c 220 "$d/err_$name")"
}
verify_rejects() {
  local name=$1 want=$2
  set +e; "$DETRAIN" ckpt verify "$d/c_$name" >/dev/null 2>"$d/verr"; local rc=$?; set -e
  [ $rc -eq 1 ] || fail "$name: ckpt verify exit $rc, expected 1"
  grep -qF -- "$want" "$d/verr" || fail "$name: verify stderr lacks '$want': $(cat "$d/verr")"
}

# corrupted files
case_ trunc_model "truncated" 'truncate -s -100 "$it/model.safetensors"'
verify_rejects trunc_model "truncated"
case_ flip_optim "optimizer.safetensors': tensor \"m.wte\" does not match its recorded SHA-256" \
  'flip_data "$it/optimizer.safetensors" 100'
verify_rejects flip_optim "does not match its recorded SHA-256"
case_ header_len "model.safetensors" \
  'python3 -c "import struct,sys;p=sys.argv[1];b=bytearray(open(p,\"rb\").read());n=struct.unpack(\"<Q\",b[:8])[0];b[:8]=struct.pack(\"<Q\",n+8);open(p,\"wb\").write(b)" "$it/model.safetensors"'
verify_rejects header_len "model.safetensors"
case_ flip_header "model.safetensors" \
  'printf "\x7b" | dd of="$it/model.safetensors" bs=1 seek=20 conv=notrunc status=none'
case_ state_edit "contents do not match its state_sha256" 'sed -i "s/\"step\": 10,/\"step\": 11,/" "$it/state.json"'
verify_rejects state_edit "state_sha256"
case_ state_trunc "no \"state_sha256\" member" 'truncate -s 300 "$it/state.json"'
case_ no_optim "optimizer.safetensors" 'rm "$it/optimizer.safetensors"'
case_ no_state "state.json' does not exist" 'rm "$it/state.json"'
case_ bad_tracker "non-digit" 'echo "1x" >"$c/latest_checkpointed_iteration.txt"'
case_ env_edit "env.json' does not match its recorded SHA-256" 'sed -i "s/deterministic_mode/deterministic_m0de/" "$it/env.json"'
case_ forged_shape 'transformer.wpe.weight' 'forge "$it" shape'
"$DETRAIN" ckpt verify "$d/c_forged_shape" >/dev/null || fail "forged_shape: the forger did not re-digest"
case_ forged_dtype 'checkpoints hold F32 master weights' 'forge "$it" dtype'

# fields that must follow from each other; formats; a model file without tensors
# (forged: every digest matches, only these checks can catch them)
case_ forged_tokens "consumed_tokens 641 does not follow from consumed_samples 40 x seq_length 16" 'forge_state "$it" tokens'
verify_rejects forged_tokens "consumed_tokens 641 does not follow"
case_ forged_samples "consumed_samples 44 does not follow from step 10 x global_batch_size 4" 'forge_state "$it" samples'
verify_rejects forged_samples "consumed_samples 44 does not follow"
case_ forged_micro "rng.dropout_micro_steps 21 does not follow from step 10 x 2 micro-batches per step" 'forge_state "$it" micro'
verify_rejects forged_micro "rng.dropout_micro_steps 21"
case_ forged_seed "rng.seed 77 differs from config seed 1234" 'forge_state "$it" seed'
verify_rejects forged_seed "rng.seed 77 differs from config seed 1234"
case_ forged_optim_format 'optimizer.safetensors'"'"': metadata "format" is "pt", not "detrain-adamw"' 'forge_state "$it" optim_format'
verify_rejects forged_optim_format 'not "detrain-adamw"'
case_ forged_empty_model "model.safetensors' holds no tensors" 'forge_state "$it" empty_model'
verify_rejects forged_empty_model "model.safetensors' holds no tensors"
cp -r "$d/base" "$d/c_forge_check"; forge_state "$d/c_forge_check/iter_0000010" none
"$DETRAIN" ckpt verify "$d/c_forge_check" >/dev/null || fail "the state forger does not re-digest"

# configs that would change the trajectory
case_ hidden "hidden_size = 64 but this run has 32 (--hidden-size)" : --hidden-size 32
case_ seed "seed = 1234 but this run has 99 (--seed)" : --seed 99
case_ gbs "global_batch_size = 4 but this run has 8 (--global-batch-size)" : --global-batch-size 8
case_ dropout "attention_dropout = 0 but this run has 0.200000003 (--attention-dropout)" : --attention-dropout 0.2
case_ lr "lr = 0.00100000005 but this run has 0.00200000009 (--lr)" : --lr 2e-3
case_ decay "lr_decay_iters = 20 but this run has 30 (--lr-decay-iters)" : --lr-decay-iters 30
case_ seqlen "seq_length = 16 but this run has 8 (--seq-length)" : --seq-length 8
case_ done_already "leaves nothing to do" : --train-iters 10

# flags that would break the trajectory in deterministic mode, or conflict
case_ no_rng "--no-load-rng" : --no-load-rng
case_ no_optim_flag "--no-load-optim" : --no-load-optim
case_ hf_and_load "--load and --init-from-hf both set" : --init-from-hf "$base"

# the pristine checkpoint was never touched
"$DETRAIN" ckpt verify "$d/base" >/dev/null || fail "base checkpoint changed"
# a checkpoint from another environment resumes, with a warning naming the field
cp -r "$d/base" "$d/c_env"; forge "$d/c_env/iter_0000010" env
"$DETRAIN" train "${common[@]}" --train-iters 12 --load "$d/c_env" --log-dir "$d/l_env" 2>"$d/err_env" \
  || fail "env: resume refused: $(cat "$d/err_env")"
grep -q "saved in another environment (contract fields differ: cpu_model)" "$d/err_env" \
  || fail "env: no warning: $(cat "$d/err_env")"

# deterministic mode is part of the trajectory
nodet=(); for a in "${common[@]}"; do [ "$a" = --deterministic-mode ] || nodet+=("$a"); done
set +e; "$DETRAIN" train "${nodet[@]}" --train-iters 12 --load "$d/base" 2>"$d/err_mode"; rc=$?; set -e
[ $rc -ne 0 ] && grep -qF "deterministic_mode = 1 but this run has 0" "$d/err_mode" \
  || fail "default-mode resume of a deterministic checkpoint: exit $rc, $(cat "$d/err_mode")"
# default mode: --no-load-rng (this run's seed) and --no-load-optim (fresh AdamW) are allowed
"$DETRAIN" train "${nodet[@]}" --train-iters 10 --save "$d/dbase"
"$DETRAIN" train "${nodet[@]}" --train-iters 12 --load "$d/dbase" --no-load-rng --no-load-optim --seed 5 \
  --save "$d/nodet"
"$DETRAIN" ckpt verify "$d/nodet" >"$d/v_nodet"
grep -q "seed 5," "$d/v_nodet" && grep -q "t = 2," "$d/v_nodet" && grep -q "step 12 " "$d/v_nodet" \
  || fail "--no-load-rng/--no-load-optim: $(cat "$d/v_nodet")"
echo "corrupt: all cases passed"
