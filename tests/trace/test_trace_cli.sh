#!/usr/bin/env bash
# `detrain trace-diff` end to end on synthetic captures (written by test_trace_diff
# --fixtures): exit codes 0 / 1 / 2, the report names the injected op, --json parses and
# carries the verdicts, --rank, truncated files and usage errors fail with exit 2.
set -u
: "${DETRAIN:?DETRAIN must point at the detrain binary}"
fixtures_bin="$(dirname "$DETRAIN")/tests/trace/test_trace_diff"
tmp=$(mktemp -d /tmp/dt_trace_cli_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }

"$fixtures_bin" --fixtures "$tmp" || { echo "FAIL writing fixtures"; exit 1; }

"$DETRAIN" trace-diff "$tmp/a" "$tmp/a_again" >"$tmp/out" 2>&1; rc=$?
check "identical captures exit 0" '[ $rc -eq 0 ] && grep -q "result: no mismatch" "$tmp/out"'

"$DETRAIN" trace-diff "$tmp/a" "$tmp/inject_matmul" >"$tmp/out" 2>&1; rc=$?
check "injected change exits 1" '[ $rc -eq 1 ]'
check "report names the origin" 'grep -q "ORIGIN CANDIDATE" "$tmp/out" && grep -q "op matmul" "$tmp/out"'

"$DETRAIN" trace-diff "$tmp/a" "$tmp/inject_matmul" --json >"$tmp/json" 2>&1; rc=$?
check "--json exits 1" '[ $rc -eq 1 ]'
check "--json parses" 'python3 -m json.tool "$tmp/json" >/dev/null'
check "--json verdicts" 'python3 - "$tmp/json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mismatch"] is True and d["summary"]["verdict"] == "same_origin_all_ranks", d["summary"]
assert [r["rank"] for r in d["ranks"]] == [0, 1]
for r in d["ranks"]:
    f = r["first_mismatch"]
    assert r["verdict"] == "origin_candidate" and f["class"] == "origin_candidate", r
    assert f["event"]["op"] == "matmul" and f["event"]["scope"] == "h.0.mlp" and f["event"]["step"] == 2
    assert f["tensors"][0]["role"] == "output" and f["tensors"][0]["name"] == "y"
    assert r["later_inputs_match"] == 0 and r["later_downstream"] >= 7 and r["later_enclosing"] == 1
PY'

"$DETRAIN" trace-diff "$tmp/a" "$tmp/permuted" --json --rank 1 >"$tmp/json" 2>&1; rc=$?
check "per-row digests name the rows (json)" '[ $rc -eq 1 ] && python3 - "$tmp/json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["ranks"]) == 1 and d["ranks"][0]["rank"] == 1
t = d["ranks"][0]["first_mismatch"]["tensors"][0]
assert t["rows_differ_count"] == 2 and t["rows_differ_first"] == [2, 5], t
PY'

"$DETRAIN" trace-diff "$tmp/late_a" "$tmp/late_inject" >"$tmp/out" 2>&1; rc=$?
check "window after origin: origin outside the capture" '[ $rc -eq 1 ] && grep -q "ORIGIN OUTSIDE THE CAPTURE" "$tmp/out"'

"$DETRAIN" trace-diff "$tmp/a" "$tmp/reordered" --json >"$tmp/json" 2>&1; rc=$?
check "order differences (json)" '[ $rc -eq 1 ] && python3 - "$tmp/json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
assert all(r["order_differences"] == 1 and r["mismatches"] == 0 for r in d["ranks"])
PY'

"$DETRAIN" trace-diff "$tmp/a" "$tmp/missing" --json >"$tmp/json" 2>&1; rc=$?
check "missing events (json)" '[ $rc -eq 1 ] && python3 - "$tmp/json" <<PY
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["ranks"]:
    assert r["missing_in_b"] == 1 and r["only_in_a"][0]["op"] == "layernorm"
    assert r["missing_in_a"] == 1 and r["only_in_b"][0]["op"] == "extra_probe"
PY'

"$DETRAIN" trace-diff "$tmp/a/rank_000001.trace" "$tmp/inject_matmul/rank_000001.trace" >"$tmp/out" 2>&1; rc=$?
check "single files" '[ $rc -eq 1 ] && grep -q "^rank 1: ORIGIN CANDIDATE" "$tmp/out"'

mkdir -p "$tmp/trunc"
cp "$tmp/a/"*.trace "$tmp/trunc/"
truncate -s -3 "$tmp/trunc/rank_000001.trace"
"$DETRAIN" trace-diff "$tmp/a" "$tmp/trunc" >"$tmp/out" 2>&1; rc=$?
check "truncated file exits 2 naming file and offset" '[ $rc -eq 2 ] && grep -q "trunc/rank_000001.trace" "$tmp/out" && grep -q "offset" "$tmp/out"'

# the END record torn by the cut above: --allow-unclosed reads the complete records
"$DETRAIN" trace-diff "$tmp/a" "$tmp/trunc" --allow-unclosed >"$tmp/out" 2>&1; rc=$?
check "torn last record with --allow-unclosed reads the complete records" '[ $rc -eq 0 ] && grep -q "no mismatch" "$tmp/out"'
"$DETRAIN" trace-diff "$tmp/a" "$tmp/trunc" >"$tmp/out" 2>&1; rc=$?
check "torn last record without it names --allow-unclosed" '[ $rc -eq 2 ] && grep -q -- "--allow-unclosed reads the complete records" "$tmp/out"'
# torn inside the last event record (the END record cut away too), with an injected
# difference earlier in the file: the verdict still comes from the complete records
cp "$tmp/inject_matmul/"*.trace "$tmp/trunc/"
sz=$(stat -c %s "$tmp/trunc/rank_000001.trace")
truncate -s $((sz - 40)) "$tmp/trunc/rank_000001.trace"
"$DETRAIN" trace-diff "$tmp/a" "$tmp/trunc" --allow-unclosed --rank 1 >"$tmp/out" 2>&1; rc=$?
check "torn event record with --allow-unclosed still finds the origin" '[ $rc -eq 1 ] && grep -q "^rank 1: ORIGIN CANDIDATE" "$tmp/out"'

"$DETRAIN" trace-diff "$tmp/a" >/dev/null 2>&1; rc=$?
check "one argument is a usage error" '[ $rc -eq 2 ]'
"$DETRAIN" trace-diff "$tmp/a" "$tmp/a" --bogus >/dev/null 2>&1; rc=$?
check "unknown option is a usage error" '[ $rc -eq 2 ]'
"$DETRAIN" trace-diff "$tmp/a" "$tmp/a" --rank x >/dev/null 2>&1; rc=$?
check "bad --rank is a usage error" '[ $rc -eq 2 ]'
"$DETRAIN" trace-diff "$tmp/a" "$tmp/a" --rank 9 >/dev/null 2>&1; rc=$?
check "absent --rank is an error" '[ $rc -eq 2 ]'

exit $fail
