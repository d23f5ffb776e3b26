#!/usr/bin/env bash
# Compares the device code (SASS) of two CUDA builds object by object: did a change to
# the sources (a move, a shared device function) change what any kernel computes?
#
#   tools/sass_diff.sh OLD NEW      OLD, NEW: build folders (their cuda/obj trees) or two
#                                   objects / executables
#   tools/sass_diff.sh --functions OLD NEW
#                                   every kernel of either build, wherever it is: for kernels
#                                   that moved from one source file to another
#
# Objects are paired by file name (attention_flash_cuda.cu.o in OLD with the one of the same
# name in NEW, wherever the folders put them), so a tree whose sources moved between folders
# still pairs up. The SASS of each is `cuobjdump -sass` with the lines that name the source
# file left out (the ELF's identifier: a moved file is the same code under another name);
# every instruction, its encoding (control bits included) and its address are compared
# (blanks squeezed: the column padding depends on the other kernels of the object).
# Functions are compared as a set sorted by name, so kernels that only changed places in
# their file count as identical ("same, reordered"). A pair that differs gets its diff in
# $SASS_DIFF_DIR (default /tmp/sass-diff) as NAME.diff.
# --functions pools the functions of every object of each build and compares them by name:
# one line a function that differs or is only in one build, then a count of the same ones.
# Prints one line an object: `same`, `same, reordered`, `DIFFERS (N lines)`, `only in OLD`
# or `only in NEW`; exits 1 when any object differs or is unpaired, 0 otherwise.
# Needs cuobjdump and nvdisasm on PATH (the CUDA toolkit; pip's nvidia-cuda-cuobjdump and
# nvidia-cuda-nvdisasm have them too).
set -u
functions=0
if [ "${1:-}" = --functions ]; then functions=1; shift; fi
if [ $# -ne 2 ]; then sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi
command -v cuobjdump >/dev/null || { echo "sass_diff: cuobjdump not on PATH" >&2; exit 2; }
out=${SASS_DIFF_DIR:-/tmp/sass-diff}
mkdir -p "$out"

# The SASS of one file, functions in file order, the identifier lines dropped and runs of
# blanks squeezed (cuobjdump pads its columns to the object's longest line, so a kernel
# printed beside other kernels is padded otherwise).
sass() { cuobjdump -sass "$1" | grep -v '^identifier = ' | tr -s ' '; }
# The same, functions sorted by name (each function's lines kept in order).
sass_sorted() {
  sass "$1" | awk '/Function : / { name = $NF } { printf "%s\t%09d\t%s\n", name, NR, $0 }' |
    LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2 | cut -f3-
}

list() {
  if [ -d "$1" ]; then find "$1" -name '*.cu.o' | sort; else echo "$1"; fi
}

# Every function of every object below $1, one block a function, the blocks in name order.
pool() {
  for f in $(list "$1"); do sass "$f"; done |
    awk '/Function : / { name = $NF; on = 1 } /^\t\t\.\.\.\.\.\.\.\.\.\.$/ { on = 0 }
         on { printf "%s\t%09d\t%s\n", name, NR, $0 }' |
    LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2
}

if [ $functions = 1 ]; then
  pool "$1" > "$out/old.pool"
  pool "$2" > "$out/new.pool"
  rc=0; same=0
  for name in $(cut -f1 "$out/old.pool" "$out/new.pool" | LC_ALL=C sort -u); do
    a=$(awk -F '\t' -v n="$name" '$1 == n' "$out/old.pool" | cut -f3-)
    b=$(awk -F '\t' -v n="$name" '$1 == n' "$out/new.pool" | cut -f3-)
    if [ -z "$a" ]; then echo "$name: only in NEW"; rc=1
    elif [ -z "$b" ]; then echo "$name: only in OLD"; rc=1
    elif [ "$a" = "$b" ]; then same=$((same + 1))
    else echo "$name: DIFFERS"; rc=1; fi
  done
  echo "$same functions the same"
  exit $rc
fi

rc=0
declare -A old_of
for f in $(list "$1"); do old_of[$(basename "$f")]=$f; done
declare -A seen
for f in $(list "$2"); do
  b=$(basename "$f")
  seen[$b]=1
  o=${old_of[$b]:-}
  if [ -z "$o" ]; then
    if [ -d "$1" ]; then echo "$b: only in NEW"; rc=1; continue; fi
    o=$1
  fi
  if cmp -s <(sass "$o") <(sass "$f"); then
    echo "$b: same"
  elif cmp -s <(sass_sorted "$o") <(sass_sorted "$f"); then
    echo "$b: same, reordered"
  else
    diff <(sass_sorted "$o") <(sass_sorted "$f") > "$out/$b.diff"
    echo "$b: DIFFERS ($(grep -c '^[<>]' "$out/$b.diff") lines; $out/$b.diff)"
    rc=1
  fi
done
if [ -d "$1" ]; then
  for b in "${!old_of[@]}"; do
    [ -n "${seen[$b]:-}" ] || { echo "$b: only in OLD"; rc=1; }
  done
fi
exit $rc
