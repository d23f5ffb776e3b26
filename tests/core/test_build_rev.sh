#!/usr/bin/env bash
# The build reports the project's own revision, never that of a repository the source
# tree happens to sit in (Makefile: GIT_REV). The sources are copied into a directory
# inside ANOTHER git repository and built there: --version and env.json must say
# unknown-src-<12 hex>, the digest the test computes itself over the same files, and a
# changed source must change it. In the project's own repository the revision is git's.
# The copy reuses this build's objects (copied with their times, so make rebuilds only
# the fingerprint, which carries the revision, and relinks).
set -euo pipefail
: "${DETRAIN:?}"
root=$(cd "$(dirname "$0")/../.." && pwd)
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
digest() { (cd "$1" && find Makefile include src tools -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum \
  | sha256sum | cut -c1-12); }

# another repository, with a commit of its own
outer="$d/outer"; mkdir -p "$outer/vendor"
git -C "$outer" init -q
echo hello >"$outer/README"
git -C "$outer" add README
git -C "$outer" -c user.name=t -c user.email=t@example.invalid commit -qm outer
outer_rev=$(git -C "$outer" rev-parse --short=7 HEAD)
src="$outer/vendor/detrain"; mkdir "$src"
(cd "$root" && cp -rp Makefile include src tools scripts "$src/")
mkdir -p "$src/build" && (cd "$root/build" && cp -rp obj .deps-ok .lib-sources "$src/build/")
[ "$(git -C "$src" rev-parse --show-toplevel)" = "$(cd "$outer" && pwd -P)" ] || fail "setup: the copy is not inside the outer repository"

make -s -C "$src" build/detrain >"$d/make.log" 2>&1 || { cat "$d/make.log"; fail "build in the copy failed"; }
want="unknown-src-$(digest "$src")"
got=$("$src/build/detrain" --version)
[ "$got" = "detrain $want" ] || fail "--version in a copy inside another repository: '$got', expected 'detrain $want' (outer repository is at $outer_rev)"
"$src/build/detrain" train --model tiny --num-layers 1 --train-iters 1 --eval-interval 0 --quiet --log-dir "$d/l"
grep -q "\"detrain_git_rev\": *\"$want\"" "$d/l/env.json" || fail "env.json does not record $want: $(grep git_rev "$d/l/env.json")"

# a changed source changes the digest (tools/ is not part of build/detrain: no recompile)
echo "/* changed */" >>"$src/tools/$(ls "$root/tools" | grep '\.c$' | head -1)"
make -s -C "$src" build/detrain >"$d/make.log" 2>&1 || { cat "$d/make.log"; fail "rebuild in the copy failed"; }
got2=$("$src/build/detrain" --version)
[ "$got2" = "detrain unknown-src-$(digest "$src")" ] && [ "$got2" != "$got" ] || fail "a changed source: '$got2' (before: '$got')"

# the project's own repository: git's revision
if [ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
  desc=$(git -C "$root" describe --always --abbrev=12)
  case "$("$DETRAIN" --version)" in "detrain $desc"|"detrain $desc-dirty") ;;
    *) fail "own repository: '$("$DETRAIN" --version)', expected git's 'detrain $desc[-dirty]'";; esac
fi
echo "build rev: ok ($got; own tree $("$DETRAIN" --version))"
