#!/usr/bin/env bash
# The determinism gate (`detrain gate --base-ref REF`) in scratch git repositories:
# rule 1 (changed kernel-bearing files must be registered; no trailer waives it), rule 2
# (a changed registered source needs a changed test, or a Determinism-Exempt trailer on
# every commit touching it, which is logged; a changed benchmark listed as a test does not
# count: only a test CI or the GPU test script runs does), uncommitted and untracked
# changes, and the exit codes (0 pass, 1 fail, 2 bad ref / not a repository).
set -u
DETRAIN=${DETRAIN:-$PWD/build/detrain}
case "$DETRAIN" in /*) ;; *) DETRAIN="$PWD/$DETRAIN" ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0; checks=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# The upstream repository: one registered kernel with its test, one registered kernel that
# has no test yet (exempt), and a plain file.
up="$tmp/upstream"
mkdir -p "$up/src/ops" "$up/src/core" "$up/tests/ops"
cd "$up" || exit 2
git init -q -b main .
git config user.name "gate test"; git config user.email "gate@test.invalid"; git config commit.gpgsign false
cat > src/ops/a_cpu.c <<'C'
/* a: sum with an OpenMP reduction */
float a_sum(const float *x, int n) {
    float s = 0;
#pragma omp parallel for reduction(+:s)
    for (int i = 0; i < n; i++) s += x[i];
    return s;
}
C
printf 'void b(float *y, int n) { for (int i = 0; i < n; i++) y[i] = 0; }\n' > src/ops/b_cpu.c
printf '/* tests src/ops/a_cpu.c */\nint main(void) { return 0; }\n' > tests/ops/test_a.c
printf 'int plain(void) { return 1; }\n' > src/core/plain.c
cat > kernels.registry <<'R'
# scratch registry
name: a
sources: src/ops/a_cpu.c
kind: cpu-omp
notes: OpenMP reduction
tests: tests/ops/test_a.c

name: b
sources: src/ops/b_cpu.c
kind: cpu-serial
notes: elementwise
exempt: test pending
R
git add -A && git commit -q -m "base"

# new_case NAME: a fresh clone of upstream on a work branch; cd into it.
new_case() {
  git clone -q "$up" "$tmp/$1" && cd "$tmp/$1" || exit 2
  git config user.name "gate test"; git config user.email "gate@test.invalid"; git config commit.gpgsign false
  git checkout -q -b work
}
# gate WANT_RC: runs the gate against origin/main; output in $tmp/out, $tmp/err.
gate() {
  checks=$((checks + 1))
  "$DETRAIN" gate --base-ref origin/main >"$tmp/out" 2>"$tmp/err"; rc=$?
  if [ "$rc" != "$1" ]; then
    fail "$CASE: gate exited $rc, want $1"; sed 's/^/    /' "$tmp/out" "$tmp/err"
  fi
}
has() {  # has FILE TEXT: the gate's output mentions TEXT
  checks=$((checks + 1))
  grep -qF -- "$2" "$tmp/$1" || { fail "$CASE: $1 lacks '$2'"; sed 's/^/    /' "$tmp/$1"; }
}
lacks() {
  checks=$((checks + 1))
  ! grep -qF -- "$2" "$tmp/$1" || { fail "$CASE: $1 has '$2'"; sed 's/^/    /' "$tmp/$1"; }
}
commit() {  # commit MESSAGE FILES...
  local msg=$1; shift
  git add -- "$@" && git commit -q -m "$msg" -- "$@"
}

CASE=no-change; new_case c0
gate 0
has out "0 changed files"

CASE=plain-change; new_case c1
echo '/* still plain; atomicAdd( in a comment */' >> src/core/plain.c
commit "plain" src/core/plain.c
gate 0

CASE=unregistered-kernel-committed; new_case c2
printf 'void c(void) { }\n' > src/ops/c_cpu.c
commit "add c" src/ops/c_cpu.c
gate 1
has err "src/ops/c_cpu.c: kernel-bearing (in kernel directory src/ops/) but not in kernels.registry"

