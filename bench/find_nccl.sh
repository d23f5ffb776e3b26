#!/usr/bin/env bash
# Prints a directory that holds libnccl.so.2 (NCCL 2.14 or newer, for the NCCL engine's
# dlopen), or says where it looked and exits 1. The GPU scripts put it on LD_LIBRARY_PATH:
#   d=$(bash bench/find_nccl.sh) && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Looks, in order: NCCL_HOME/lib (an NCCL install), the dynamic loader's cache, the NCCL of
# a Python install (the nvidia-nccl-cu* wheel PyTorch depends on: site-packages/nvidia/nccl/lib),
# the CUDA toolkit's lib directories.
set -u
has() { [ -n "$1" ] && [ -e "$1/libnccl.so.2" ]; }
if [ -n "${NCCL_HOME:-}" ] && has "$NCCL_HOME/lib"; then echo "$NCCL_HOME/lib"; exit 0; fi
d=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
if [ -n "$d" ] && [ -e "$d" ]; then dirname "$d"; exit 0; fi
for py in python3 python; do
  command -v "$py" >/dev/null 2>&1 || continue
  d=$("$py" - <<'PY' 2>/dev/null
import os, site, sys
roots = []
try:
    import nvidia.nccl as n
    roots += [os.path.join(p, "lib") for p in getattr(n, "__path__", [])]
except Exception:
    pass
try:
    roots += [os.path.join(p, "nvidia", "nccl", "lib") for p in site.getsitepackages() + [site.getusersitepackages()]]
except Exception:
    pass
roots += [os.path.join(p, "nvidia", "nccl", "lib") for p in sys.path if p]
for r in roots:
    if os.path.exists(os.path.join(r, "libnccl.so.2")):
        print(r)
        break
PY
)
  if has "$d"; then echo "$d"; exit 0; fi
done
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-*/lib64 /usr/local/cuda-*/lib /usr/lib/x86_64-linux-gnu; do
  if has "$d"; then echo "$d"; exit 0; fi
done
echo "find_nccl: no libnccl.so.2 in \$NCCL_HOME/lib, the loader's cache, a Python install's nvidia/nccl/lib or the CUDA toolkit; install NCCL 2.14+ (e.g. the nvidia-nccl-cu12 wheel) or set NCCL_HOME" >&2
exit 1
