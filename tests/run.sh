#!/usr/bin/env bash
# Runs every test: the C test binaries under build/tests/ (one per tests/.../test_*.c) and
# the shell tests tests/.../test_*.sh, at any depth. Each runs alone with its log in build/test-logs/. Ends with the
# summary line "N passed, N failed"; exits non-zero when any test failed.
set -u
cd "$(dirname "$0")/.."
export DETRAIN="$PWD/build/detrain"
logs=build/test-logs
mkdir -p "$logs"
pass=0; fail=0; failed=()
filter="${TESTS:-}"
tests=$(find build/tests -type f -perm -u+x | sort; find tests -type f -name 'test_*.sh' | sort)
for t in $tests; do
  name=${t#build/tests/}; name=${name#tests/}
  if [ -n "$filter" ] && ! echo "$name" | grep -qE "$filter"; then continue; fi
  log="$logs/$(echo "$name" | tr '/' '_').log"
  start=$(date +%s)
  if [ "${t##*.}" = sh ]; then timeout 900 bash "$t" >"$log" 2>&1; rc=$?
  else timeout 900 "$t" >"$log" 2>&1; rc=$?; fi
  secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $name (${secs}s)"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (rc=$rc, ${secs}s)"; tail -n 25 "$log" | sed 's/^/    /'; fi
done
[ ${#failed[@]} -gt 0 ] && echo "failed: ${failed[*]}"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
