# Sourced by the wheel's scripts: the PyPI toolchain (requirements.txt) in its own venv under
# NEEDLE_CACHE, and the names the build uses from it. Idempotent; installs only what changed.
CACHE="${NEEDLE_CACHE:-$HOME/.cache/needle}"
WHEEL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WHEEL_CACHE="$CACHE/wheel"
WHEEL_VENV="$WHEEL_CACHE/venv"
source "$WHEEL_DIR/../pinned_venv.sh"
pinned_venv "$WHEEL_VENV" "$WHEEL_DIR/requirements.txt" wheel
SITE="$("$WHEEL_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
ZIG="$SITE/ziglang/zig"
OPENBLAS_DIR="$SITE/scipy_openblas32"  # lib/libscipy_openblas.so, include/ (symbols prefixed scipy_)
OMP_DIR="$SITE/cmeel.prefix"           # LLVM's libomp: lib/libomp.so, include/omp.h
export ZIG_GLOBAL_CACHE_DIR="$WHEEL_CACHE/zig-cache"
# The compilers: zig's clang for glibc 2.28 (manylinux_2_28) and the baseline x86-64 ISA (the
# kernels pick AVX2/AVX-512 at run time), with libc++ linked statically by zig; BLAS_PREFIX_H
# renames the BLAS/LAPACK calls to scipy-openblas32's prefixed symbols (beside blascore, the
# package that knows which BLAS it calls).
ZIG_TARGET="-target x86_64-linux-gnu.2.28 -march=x86_64"
BLAS_PREFIX_H="$(cd "$WHEEL_DIR/../.." && pwd)/platform/blascore/blas_prefix.h"
mkdir -p "$WHEEL_CACHE/bin"
for tool in cc c++; do
  cat > "$WHEEL_CACHE/bin/zig-$tool.tmp" <<SH
#!/bin/sh
exec "$ZIG" $tool $ZIG_TARGET -include "$BLAS_PREFIX_H" "\$@"
SH
  chmod +x "$WHEEL_CACHE/bin/zig-$tool.tmp"
  mv "$WHEEL_CACHE/bin/zig-$tool.tmp" "$WHEEL_CACHE/bin/zig-$tool"
done
ZCC="$WHEEL_CACHE/bin/zig-cc"
ZCXX="$WHEEL_CACHE/bin/zig-c++"
