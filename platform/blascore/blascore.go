// Package blascore makes the process's OpenBLAS use the kernels of this CPU's ISA when it
// fell back to its SSE3 "Prescott" kernels for a CPU model it does not know (see
// blascore.c), unless the user chose a core with OPENBLAS_CORETYPE. Every package that
// calls BLAS, directly or through FAISS, imports it, so the fix runs in init before any
// BLAS call. Process-wide: one libopenblas serves all of them.
package blascore

/*
#cgo CFLAGS: -O2 -I/usr/include/x86_64-linux-gnu/openblas-openmp
#cgo LDFLAGS: -lopenblas
#include <stdlib.h>
#include "blascore.h"
*/
import "C"

import (
	"os"
	"unsafe"

	"needle/platform/cpu"
)

func init() {
	if os.Getenv("OPENBLAS_CORETYPE") != "" || Name() != "Prescott" {
		return
	}
	var core string
	switch l := cpu.Supported(); {
	case l >= cpu.AVX512:
		core = "SkylakeX"
	case l == cpu.AVX2:
		core = "Haswell"
	default:
		return
	}
	cs := C.CString(core)
	defer C.free(unsafe.Pointer(cs))
	C.blascore_force(cs)
}

// Name is the OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott", ...).
func Name() string { return C.GoString(C.blascore_name()) }
