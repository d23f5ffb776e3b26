#!/usr/bin/env bash
# Installs what detrain needs on a fresh Debian machine and checks what it cannot install.
# Needed: a C11 compiler with OpenMP, make, OpenBLAS (OpenMP build), python3 (test scripts
# use its standard library only), git (the gate), and Chromium (the tests of `detrain report`
# render its page in the headless browser), OpenMPI (mpicc builds the MPI engine's plugin,
# mpirun runs the multi-process tests). Idempotent: installs only what is missing.
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
command -v gcc >/dev/null || need+=(gcc)
command -v make >/dev/null || need+=(make)
command -v git >/dev/null || need+=(git)
command -v python3 >/dev/null || need+=(python3)
have_pkg libopenblas-openmp-dev || need+=(libopenblas-openmp-dev)
command -v chromium >/dev/null || need+=(chromium)
command -v mpicc >/dev/null || need+=(libopenmpi-dev)
command -v mpirun >/dev/null || need+=(openmpi-bin)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
test -f /usr/include/x86_64-linux-gnu/openblas-openmp/cblas.h || {
  echo "install-deps: OpenBLAS headers not found after install (libopenblas-openmp-dev)" >&2; exit 1; }
command -v chromium >/dev/null || {
  echo "install-deps: chromium not found after install (Debian package chromium)" >&2; exit 1; }
command -v mpicc >/dev/null && command -v mpirun >/dev/null || {
  echo "install-deps: mpicc or mpirun not found after install (Debian packages libopenmpi-dev, openmpi-bin)" >&2; exit 1; }
