//go:build !wheel

package blascore

// The developers' build: Debian's OpenBLAS 0.3.21 (the OpenMP flavour).

/*
#cgo CFLAGS: -I/usr/include/x86_64-linux-gnu/openblas-openmp
#cgo LDFLAGS: -lopenblas
*/
import "C"
