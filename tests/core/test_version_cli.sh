#!/usr/bin/env bash
# `detrain --version` names the git revision the binary was built from, the same string
# its env.json records (detrain_git_rev), so a result can be traced to its build.
set -euo pipefail
: "${DETRAIN:?}"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
out=$("$DETRAIN" --version)
[[ "$out" =~ ^detrain\ ([0-9a-f]{7,}(-dirty)?|unknown-src-[0-9a-f]{12})$ ]] || { echo "unexpected --version output: '$out'"; exit 1; }
rev=${out#detrain }
"$DETRAIN" train --model tiny --num-layers 1 --train-iters 1 --eval-interval 0 --quiet --log-dir "$d/l"
grep -q "\"detrain_git_rev\": *\"$rev\"" "$d/l/env.json" || { echo "env.json does not record $rev:"; grep git_rev "$d/l/env.json"; exit 1; }
"$DETRAIN" --help | grep -q -- "--version" || { echo "--help does not list --version"; exit 1; }
echo "ok: $out"
