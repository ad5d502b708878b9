#!/usr/bin/env bash
# FAISS and its C API as static libraries, built from the source `make setup` fetches (FAISS_VERSION
# below; docs/install.md says where it comes from), for one of the two C++ toolchains that link it:
#   tools/faiss.sh dev     gcc and libstdc++, GNU OpenMP, Debian's OpenBLAS: bin/needle (make build)
#   tools/faiss.sh wheel   zig's clang and libc++ for glibc 2.28, LLVM's libomp, scipy-openblas32: the
#                          wheel (tools/wheel/toolchain.sh)
# Both are the same release, sources and CMake options; only the compiler and the libraries it is
# built against differ (a gcc-built FAISS needs libstdc++ symbols newer than glibc 2.28; a zig-built
# one needs libc++ and libomp, which `make build` does not link). Cached in
# NEEDLE_CACHE/faiss-VERSION-TOOLCHAIN-<hash of the inputs>; prints that prefix (lib/, include/).
set -euo pipefail
FAISS_VERSION=1.12.0
toolchain="${1:?usage: tools/faiss.sh dev|wheel}"
TOOLS="$(cd "$(dirname "$0")" && pwd)"
CACHE="${NEEDLE_CACHE:-$HOME/.cache/needle}"
SRC="$CACHE/faiss-$FAISS_VERSION-src"
[ -f "$SRC/c_api/index_io_c.cpp" ] || { echo "faiss: no source at $SRC; run make setup" >&2; exit 1; }

case "$toolchain" in
  dev)
    compilers=(-DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++)
    inputs=("$(g++ --version | head -1)") ;;
  wheel)
    source "$TOOLS/wheel/toolchain.sh"
    # tools/wheel/cmake points CMake's BLAS, LAPACK and OpenMP lookups at the two PyPI libraries.
    compilers=(-DCMAKE_C_COMPILER="$ZCC" -DCMAKE_CXX_COMPILER="$ZCXX" -DCMAKE_MODULE_PATH="$WHEEL_DIR/cmake"
      -DOPENBLAS_LIB="$OPENBLAS_DIR/lib/libscipy_openblas.so" -DOMP_DIR="$OMP_DIR")
    inputs=("$(cat "$WHEEL_DIR"/{toolchain.sh,requirements.txt,blas_prefix.h} "$WHEEL_DIR"/cmake/*)") ;;
  *) echo "faiss: unknown toolchain $toolchain (dev or wheel)" >&2; exit 1 ;;
esac
key="$( (cat "$0"; printf '%s\n' "${inputs[@]}") | sha256sum | cut -c1-16)"
PREFIX="$CACHE/faiss-$FAISS_VERSION-$toolchain-$key"
if [ ! -f "$PREFIX/lib/libfaiss_c.a" ]; then
  echo "faiss: building FAISS $FAISS_VERSION ($toolchain, static) into $PREFIX" >&2
  start=$SECONDS
  build="$PREFIX.build"
  rm -rf "$build" "$PREFIX.tmp"
  # generic: one static library holds one FAISS, and FAISS picks its AVX2/AVX-512 copies by
  # loading another shared library, which a static link cannot do (docs/install.md). OpenBLAS,
  # which does FAISS's flat and IVF distance work, picks its kernels at run time.
  # -DNDEBUG (Release has it; said again as it matters): without it faiss prints every caught error.
  cmake -S "$SRC" -B "$build" -DCMAKE_BUILD_TYPE=Release "${compilers[@]}" \
    -DCMAKE_CXX_FLAGS="-DNDEBUG" -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF \
    -DBUILD_TESTING=OFF -DFAISS_ENABLE_GPU=OFF -DFAISS_ENABLE_PYTHON=OFF -DFAISS_ENABLE_EXTRAS=OFF \
    -DFAISS_ENABLE_MKL=OFF -DFAISS_OPT_LEVEL=generic -DFAISS_ENABLE_C_API=ON \
    -DCMAKE_INSTALL_PREFIX="$PREFIX.tmp" >/dev/null
  # The compiler's warnings on FAISS's code go to a log, shown only if the build fails.
  cmake --build "$build" --target faiss faiss_c -j"$(nproc)" >"$build/log" 2>&1 ||
    { tail -40 "$build/log" >&2; exit 1; }
  cmake --install "$build" >/dev/null
  mv "$PREFIX.tmp" "$PREFIX"
  rm -rf "$build"
  echo "faiss: FAISS $FAISS_VERSION ($toolchain) built in $((SECONDS - start)) s" >&2
fi
echo "$PREFIX"
