#!/usr/bin/env bash
# The MPI engine (src/dist/comm_mpi.c, loaded as build/libdetrain-mpi.so through the factory
# src/dist/comm_factory.c) between real OpenMPI processes, N = 2 and 3:
#   - every collective against values computed from known per-rank inputs (the driver
#     tests/dist/mpi/comm_driver.c: rank-ordered sums by memcmp, the library's within a
#     stated tolerance), in default and deterministic mode;
#   - allocation independence: permutations of --rank-order give byte-identical results
#     per logical rank (cmp);
#   - a rank that stalls, or exits, makes the others fail with the engine's timeout error
#     within the timeout; under plain mpirun an exit ends the job (no hang either way);
#   - bad rank orders and contradictory launches refused with named errors, through the
#     driver and through `detrain train`.
set -u
cd "$(dirname "$0")/../.."
plugin=$PWD/build/libdetrain-mpi.so
driver=build/mpi-tests/comm_driver
detrain=${DETRAIN:-$PWD/build/detrain}
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
for f in "$plugin" "$driver" "$detrain"; do
  [ -e "$f" ] || { echo "FAIL: $f is missing: build it with \`make mpi\` (OpenMPI from scripts/install-deps.sh)"; exit 1; }
done
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found: bash scripts/install-deps.sh installs OpenMPI"; exit 1; }
mpi() { timeout 60 mpirun --allow-run-as-root --oversubscribe --quiet "$@"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dt_mpi_XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# 1. the collectives, N = 2 and 3, default and deterministic mode
for np in 2 3; do
  for mode in default det; do
    out="$tmp/check_${np}_$mode"; mkdir -p "$out"
    if mpi -np $np "$driver" "$plugin" check "$out" - $([ $mode = det ] && echo det) > "$out.log" 2>&1 &&
       [ "$(grep -c ' checks, 0 failed' "$out.log")" = $np ]; then pass "collectives np=$np $mode"
    else fail "collectives np=$np $mode"; tail -20 "$out.log"; fi
  done
done

# 2. allocation independence: the same logical rank gets the same bytes whatever process it is
for spec in "2 1,0" "3 2,0,1" "3 1,2,0" "3 2,1,0"; do
  set -- $spec; np=$1; order=$2
  out="$tmp/order_${np}_${order//,/}"; mkdir -p "$out"
  ok=1
  mpi -np $np "$driver" "$plugin" check "$out" "$order" det > "$out.log" 2>&1 || ok=0
  for ((r = 0; r < np; r++)); do
    cmp -s "$out/ro_$r.bin" "$tmp/check_${np}_det/ro_$r.bin" || ok=0
  done
  # the permutation placed logical ranks on other processes (so the cmp compares something)
  grep -q "logical rank ${order%%,*} of $np (process 0)" "$out.log" || ok=0
  [ $ok = 1 ] && pass "rank order $order: identical bytes per logical rank" || { fail "rank order $order"; tail -20 "$out.log"; }
done
# and the identity's files differ between logical ranks where they must (reduce_scatter chunks)
cmp -s "$tmp/check_3_det/ro_0.bin" "$tmp/check_3_det/ro_1.bin" && fail "logical ranks' results identical: the cmp above checks nothing" || pass "per-rank results differ between ranks"

# 3. a rank that stalls or exits: the others fail with the timeout error within it
start=$(date +%s)
mpi -np 3 "$driver" "$plugin" stall 1 8 2 > "$tmp/stall.log" 2>&1
secs=$(( $(date +%s) - start ))
if [ "$(grep -c '^timeout-ok .*the MPI engine: allreduce (MPI_Ialltoallv\|^timeout-ok .*the MPI engine: allreduce (MPI_Iallreduce' "$tmp/stall.log")" = 2 ] &&
   grep -q "did not complete within --dist-timeout-sec 2 s" "$tmp/stall.log" && [ $secs -lt 8 ]; then pass "stalled rank: the others time out in ${secs}s"
else fail "stalled rank (${secs}s)"; cat "$tmp/stall.log"; fi
mpi --enable-recovery -np 3 "$driver" "$plugin" exit 2 2 > "$tmp/exit.log" 2>&1
[ "$(grep -c '^timeout-ok ' "$tmp/exit.log")" = 2 ] && pass "exited rank (mpirun --enable-recovery): the others time out" ||
  { fail "exited rank with recovery"; cat "$tmp/exit.log"; }
start=$(date +%s)
mpi -np 3 "$driver" "$plugin" exit 2 30 > "$tmp/exit2.log" 2>&1; rc=$?
secs=$(( $(date +%s) - start ))
[ $rc != 0 ] && [ $rc != 124 ] && [ $secs -lt 20 ] && pass "exited rank (plain mpirun): the job ends (rc $rc, ${secs}s)" ||
  { fail "exited rank, plain mpirun (rc $rc, ${secs}s)"; cat "$tmp/exit2.log"; }

# 4. refusals: bad rank orders, a launch that disagrees with MPI, contradictory engines
expect() { # name, log, words...
  local name=$1 log=$2; shift 2
  for w in "$@"; do grep -qF -- "$w" "$log" || { fail "$name: '$w' not in:"; cat "$log"; return; }; done
  pass "$name"
}
mpi -np 3 "$driver" "$plugin" order 0,0,1 > "$tmp/o1.log" 2>&1
expect "rank order with a repeat" "$tmp/o1.log" "--rank-order 0,0,1: logical rank 0 appears twice"
mpi -np 3 "$driver" "$plugin" order 1,0 > "$tmp/o2.log" 2>&1
expect "rank order of the wrong size" "$tmp/o2.log" "--rank-order 1,0 lists 2 ranks; the job has 3"
mpi -np 2 -x DETRAIN_RANK=0 -x DETRAIN_WORLD_SIZE=2 -x DETRAIN_LOCAL_RANK=0 "$driver" "$plugin" order 0,1 > "$tmp/o3.log" 2>&1
expect "detrain's variables against mpirun's" "$tmp/o3.log" "DETRAIN_RANK=0 disagrees with OMPI_COMM_WORLD_RANK=1"
mpi -np 2 "$driver" "$plugin" order 1,0 > "$tmp/o4.log" 2>&1
[ "$(grep -c '^created: logical rank' "$tmp/o4.log")" = 2 ] && pass "rank order 1,0 accepted" || { fail "rank order 1,0"; cat "$tmp/o4.log"; }
OMPI_MCA_coll=^libnbc mpi -np 2 -x OMPI_MCA_coll "$driver" "$plugin" order 0,1 > "$tmp/o5.log" 2>&1
expect "OMPI_MCA_coll without libnbc refused before MPI starts" "$tmp/o5.log" "OMPI_MCA_coll='^libnbc' leaves out OpenMPI's 'libnbc'"
mpi -np 2 "$driver" "$plugin" nccl > "$tmp/n1.log" 2>&1; rc=$?
[ $rc = 0 ] && [ "$(grep -c 'refused (EUNSUPPORTED, communicator none): the NCCL engine: this binary has none' "$tmp/n1.log")" = 2 ] &&
  pass "nccl under mpirun: the MPI bootstrap starts, the CPU build's stand-in refuses, MPI ends cleanly" ||
  { fail "nccl under mpirun (rc $rc)"; cat "$tmp/n1.log"; }

train=(train --train-iters 1 --eval-interval 0 --quiet --dist-timeout-sec 20)
mpi -np 2 "$detrain" "${train[@]}" --dist-engine single > "$tmp/t1.log" 2>&1
expect "train: single under mpirun -np 2" "$tmp/t1.log" "--dist-engine single under openmpi with 2 ranks"
mpi -np 2 "$detrain" "${train[@]}" --rank-order 0,2 > "$tmp/t2.log" 2>&1
expect "train: bad --rank-order" "$tmp/t2.log" "--rank-order 0,2"
# auto picks the MPI engine under mpirun (the plugin beside build/detrain starts) and the
# loop trains on both ranks (tests/e2e/test_dp_mpi.sh checks the training itself)
mpi -np 2 "$detrain" train --train-iters 1 --eval-interval 0 --global-batch-size 16 --dist-timeout-sec 20 > "$tmp/t3.log" 2>&1
expect "train: auto is mpi under mpirun" "$tmp/t3.log" "2 data-parallel ranks (mpi)"
DETRAIN_RANK=0 DETRAIN_WORLD_SIZE=2 DETRAIN_LOCAL_RANK=0 "$detrain" "${train[@]}" > "$tmp/t4.log" 2>&1
expect "train: two ranks without mpirun on the CPU" "$tmp/t4.log" "launch with mpirun"

# 5. `detrain train` on the MPI engine with one rank (the plugin's allreduce on every step's
#    gradients): bitwise the single engine's run, and env.json records the engine and library
run=(train --model tiny --seq-length 32 --micro-batch-size 2 --train-iters 4 --eval-interval 2 --eval-iters 1
     --quiet --deterministic-mode --threads 1)
"$detrain" "${run[@]}" --log-dir "$tmp/single" > "$tmp/single.log" 2>&1
mpi -np 1 "$detrain" "${run[@]}" --dist-engine mpi --log-dir "$tmp/mpi1" > "$tmp/mpi1.log" 2>&1
"$detrain" compare "$tmp/single" "$tmp/mpi1" > "$tmp/cmp.log" 2>&1
expect "train: mpi engine with one rank is bitwise the single engine" "$tmp/cmp.log" "bitwise identical: 4 steps"
python3 - "$tmp/mpi1/env.json" "$tmp/single/env.json" > "$tmp/env.log" 2>&1 <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
d = e["contract"]["dist"]
assert d["engine"] == "mpi" and d["world_size"] == 1, d
assert d["mpi_library"].startswith("Open MPI"), d
assert "coll" in d["openmpi_coll_params"], d
i = e["info"]["dist"]
assert i["launcher"] == "openmpi" and i["rank_order"] == [0] and i["engine_asked"] == "mpi", i
s = json.load(open(sys.argv[2]))["contract"]["dist"]
assert s == {"engine": "single", "world_size": 1}, s
print("env.json records", d["mpi_library"].split(",")[0])
PY
[ $? = 0 ] && pass "env.json: the engine, world size, MPI library and collective settings" || { fail "env.json's dist record"; cat "$tmp/env.log"; }

echo "$fails failed"
[ $fails = 0 ]
