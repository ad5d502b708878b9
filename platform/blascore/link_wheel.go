//go:build wheel

package blascore

// The wheel's build: scipy-openblas32 (its include directory comes from CGO_CFLAGS, with the
// forced header that renames the calls to its scipy_ prefix; tools/wheel/dist.sh).

/*
#cgo LDFLAGS: -lscipy_openblas
*/
import "C"