CASE=unregistered-kernel-untracked; new_case c3
printf 'void c(void) { }\n' > src/ops/c_cpu.c
gate 1
has err "src/ops/c_cpu.c: kernel-bearing"

CASE=unregistered-by-content; new_case c4
printf 'double s(const double *x, int n) {\n  double t = 0;\n#pragma omp parallel for reduction(+:t)\n  for (int i = 0; i < n; i++) t += x[i];\n  return t;\n}\n' > src/core/sum.c
commit "add sum" src/core/sum.c
gate 1
has err "src/core/sum.c: kernel-bearing (\`#pragma omp ... reduction(\` at line 3)"

CASE=unregistered-kernel-trailer-does-not-waive; new_case c5
printf 'void c(void) { }\n' > src/ops/c_cpu.c
git add src/ops/c_cpu.c && git commit -q -m "add c" -m "Determinism-Exempt: trying to waive rule 1" -- src/ops/c_cpu.c
gate 1
has err "cannot be waived"

CASE=kernel-without-test-change; new_case c6
sed -i 's/float s = 0;/float s = 0.0f;/' src/ops/a_cpu.c
commit "tweak a" src/ops/a_cpu.c
gate 1
has err "src/ops/a_cpu.c: changed without a change to any of its tests (tests/ops/test_a.c)"
has err "1 of 1 commits"

CASE=kernel-with-test-change; new_case c7
sed -i 's/float s = 0;/float s = 0.0f;/' src/ops/a_cpu.c
commit "tweak a" src/ops/a_cpu.c
echo '/* checks the 0.0f init too */' >> tests/ops/test_a.c
commit "test a" tests/ops/test_a.c
gate 0
has out "ok: src/ops/a_cpu.c changed with its test tests/ops/test_a.c"

CASE=exempt-on-every-commit; new_case c8
echo '/* comment one */' >> src/ops/a_cpu.c
git commit -q -am "comment a" -m "Determinism-Exempt: comment only"
h1=$(git rev-parse --short=12 HEAD)
echo '/* comment two */' >> src/ops/a_cpu.c
git commit -q -am "comment a again" -m "Some body text." -m "Determinism-Exempt: whitespace and comments"
h2=$(git rev-parse --short=12 HEAD)
gate 0
has out "exempt: src/ops/a_cpu.c: commits"
has out "$h1 (comment only)"
has out "$h2 (whitespace and comments)"

CASE=exempt-on-some-commits; new_case c9
echo '/* comment one */' >> src/ops/a_cpu.c
git commit -q -am "comment a" -m "Determinism-Exempt: comment only"
sed -i 's/float s = 0;/float s = 0.0f;/' src/ops/a_cpu.c
git commit -q -am "tweak a"
h2=$(git rev-parse --short=12 HEAD)
gate 1
has err "1 of 2 commits"
has err "$h2"

CASE=trailer-not-in-last-paragraph; new_case c10
echo '/* comment */' >> src/ops/a_cpu.c
git commit -q -am "comment a" -m "Determinism-Exempt: not a trailer here" -m "A later paragraph."
gate 1
has err "lack a 'Determinism-Exempt: <reason>' trailer"

CASE=uncommitted-kernel-change; new_case c11
echo '/* uncommitted */' >> src/ops/a_cpu.c
gate 1
has err "src/ops/a_cpu.c: has uncommitted changes"

CASE=uncommitted-kernel-and-test-change; new_case c12
echo '/* uncommitted */' >> src/ops/a_cpu.c
echo '/* uncommitted */' >> tests/ops/test_a.c
gate 0
has out "ok: src/ops/a_cpu.c changed with its test"

