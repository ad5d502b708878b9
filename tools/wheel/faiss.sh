#!/usr/bin/env bash
# FAISS 1.7.3 and its C API as static libraries for the wheel, from the source `make setup`
# fetches, compiled by zig's clang against scipy-openblas32 and LLVM's libomp (toolchain.sh).
# Cached under NEEDLE_CACHE/wheel/faiss-<hash of the inputs>; prints that prefix (lib/, include/).
set -euo pipefail
source "$(dirname "$0")/toolchain.sh"
FAISS_SRC="$CACHE/faiss-src"
[ -f "$FAISS_SRC/c_api/index_io_c.cpp" ] || { echo "wheel: no faiss source at $FAISS_SRC; run make setup" >&2; exit 1; }
key="$(cat "$WHEEL_DIR"/{faiss.sh,toolchain.sh,requirements.txt} "$BLAS_PREFIX_H" "$WHEEL_DIR"/cmake/* \
  "$FAISS_SRC/CMakeLists.txt" "$FAISS_SRC/faiss/CMakeLists.txt" | sha256sum | cut -c1-16)"
PREFIX="$WHEEL_CACHE/faiss-$key"
if [ ! -f "$PREFIX/lib/libfaiss_c.a" ]; then
  echo "wheel: building FAISS (static, zig c++) into $PREFIX; ~10 min on 2 cores" >&2
  start=$SECONDS
  build="$WHEEL_CACHE/faiss-build-$key"
  rm -rf "$build" "$PREFIX.tmp"
  # -DNDEBUG: without it faiss prints every caught error to stderr.
  cmake -S "$FAISS_SRC" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER="$ZCC" -DCMAKE_CXX_COMPILER="$ZCXX" \
    -DCMAKE_CXX_FLAGS="-DNDEBUG" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_MODULE_PATH="$WHEEL_DIR/cmake" -DOPENBLAS_LIB="$OPENBLAS_DIR/lib/libscipy_openblas.so" \
    -DOMP_DIR="$OMP_DIR" -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF -DFAISS_ENABLE_GPU=OFF \
    -DFAISS_ENABLE_PYTHON=OFF -DFAISS_ENABLE_C_API=ON -DCMAKE_INSTALL_PREFIX="$PREFIX.tmp" >/dev/null
  cmake --build "$build" --target faiss faiss_c -j"$(nproc)" >/dev/null
  cmake --install "$build" >/dev/null
  cp "$build/c_api/libfaiss_c.a" "$PREFIX.tmp/lib/"
  mv "$PREFIX.tmp" "$PREFIX"
  rm -rf "$build"
  echo "wheel: FAISS built in $((SECONDS - start)) s" >&2
fi
echo "$PREFIX"
