#!/usr/bin/env bash
# make dist: one manylinux wheel in dist/ holding the needle binary (the `needle` command), the
# needle_trainer package with libneedle.so, and the libraries they load (docs/install.md).
# Needs `make native` first: the PTX and fatbins it writes are embedded in both ELF files.
set -euo pipefail
source "$(dirname "$0")/toolchain.sh"
ROOT="$(cd "$WHEEL_DIR/../.." && pwd)"
cd "$ROOT"
FAISS="$(bash "$WHEEL_DIR/../faiss.sh" wheel)"
OUT="$ROOT/build/wheel"
STAGE="$OUT/stage"
rm -rf "$STAGE" "$OUT"/*.whl
mkdir -p "$STAGE"

# cgo and CMake: gcc compiles C, zig links (cc.sh); zig c++ compiles C++ and links libc++ in.
export NEEDLE_ZIG_CC="$ZCC" CC="$WHEEL_DIR/cc.sh" CXX="$ZCXX"
inc="-include $WHEEL_DIR/blas_prefix.h -I$FAISS/include -I$OPENBLAS_DIR/include -I$OMP_DIR/include"
# CGO_CFLAGS from make carries the C headers' hash (Makefile): kept, so a header edit rebuilds here too.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g} $inc" CGO_CXXFLAGS="-O2 -g $inc"
export CGO_LDFLAGS="-L$FAISS/lib -L$OPENBLAS_DIR/lib -L$OMP_DIR/lib"
# netgo, osusergo: Go's own resolver and user lookup; cgo's would call glibc functions that moved
# between 2.28 and the build machine's headers (res_search).
echo "dist: go build -tags wheel,netgo,osusergo ./cmd/needle" >&2
go build -tags wheel,netgo,osusergo -trimpath -ldflags='-s -w' -o "$STAGE/needle_rl/bin/needle" ./cmd/needle

echo "dist: libneedle.so" >&2
cmake -S . -B "$OUT/native" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" \
  -DOpenMP_C_FLAGS=-fopenmp -DOpenMP_C_LIB_NAMES=omp -DOpenMP_CXX_FLAGS=-fopenmp -DOpenMP_CXX_LIB_NAMES=omp \
  -DOpenMP_omp_LIBRARY="$OMP_DIR/lib/libomp.so" >/dev/null
cmake --build "$OUT/native" --target needle -j"$(nproc)" >/dev/null
tar -C python --exclude __pycache__ --exclude _checkout.py -cf - needle_rl needle_trainer | tar -C "$STAGE" -xf -
cp "$OUT/native/libneedle.so" "$STAGE/needle_trainer/"
plain="$("$WHEEL_VENV/bin/python" "$WHEEL_DIR/pack.py" "$STAGE" "$OUT")"

# auditwheel copies libscipy_openblas and libomp into needle_rl.libs/, points the ELF files at
# them, and names the oldest manylinux policy every symbol meets.
echo "dist: auditwheel repair" >&2
mkdir -p dist
PATH="$WHEEL_VENV/bin:$PATH" LD_LIBRARY_PATH="$OPENBLAS_DIR/lib:$OMP_DIR/lib" "$WHEEL_VENV/bin/auditwheel" repair \
  --plat manylinux_2_28_x86_64 -w dist "$plain"
whl="$(ls -t dist/needle_rl-*.whl | head -1)"
size=$(stat -c %s "$whl")
echo "dist: $whl ($((size / 1000000)) MB)"
if [ "$size" -gt 60000000 ]; then echo "dist: over 60 MB" >&2; exit 1; fi
