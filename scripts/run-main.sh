#!/usr/bin/env bash
# The main job (`make run`): train the default model on the built-in corpus in
# deterministic mode, train it again, and let `detrain compare` show the two metric series
# are bitwise identical.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/detrain
rm -rf runs/main-a runs/main-b
mkdir -p runs
echo "== run A: detrain train --deterministic-mode --log-dir runs/main-a"
$bin train --deterministic-mode --log-dir runs/main-a "$@"
echo "== run B: the same command again"
$bin train --deterministic-mode --log-dir runs/main-b "$@"
echo "== detrain compare runs/main-a runs/main-b"
$bin compare runs/main-a runs/main-b
