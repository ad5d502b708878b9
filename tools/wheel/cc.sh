#!/bin/sh
# The wheel's C compiler, as cgo and CMake call it (NEEDLE_ZIG_CC: toolchain.sh). C sources are
# compiled by the system gcc, the compiler of `make build`, so the kernels are the same machine
# code (the same speed, the same bits). A link of objects goes through zig against glibc 2.28's
# symbol versions (manylinux_2_28), with gcc's libgcc.a for the helpers gcc's code calls. A
# compile-and-link of a source in one call is a build system's probe (CMake's compiler checks):
# gcc does it whole.
for a in "$@"; do
  case "$a" in -c|-E|-S|*.c) exec gcc "$@" ;; esac
done
exec "$NEEDLE_ZIG_CC" "$@" "$(gcc -print-libgcc-file-name)"
