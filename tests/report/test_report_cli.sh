#!/usr/bin/env bash
# `detrain report` from the command line on synthetic logs (tests/metrics/test_metrics_log
# --write) and synthetic traces (tests/trace/test_trace_diff --fixtures), the page read back
# with tests/report/report_dom.py:
#   - each verdict and its exit code are compare's on the same runs: identical, a one-ulp
#     change (the first mismatch's step, metric and both hex values as compare prints them),
#     overlapping ranges ("identical over the shared steps");
#   - bad input gets compare's (or trace-diff's) named error, exit 2, and no page: a missing
#     run, a torn last line, logs of different lengths that share no step, a truncated trace,
#     a bench file without its deterministic half; usage errors exit 2;
#   - the page is self-contained (no script, nothing fetched, only in-page links);
#   - a contract field that differs is flagged outside the contract; a resumed log's marker
#     and a log that starts past step 1 are marked; names from disk are escaped;
#   - --trace-diff names the injected op as the origin with every digest of the event;
#     --bench draws each range's bar and tax;
#   - 100k steps: the page is written in a few seconds and the verdict finds a difference in
#     the very last step's bits (the verdict reads every step), while the page stays small.
set -u
: "${DETRAIN:?run through tests/run.sh or set DETRAIN}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="$(dirname "$DETRAIN")/tests"
GEN="$bin/metrics/test_metrics_log"
TRACES="$bin/trace/test_trace_diff"
DOM="$here/report_dom.py"
for x in "$GEN" "$TRACES"; do [ -x "$x" ] || { echo "FAIL: missing $x (make first)"; exit 1; }; done
T=$(mktemp -d /tmp/dt_test_report_cli_XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# report NAME WANT_RC ARGS...: runs report into $T/NAME.html, output in $T/NAME.{out,err}
report() {
  local name=$1 want=$2; shift 2
  "$DETRAIN" report "$@" --out "$T/$name.html" >"$T/$name.out" 2>"$T/$name.err"
  local rc=$?
  [ $rc -eq "$want" ] || fail "$name: exit $rc, want $want; out: $(cat "$T/$name.out") err: $(cat "$T/$name.err")"
  if [ "$want" -eq 2 ] && [ -e "$T/$name.html" ]; then fail "$name: a page was written after an error"; fi
}
# check NAME EXPR...: asserts about the page $T/NAME.html, read by report_dom.py (d: the page,
# v: its verdicts), all in one python process
check() {
  local name=$1; shift
  python3 "$DOM" "$T/$name.html" "$@" || fail "$name: see above"
}
# same_error NAME ARGS...: compare's message for A B must be report's (after the command name)
same_error() {
  local name=$1; shift
  "$DETRAIN" compare "$@" >/dev/null 2>"$T/$name.cmp.err"; local rc=$?
  [ $rc -eq 2 ] || fail "$name: compare exit $rc, want 2"
  local want got
  want=$(grep '^detrain compare: ' "$T/$name.cmp.err" | sed 's/^detrain compare: //')
  got=$(grep '^detrain report: ' "$T/$name.err" | sed 's/^detrain report: //')
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "$name: report says '$got', compare says '$want'"
}

"$GEN" --write "$T/a" 1 10 --special --no-tfevents || exit 1
"$GEN" --write "$T/b" 1 10 --special --no-tfevents || exit 1
"$GEN" --write "$T/late" 6 15 --special --no-tfevents || exit 1
"$GEN" --write "$T/far" 11 15 --special --no-tfevents || exit 1
cp -r "$T/a" "$T/ulp"
# one ulp up in loss_hex at step 7
python3 - "$T/ulp/metrics.jsonl" <<'EOF' || fail "could not edit"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
for i, ln in enumerate(lines):
    d = json.loads(ln)
    if d["step"] == 7:
        old = d["loss_hex"]
        lines[i] = ln.replace(old, "0x%016x" % (int(old, 16) + 1))
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
EOF

# ---- verdicts match compare's exit codes and first mismatch --------------------------------
report same 0 "$T/a" "$T/b"
check same 'len(v) == 1 and v[0]["verdict"] == "identical" and v[0]["exit"] == "0" and v[0]["cells"][1] == "bitwise identical"'
report ulp 1 "$T/a" "$T/ulp" "$T/b"
"$DETRAIN" compare "$T/a" "$T/ulp" >"$T/ulp.cmp"; [ $? -eq 1 ] || fail "compare a ulp should exit 1"
hex_a=$(sed -n 's/^  A: \(0x[0-9a-f]*\).*/\1/p' "$T/ulp.cmp"); hex_b=$(sed -n 's/^  B: \(0x[0-9a-f]*\).*/\1/p' "$T/ulp.cmp")
[ "$hex_a" = 0x3ff71c71c71c71c7 ] && [ "$hex_b" = 0x3ff71c71c71c71c8 ] || fail "compare's hex: $hex_a $hex_b"
check ulp "v[0]['verdict'] == 'mismatch' and v[0]['exit'] == '1' and v[0]['step'] == '7' and v[0]['metric'] == 'loss'" \
  "'$hex_a' in v[0]['cells'][3] and '$hex_b' in v[0]['cells'][3] and v[0]['cells'][1] == 'first mismatch at step 7 (loss)'" \
  "v[1]['b'] == 'C' and v[1]['verdict'] == 'identical' and d['first_mismatch'] == [7]" \
  "any('identical through step 6' in c and '$hex_b' in c for c in d['captions'])"
grep -q "A vs B: first mismatch at step 7 (loss): A $hex_a" "$T/ulp.out" || fail "ulp: console line: $(cat "$T/ulp.out")"
# self-contained: nothing to fetch, nothing to run
python3 - "$T/ulp.html" <<'EOF' || fail "the page refers to something outside itself"
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
for bad in ("<script", "<link", "<img", "<iframe", " src=", "url(", "@import"):
    assert bad not in page, bad
hrefs = re.findall(r'href="([^"]*)"', page)
assert hrefs and all(h.startswith("#") for h in hrefs), hrefs
EOF
report overlap 0 "$T/a" "$T/late"
"$DETRAIN" compare "$T/a" "$T/late" >/dev/null || fail "compare a late should exit 0"
check overlap "v[0]['verdict'] == 'identical-shared' and v[0]['cells'][1] == 'identical over the shared steps' and '5 compared (6–10)' in v[0]['cells'][2]"

# ---- bad input: compare's errors, exit 2, no page -------------------------------------------
report disjoint 2 "$T/a" "$T/far"
same_error disjoint "$T/a" "$T/far"
grep -q "share no step" "$T/disjoint.err" || fail "disjoint: $(cat "$T/disjoint.err")"
report missing 2 "$T/a" "$T/does-not-exist"
same_error missing "$T/a" "$T/does-not-exist"
grep -q "does-not-exist" "$T/missing.err" || fail "missing: $(cat "$T/missing.err")"
cp -r "$T/a" "$T/torn"
printf '{"step":11,"loss":1.5' >>"$T/torn/metrics.jsonl"
report torn 2 "$T/a" "$T/torn"
same_error torn "$T/a" "$T/torn"
grep -q "line 11 is incomplete" "$T/torn.err" || fail "torn: $(cat "$T/torn.err")"
"$DETRAIN" report "$T/a" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no --out must be a usage error"
"$DETRAIN" report --out "$T/x.html" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no run must be a usage error"
"$DETRAIN" report "$T/a" --bogus --out "$T/x.html" >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option must be a usage error"
"$DETRAIN" report "$T/a" --out "$T/x.html" --trace-diff "$T/a" >/dev/null 2>&1; [ $? -eq 2 ] || fail "--trace-diff needs two"
[ -e "$T/x.html" ] && fail "a usage error wrote a page"

# ---- fingerprints, resume points, escaping ---------------------------------------------------
cat >"$T/a/env.json" <<'EOF'
{"contract": {"detrain_git_rev": "abc", "cuda": "12.8"}, "info": {"host": "n1", "threads": "2"}}
EOF
cat >"$T/b/env.json" <<'EOF'
{"contract": {"detrain_git_rev": "abc", "cuda": "12.9"}, "info": {"host": "n2", "threads": "2"}}
EOF
report fp 0 "$T/a" "$T/b"
check fp "'cuda — outside the determinism contract' in v[0]['cells'][4] and 'host' in v[0]['cells'][4] and 'detrain_git_rev' not in v[0]['cells'][4]"
"$GEN" --write "$T/res" 1 12 --special --no-tfevents || exit 1
"$GEN" --write "$T/res" 8 15 --special --no-tfevents --resume || exit 1
"$GEN" --write "$T/full" 1 15 --special --no-tfevents || exit 1
"$GEN" --write "$T/starts8" 8 15 --special --no-tfevents || exit 1
report resumed 0 "$T/full" "$T/res" "$T/starts8"
check resumed "d['runs'] == {'A': '', 'B': '8', 'C': '8'} and ['B', 8] in d['resume_marks'] and ['C', 8] in d['resume_marks']" \
  "v[0]['verdict'] == 'identical' and v[1]['verdict'] == 'identical-shared'"
weird="$T/run <b>&\"x'"
cp -r "$T/a" "$weird"
report escaped 0 "$T/a" "$weird"
grep -q "<b>&" "$T/escaped.html" && fail "escaped: a raw name from disk reached the page"
check escaped "'run <b>&\"x\\'' in d['text']"

# ---- trace and bench sections -----------------------------------------------------------------
"$TRACES" --fixtures "$T/tr" >/dev/null || { echo "FAIL writing trace fixtures"; exit 1; }
report trace 1 "$T/a" "$T/b" --trace-diff "$T/tr/a" "$T/tr/inject_matmul"
check trace "[r['verdict'] for r in d['trace_ranks']] == ['origin_candidate'] * 2 and all(r['op'] == 'matmul' and r['step'] == '2' for r in d['trace_ranks'])" \
  "any(t[4] == 'differs' and t[0].startswith('output') for t in d['trace_io']['0']) and any(t[4] == 'same' and t[0].startswith('input') for t in d['trace_io']['0'])" \
  "all(t[2].startswith('0x') and len(t[2]) == 18 for t in d['trace_io']['1'])"
report trace_same 0 "$T/a" "$T/b" --trace-diff "$T/tr/a" "$T/tr/a_again"
check trace_same "[r['verdict'] for r in d['trace_ranks']] == ['identical'] * 2"
mkdir -p "$T/trunc" && cp "$T/tr/a/"*.trace "$T/trunc/" && truncate -s -3 "$T/trunc/rank_000001.trace"
report trace_bad 2 "$T/a" --trace-diff "$T/tr/a" "$T/trunc"
"$DETRAIN" trace-diff "$T/tr/a" "$T/trunc" >/dev/null 2>"$T/trunc.td.err"
want=$(sed -n 's/^detrain trace-diff: [A-Z]*: //p' "$T/trunc.td.err")
grep -qF -- "$want" "$T/trace_bad.err" || fail "trace_bad: '$(cat "$T/trace_bad.err")' lacks trace-diff's '$want'"
# the shape `detrain bench --json` writes (src/cli/cmd_bench.c), figures of bench/RESULTS.md
cat >"$T/bench_in.json" <<'EOF'
{"model":"gpt2-124m","B":16,"T":1024,"device":"NVIDIA H200","tax_pct":0.0038,"default":{"step_ms":26.024000,"tok_per_s":629579.000,"mfu":0.545000,"peak_tflops":785.000,"mem_gib":38.1000,"ranges":{"matmul_bwd":8.574,"matmul_fwd":4.697,"attention_bwd":3.320,"embed_bwd":0.068}},"deterministic":{"step_ms":26.025000,"tok_per_s":629555.000,"mfu":0.544980,"peak_tflops":785.000,"mem_gib":38.1000,"ranges":{"matmul_bwd":8.685,"matmul_fwd":4.720,"attention_bwd":3.365,"embed_bwd":0.091}}}
EOF
report bench 0 "$T/a" --bench "$T/bench_in.json"
check bench "d['ranges']['matmul_bwd'] == 'tax +1.29%' and d['ranges']['embed_bwd'] == 'tax +33.82%' and d['ranges']['step (end to end)'] == 'tax +0.00%'" \
  "'629579' in d['text'] and '54.5%' in d['text'] and d['svgs'].get('leaderboard') == 1"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); del d['deterministic']; json.dump(d, open(sys.argv[2], 'w'))" \
  "$T/bench_in.json" "$T/bench_bad_in.json"
