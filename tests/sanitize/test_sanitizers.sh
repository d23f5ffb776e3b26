#!/usr/bin/env bash
# Every C test binary again, built with AddressSanitizer and UndefinedBehaviorSanitizer
# (leak checks on), plus one deterministic training run and a compare through the
# sanitized binary. Catches out-of-bounds accesses, use-after-free, leaks, signed overflow
# and bad shifts that the plain build runs through silently. Build: build/sanitize.
set -u
cd "$(dirname "$0")/../.."
. tests/sanitize/sanitized_build.sh
if ! sanitized_make $B/detrain $(find tests -type f -name 'test_*.c' | sort | sed "s#^tests/#$B/tests/#; s#\.c\$##") >/dev/null; then
  echo "FAIL: sanitized build"; exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
fails=0; n=0
for t in $(find $B/tests -type f -perm -u+x | sort); do
  n=$((n+1))
  if ! "$t" > $B/last.log 2>&1; then echo "FAIL (sanitized): $t"; tail -20 $B/last.log; fails=$((fails+1)); fi
done
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
for r in a b; do
  $B/detrain train --deterministic-mode --train-iters 6 --seq-length 32 --micro-batch-size 2 \
    --global-batch-size 4 --hidden-dropout 0.1 --eval-interval 3 --quiet --log-dir "$d/$r" \
    --save "$d/ck$r" --save-interval 3 || { echo "FAIL (sanitized): train $r"; fails=$((fails+1)); }
done
$B/detrain compare "$d/a" "$d/b" || { echo "FAIL (sanitized): compare"; fails=$((fails+1)); }
$B/detrain compare "$d/cka" "$d/ckb" >/dev/null || { echo "FAIL (sanitized): checkpoint compare"; fails=$((fails+1)); }
echo "sanitized: $n test binaries and a train/compare run, $fails failure(s)"
exit $fails
