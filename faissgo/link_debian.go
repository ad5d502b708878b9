//go:build !wheel

package faissgo

// The developers' build (make build): FAISS built with gcc by tools/faiss.sh (`make native` links
// build/native/faiss to it), Debian's OpenBLAS, GNU's OpenMP and C++ runtimes.

/*
#cgo CFLAGS: -I${SRCDIR}/../build/native/faiss/include
#cgo CXXFLAGS: -I${SRCDIR}/../build/native/faiss/include
#cgo LDFLAGS: -L${SRCDIR}/../build/native/faiss/lib -lfaiss_c -lfaiss -lopenblas -lgomp -lstdc++ -lm
*/
import "C"