report bench_bad 2 "$T/a" --bench "$T/bench_bad_in.json"
grep -q 'has no "deterministic" object' "$T/bench_bad.err" || fail "bench_bad: $(cat "$T/bench_bad.err")"

# ---- 100k steps: every step's bits read, the picture downsampled -----------------------------
"$GEN" --write "$T/big" 1 100000 --no-tfevents || exit 1
mkdir -p "$T/big_last"
hex_b=$(python3 - "$T/big/metrics.jsonl" "$T/big_last/metrics.jsonl" <<'EOF'
import sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
assert lines[-1] == b"" and lines[-2].startswith(b'{"step":100000,'), lines[-2][:20]
i = lines[-2].index(b'"grad_norm_hex":"0x') + len(b'"grad_norm_hex":"0x')
old = lines[-2][i:i + 16]
lines[-2] = lines[-2][:i] + b"%016x" % (int(old, 16) ^ 1) + lines[-2][i + 16:]
open(sys.argv[2], "wb").write(b"\n".join(lines))
print("0x%016x" % (int(old, 16) ^ 1))
EOF
) || fail "could not edit"
# CPU seconds (both threads) are the bound, wall seconds only loosely: a shared machine's
# load stretches the wall clock, not the work
TIMEFORMAT='%R %U %S'
{ time report big 1 "$T/big" "$T/big_last"; } 2>"$T/big.time"
read -r wall user sys <"$T/big.time"
cpu=$(python3 -c "print('%.2f' % ($user + $sys))")
echo "100k-step report: ${wall} s wall, ${cpu} s CPU, $(stat -c %s "$T/big.html") bytes"
python3 -c "import sys; sys.exit(not ($cpu < 8 and $wall < 30))" || fail "100k steps took ${wall} s (${cpu} s CPU; want a few)"
[ "$(stat -c %s "$T/big.html")" -lt 3000000 ] || fail "100k steps: the page is not downsampled"
check big "v[0]['verdict'] == 'mismatch' and v[0]['step'] == '100000' and v[0]['metric'] == 'grad_norm' and d['first_mismatch'] == [100000]" \
  "'$hex_b' in v[0]['cells'][3] and '99999 identical before the mismatch' in v[0]['cells'][2]"

[ $fails -eq 0 ] && echo "report CLI: all cases passed"
[ $fails -eq 0 ]
