#!/usr/bin/env bash
# Tracing overhead on the CPU: the normal build with tracing off, a build whose hook sites
# are compiled away (-DDT_BENCH_NO_TRACE), and the normal build at --trace-level module
# and op. Runs alternate between the variants, several rounds; each reports the median
# step time after warm-up. Usage: bench/trace_overhead.sh [threads] [rounds] [iters]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-2}; rounds=${2:-3}; iters=${3:-20}
make -s build/detrain >/dev/null
make -s BUILD=build-notrace EXTRA_CFLAGS=-DDT_BENCH_NO_TRACE build-notrace/detrain >/dev/null
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
args=(--model small --micro-batch-size 8 --deterministic-mode --threads "$threads"
      --train-iters "$iters" --eval-interval 0 --quiet)
declare -A ms
for r in $(seq "$rounds"); do
  for v in notrace off module op; do
    case $v in
      notrace) bin=build-notrace/detrain; extra=() ;;
      off)     bin=build/detrain; extra=() ;;
      *)       bin=build/detrain; extra=(--trace-level $v --trace-dir "$d/tr-$v-$r") ;;
    esac
    "$bin" train "${args[@]}" "${extra[@]}" --log-dir "$d/$v-$r"
    m=$(python3 -c 'import json,sys,statistics; v=[json.loads(l)["step_ms"] for l in open(sys.argv[1])][3:]; print("%.3f" % statistics.median(v))' "$d/$v-$r/metrics.jsonl")
    ms[$v]="${ms[$v]:-} $m"
  done
done
python3 - "${ms[notrace]}" "${ms[off]}" "${ms[module]}" "${ms[op]}" <<'PY'
import sys, statistics
names = ["compiled out", "off", "module", "op"]
vals = [statistics.median(map(float, a.split())) for a in sys.argv[1:]]
base = vals[0]
print("%-14s %10s %9s" % ("tracing", "step ms", "vs base"))
for n, v in zip(names, vals):
    print("%-14s %10.2f %+8.2f%%" % (n, v, (v / base - 1) * 100))
PY