CASE=benchmark-change-does-not-count; new_case c18
# a registry from before the run rule lists a benchmark beside the test: changing the
# benchmark alone is not a test change (check-registry refuses such an entry outright)
mkdir -p tests/gpu
printf '/* times src/ops/a_cpu.c */\n' > tests/gpu/bench_a.cu
sed -i 's|^tests: tests/ops/test_a.c$|tests: tests/ops/test_a.c tests/gpu/bench_a.cu|' kernels.registry
commit "list a benchmark" tests/gpu/bench_a.cu kernels.registry
sed -i 's/float s = 0;/float s = 0.0f;/' src/ops/a_cpu.c
echo '/* times the 0.0f init too */' >> tests/gpu/bench_a.cu
commit "tweak a, bench it" src/ops/a_cpu.c tests/gpu/bench_a.cu
gate 1
has err "src/ops/a_cpu.c: changed without a change to any of its tests"
lacks out "ok: src/ops/a_cpu.c changed with its test tests/gpu/bench_a.cu"
checks=$((checks + 1))
"$DETRAIN" gate --check-registry >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 1 ] || fail "$CASE: check-registry with a benchmark as a test: exit $rc, want 1"
has err "test 'tests/gpu/bench_a.cu' is run neither by CI"

CASE=exempt-entry-changed; new_case c13
echo '/* touched */' >> src/ops/b_cpu.c
commit "touch b" src/ops/b_cpu.c
gate 0
has out "note: src/ops/b_cpu.c changed; entry 'b' has no tests yet (exempt: test pending)"

CASE=registered-in-same-change; new_case c14
printf 'void c(void) { }\n' > src/ops/c_cpu.c
printf '/* tests c_cpu.c */\n' > tests/ops/test_c.c
printf '\nname: c\nsources: src/ops/c_cpu.c\nkind: cpu-serial\nnotes: n\ntests: tests/ops/test_c.c\n' >> kernels.registry
commit "add c with test" src/ops/c_cpu.c tests/ops/test_c.c kernels.registry
gate 0
lacks err "problem"

CASE=malformed-registry; new_case c15
printf '\nname: broken\ncolour: blue\n' >> kernels.registry
commit "break registry" kernels.registry
gate 1
has err "unknown key 'colour'"

CASE=bad-ref; new_case c16
checks=$((checks + 1))
"$DETRAIN" gate --base-ref no-such-ref >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "$CASE: exit $rc, want 2"
has err "base ref 'no-such-ref' does not name a commit"
checks=$((checks + 1))
"$DETRAIN" gate --base-ref --oops >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "$CASE: option-like ref: exit $rc, want 2"

CASE=not-a-repo
mkdir -p "$tmp/plain"; cd "$tmp/plain" || exit 2
checks=$((checks + 1))
GIT_CEILING_DIRECTORIES="$tmp" "$DETRAIN" gate --base-ref main >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "$CASE: exit $rc, want 2"
has err "is not inside a git repository"

CASE=check-registry-cli; new_case c17
checks=$((checks + 1))
"$DETRAIN" gate --check-registry >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 0 ] || { fail "$CASE: clean tree: exit $rc, want 0"; cat "$tmp/err"; }
printf 'void c(void) { }\n' > src/ops/c_cpu.c
rm tests/ops/test_a.c
checks=$((checks + 1))
"$DETRAIN" gate --check-registry >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 1 ] || fail "$CASE: unregistered file and missing test: exit $rc, want 1"
has err "src/ops/c_cpu.c: kernel-bearing (in kernel directory src/ops/) but not registered"
has err "test 'tests/ops/test_a.c' does not exist"
has err "2 problems"
"$DETRAIN" gate --list >"$tmp/out" 2>"$tmp/err"
has out "src/ops/c_cpu.c"
has out "UNREGISTERED"

CASE=usage
checks=$((checks + 1))
"$DETRAIN" gate >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "$CASE: no arguments: exit $rc, want 2"
checks=$((checks + 1))
"$DETRAIN" gate --base-ref >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 2 ] || fail "$CASE: --base-ref without value: exit $rc, want 2"

echo "$checks checks, $fails failed"
[ "$fails" = 0 ] && [ "$checks" -gt 0 ]
