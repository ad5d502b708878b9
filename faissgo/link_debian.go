//go:build !wheel

package faissgo

// The developers' build (make build): Debian's libfaiss.a and OpenBLAS, the C API compiled by
// CMake into build/native, GNU's OpenMP and C++ runtimes.

/*
#cgo LDFLAGS: -L${SRCDIR}/../build/native -lfaiss_c -lfaiss -lopenblas -lgomp -lstdc++ -lm
*/
import "C"
