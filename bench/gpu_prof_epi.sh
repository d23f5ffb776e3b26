#!/usr/bin/env bash
# One device call: our GEMM's epilogues at the fc shape (tests/gpu/bench_gemm_epi.cu), timed
# side by side, then profiled with Nsight Compute (every section, the source-level stall
# samples; clocks left alone) into $OUT: epi.txt (timings), epi_details.txt, epi_src.csv.xz
# (per-SASS-instruction metrics of each launch) and epi.ncu-rep.
# usage (device): CARRY=build/carry bash bench/gpu_prof_epi.sh   (binaries from bench/gpu-carry.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${CARRY:-build/gpu-tests}
out=${OUT:-/tmp/prof_epi}
mkdir -p "$out"
rc=0
for r in 1 2; do "$bin/bench_gemm_epi" | tee -a "$out/epi.txt"; [ "${PIPESTATUS[0]}" = 0 ] || rc=1; done
if command -v ncu >/dev/null; then
  # 4 checking calls, then one call of each of the 6 variants
  BENCH_EPI_ONCE=1 ncu --clock-control none --set full --import-source no -k regex:gemm_tma_kernel \
      --launch-skip 4 --launch-count 6 -f -o "$out/epi" "$bin/bench_gemm_epi" > "$out/ncu_log.txt" 2>&1 || rc=1
  tail -5 "$out/ncu_log.txt"
  ncu -i "$out/epi.ncu-rep" --page details > "$out/epi_details.txt" 2>&1 || rc=1
  ncu -i "$out/epi.ncu-rep" --page source --csv --print-source sass 2>&1 | xz -6 > "$out/epi_src.csv.xz" || rc=1
else
  echo "gpu_prof_epi: no ncu on this machine" >&2; rc=1
fi
echo "done rc=$rc"
exit $rc
