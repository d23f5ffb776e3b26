#!/usr/bin/env bash
# `detrain report` rendered by a real browser (headless Chromium, installed by
# scripts/install-deps.sh) for three pairs of real training runs:
#   identical  two independent deterministic runs: "bitwise identical", |a-b| = 0 throughout;
#   injected   a traced run and its twin with --inject-nondeterminism attention_bwd@4: the
#              first mismatch at step 4 with compare's metric and hex, marked in the picture,
#              and the trace section naming attention_bwd as the candidate origin;
#   resumed    an uninterrupted run, the same run saved at step 10 and resumed into its own
#              log directory, and one resumed into a new directory: identical, and the first
#              step after the checkpoint (11) marked on both.
# Each verdict and its exit code must be compare's on the same runs. The rendered DOM
# (--dump-dom) is read with tests/report/report_dom.py; each screenshot must not be blank
# (tests/report/png_check.py decodes it) and is kept in build/report-screenshots/.
set -u
: "${DETRAIN:?run through tests/run.sh or set DETRAIN}"
here="$(cd "$(dirname "$0")" && pwd)"
shots="$(cd "$(dirname "$DETRAIN")" && pwd)/report-screenshots"
command -v chromium >/dev/null || {
  echo "FAIL: chromium is missing: scripts/install-deps.sh installs Debian's chromium (as root; otherwise apt-get install -y chromium)"
  exit 1; }
T=$(mktemp -d /tmp/dt_test_report_browser_XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$shots"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
train() { "$DETRAIN" train "${C[@]}" "$@" >/dev/null || { echo "FAIL: train $*"; exit 1; }; }
C=(--model tiny --num-layers 2 --hidden-size 64 --seq-length 16 --micro-batch-size 2 --eval-interval 10
   --eval-iters 1 --deterministic-mode --threads 1 --quiet)

# (a) two independent runs
train --train-iters 30 --log-dir "$T/a1"
train --train-iters 30 --log-dir "$T/a2"
# (b) a traced run and its injected twin
train --train-iters 8 --trace-level op --trace-steps 4 --trace-dir "$T/tr_clean" --log-dir "$T/clean"
train --train-iters 8 --trace-level op --trace-steps 4 --trace-dir "$T/tr_inj" --log-dir "$T/inj" \
  --debug-allow-injection --inject-nondeterminism attention_bwd@4
# (c) uninterrupted; saved at 10 and resumed into the same log dir; resumed into a new one
C+=(--hidden-dropout 0.1 --lr-decay-iters 20)
train --train-iters 20 --log-dir "$T/full"
train --train-iters 10 --save "$T/ck" --log-dir "$T/res_same"
train --train-iters 20 --load "$T/ck" --log-dir "$T/res_same"
train --train-iters 20 --load "$T/ck/iter_0000010" --log-dir "$T/res_new"

rc_of() { "$DETRAIN" compare "$@" >"$T/cmp.out" 2>/dev/null; echo $?; }
report() {
  local name=$1 want=$2; shift 2
  "$DETRAIN" report "$@" --out "$T/$name.html" >/dev/null 2>"$T/$name.err"
  local rc=$?
  [ $rc -eq "$want" ] || fail "$name: report exit $rc, want $want: $(cat "$T/$name.err")"
}
report identical "$(rc_of "$T/a1" "$T/a2")" "$T/a1" "$T/a2"
[ "$(rc_of "$T/clean" "$T/inj")" = 1 ] || fail "compare must see the injected fault"
cmp_metric=$(sed -n 's/^DIFFERENT at step \([0-9]*\), metric \(.*\):$/\1 \2/p' "$T/cmp.out")
cmp_a=$(sed -n 's/^  A: //p' "$T/cmp.out"); cmp_b=$(sed -n 's/^  B: //p' "$T/cmp.out")
report injected 1 "$T/clean" "$T/inj" --trace-diff "$T/tr_clean" "$T/tr_inj"
[ "$(rc_of "$T/full" "$T/res_same")" = 0 ] && [ "$(rc_of "$T/full" "$T/res_new")" = 0 ] || fail "compare: resumed runs differ"
report resumed 0 "$T/full" "$T/res_same" "$T/res_new"

# Render all three at once (2 cores); one call writes the DOM and the screenshot.
render() {
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
    --user-data-dir="$T/chrome_$1" --window-size=1200,"$2" --screenshot="$shots/$1.png" \
    --dump-dom "file://$T/$1.html" >"$T/$1.dom" 2>"$T/$1.chromium.err"
}
rm -f "$shots"/{identical,injected,resumed}.png
render identical 2300 & p1=$!
render injected 3300 & p2=$!
render resumed 2500 & p3=$!
for p in $p1 $p2 $p3; do wait $p || fail "chromium exited $? (see $T/*.chromium.err)"; done
for c in identical injected resumed; do
  grep -q 'id="verdict-table"' "$T/$c.dom" 2>/dev/null || { fail "$c: chromium rendered no page: $(tail -3 "$T/$c.chromium.err")"; continue; }
  python3 "$here/png_check.py" "$shots/$c.png" 50 2 || fail "$c: screenshot"
done

# check NAME EXPR...: asserts about the DOM Chromium rendered ($T/NAME.dom), read by
# report_dom.py (d: the page, v: its verdicts), all in one python process
check() {
  local name=$1; shift
  python3 "$here/report_dom.py" "$T/$name.dom" "$@" || fail "$name: see above"
}
check identical "len(v) == 1 and v[0]['verdict'] == 'identical' and v[0]['exit'] == '0' and v[0]['cells'][1] == 'bitwise identical'" \
  "d['first_mismatch'] == [] and 'the same bits' in d['captions'][0] and d['svgs']['trajectory'] >= 6 and d['svgs']['diff'] == 1"
step=${cmp_metric%% *}; metric=${cmp_metric#* }
[ "$step" = 4 ] || fail "the injected fault must show at step 4, compare says '$cmp_metric'"
check injected "v[0]['verdict'] == 'mismatch' and v[0]['exit'] == '1' and v[0]['step'] == '$step' and v[0]['metric'] == '$metric'" \
  "v[0]['cells'][1] == 'first mismatch at step $step ($metric)' and '$cmp_a' in v[0]['cells'][3] and '$cmp_b' in v[0]['cells'][3]" \
  "d['first_mismatch'] == [$step] and any('first mismatch at step $step' in c and '$cmp_b' in c for c in d['captions'])" \
  "[(r['verdict'], r.get('op'), r.get('step')) for r in d['trace_ranks']] == [('origin_candidate', 'attention_bwd', '4')]" \
  "any(t[0].startswith('output') and t[4] == 'differs' for t in d['trace_io']['0']) and all(t[4] == 'same' for t in d['trace_io']['0'] if t[0].startswith('input'))"
check resumed "[x['verdict'] for x in v] == ['identical', 'identical-shared'] and [x['exit'] for x in v] == ['0', '0']" \
  "d['runs'] == {'A': '', 'B': '11', 'C': '11'} and ['B', 11] in d['resume_marks'] and ['C', 11] in d['resume_marks']"
echo "screenshots: $shots/identical.png $shots/injected.png $shots/resumed.png"
[ $fails -eq 0 ] && echo "report in the browser: all cases passed"
[ $fails -eq 0 ]
