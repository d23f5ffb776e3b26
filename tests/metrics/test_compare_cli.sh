#!/usr/bin/env bash
# `detrain compare` from the command line: output and exit codes (0 identical, 1 differ,
# 2 usage/IO error) for identical runs, a one-ulp loss change at step 7, wall-clock-only
# differences, overlapping and disjoint step ranges, a missing directory, a fingerprint
# difference (warning only) and checkpoint directories (not supported yet).
set -u
: "${DETRAIN:?run through tests/run.sh or set DETRAIN}"
GEN="$(dirname "$DETRAIN")/tests/metrics/test_metrics_log"
[ -x "$GEN" ] || { echo "missing $GEN (make first)"; exit 1; }
T=$(mktemp -d /tmp/dt_test_compare_cli_XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# run NAME WANT_RC ARGS...: runs compare, keeps stdout/stderr in $T/NAME.{out,err}
run() {
  local name=$1 want=$2; shift 2
  "$DETRAIN" compare "$@" >"$T/$name.out" 2>"$T/$name.err"
  local rc=$?
  [ $rc -eq "$want" ] || fail "$name: exit $rc, want $want; out: $(cat "$T/$name.out") err: $(cat "$T/$name.err")"
}
expect() { grep -qF -- "$2" "$T/$1" || fail "$1 lacks '$2': $(cat "$T/$1")"; }

"$GEN" --write "$T/a" 1 10 --special || exit 1
"$GEN" --write "$T/b" 1 10 --special || exit 1
"$GEN" --write "$T/slow" 1 10 --special --wall-offset 25 || exit 1
"$GEN" --write "$T/late" 6 15 --special || exit 1
"$GEN" --write "$T/far" 11 15 --special || exit 1
cp -r "$T/a" "$T/ulp"

run same 0 "$T/a" "$T/b"
expect same.out "bitwise identical: 10 steps (steps 1-10)"

run slow 0 "$T/a" "$T/slow"
expect slow.out "bitwise identical: 10 steps (steps 1-10)"

# one ulp up in loss_hex at step 7
python3 - "$T/ulp/metrics.jsonl" <<'EOF' || fail "could not edit"
import json, sys
path = sys.argv[1]
lines = open(path).read().splitlines()
out = []
for ln in lines:
    d = json.loads(ln)
    if d["step"] == 7:
        old = d["loss_hex"]
        new = "0x%016x" % (int(old, 16) + 1)
        ln = ln.replace('"loss_hex":"%s"' % old, '"loss_hex":"%s"' % new)
        assert new in ln
    out.append(ln)
open(path, "w").write("\n".join(out) + "\n")
EOF
run ulp 1 "$T/a" "$T/ulp"
expect ulp.out "DIFFERENT at step 7, metric loss"
expect ulp.out "0x3ff71c71c71c71c7"
expect ulp.out "0x3ff71c71c71c71c8"
expect ulp.out "steps 1-6 before it are bitwise identical"

# malformed exact bits are bad input (exit 2, naming the run, the line and the field),
# never a difference; in either log, and even when both logs hold the same bad value
bad_hex() { # bad_hex DIR STEP FIELD NEW-JSON-VALUE
python3 - "$1/metrics.jsonl" "$2" "$3" "$4" <<'PY' || fail "could not edit $1"
import json, sys
path, step, field, new = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = []
for ln in open(path).read().splitlines():
    d = json.loads(ln)
    if d["step"] == step:
        old = '"%s":"%s"' % (field, d[field])
        assert old in ln
        ln = ln.replace(old, '"%s":%s' % (field, new))
    out.append(ln)
open(path, "w").write("\n".join(out) + "\n")
PY
}
n=0
for v in '"0x3ff71c71c71c71cZ"' '"0x3ff71c71c71c71c"' '"3ff71c71c71c71c7ab"' '"0x3ff71c71c71c71c7 "' '1.4444' 'null' '"0X3ff71c71c71c71c7"'; do
  n=$((n + 1)); rm -rf "$T/hex$n"; cp -r "$T/ulp" "$T/hex$n"; rm -f "$T/hex$n/env.json"
  bad_hex "$T/hex$n" 3 grad_norm_hex "$v"
  run hex$n 2 "$T/a" "$T/hex$n"
  expect hex$n.err "$T/hex$n/metrics.jsonl line 3: field \"grad_norm_hex\" holds"
  expect hex$n.err "not \"0x\" and 16 hex digits"
done
cp -r "$T/hex1" "$T/hex1b"
run hex_both 2 "$T/hex1" "$T/hex1b"
expect hex_both.err "hex1/metrics.jsonl line 3: field \"grad_norm_hex\""

# a metrics.jsonl file works as an argument too
run files 1 "$T/a/metrics.jsonl" "$T/ulp/metrics.jsonl"

run overlap 0 "$T/a" "$T/late"
expect overlap.out "bitwise identical: 5 steps (steps 6-10)"
expect overlap.out "A holds steps 1-10, B holds steps 6-15"

run disjoint 2 "$T/a" "$T/far"
expect disjoint.err "share no step"

run missing 2 "$T/a" "$T/does-not-exist"
expect missing.err "does-not-exist"

run usage 2 "$T/a"
run badopt 2 --frobnicate "$T/a" "$T/b"

# fingerprints: a contract difference warns (stderr) but does not fail
cat >"$T/a/env.json" <<'EOF'
{"contract": {"git_rev": "abc", "cuda": "12.8", "omp_dynamic": "false"}, "info": {"host": "n1"}}
EOF
cat >"$T/b/env.json" <<'EOF'
{"contract": {"git_rev": "abc", "cuda": "12.9", "omp_dynamic": "false"}, "info": {"host": "n2"}}
EOF
run fp 0 "$T/a" "$T/b"
expect fp.out "bitwise identical: 10 steps"
expect fp.err "fingerprints differ in 1 contract field: cuda"
grep -q host "$T/fp.err" && fail "info fields must not be compared: $(cat "$T/fp.err")"
cp "$T/a/env.json" "$T/b/env.json"
run fp_same 0 "$T/a" "$T/b"
[ -s "$T/fp_same.err" ] && fail "unexpected warning: $(cat "$T/fp_same.err")"

# checkpoint directories go to the checkpoint comparison (tests/ckpt/test_ckpt_*.sh cover
# it); incomplete ones are an error
mkdir -p "$T/ck1" "$T/ck2" && touch "$T/ck1/model.safetensors" "$T/ck2/model.safetensors"
run ckpt 2 "$T/ck1" "$T/ck2"
expect ckpt.err "no complete checkpoint there"
mkdir -p "$T/save" && echo 10 >"$T/save/latest_checkpointed_iteration.txt"
run ckpt_save 2 "$T/save" "$T/ck2"
expect ckpt_save.err "iter_0000010/state.json' does not exist"

[ $fails -eq 0 ] && echo "compare CLI: all cases passed"
[ $fails -eq 0 ]
