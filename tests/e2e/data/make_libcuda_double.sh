#!/bin/sh
# Test double of tests/e2e/test_real_sglang_lab.py (not part of the deployment): "libcuda-double", a
# stand-in for the NVIDIA driver's libcuda.so.1, which no GPU-less host has. sgl-kernel 0.3.21 (the
# CUDA build of the lock) links its extensions against libcuda.so.1, so without it SGLang stops at
# `import sgl_kernel`, before it logs its server args or starts a child process. This library only
# lets the dynamic loader resolve those symbols: every function returns CUDA_ERROR_NO_DEVICE (100);
# nothing is emulated. The symbol list is read from the extensions themselves (nm), built with the
# converged host's gcc (the cuda_toolkit role's prerequisite).
# usage: make_libcuda_double.sh DEST_DIR SGL_KERNEL_DIR     (prints "built N symbols" or "present")
set -eu
dest=$1 kernel=$2
[ -f "$dest/libcuda.so.1" ] && { echo present; exit 0; }
mkdir -p "$dest"
find "$kernel" -name '*.so' -exec nm -D --undefined-only {} + |
  awk '$2 ~ /^cu[A-Z][A-Za-z0-9_]*$/ {print $2}' | sort -u >"$dest/symbols.txt"
awk '{print "int " $1 "(void) { return 100; }"}' "$dest/symbols.txt" >"$dest/libcuda_double.c"
gcc -shared -fPIC -nostdlib -Wl,-soname,libcuda.so.1 -o "$dest/libcuda.so.1.tmp" "$dest/libcuda_double.c"
mv "$dest/libcuda.so.1.tmp" "$dest/libcuda.so.1"
echo "built $(wc -l <"$dest/symbols.txt") symbols"
