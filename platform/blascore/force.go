//go:build !wheel

package blascore

/*
#include <stdlib.h>
#include "blascore.h"
*/
import "C"

import (
	"os"
	"unsafe"

	"needle/platform/cpu"
)

// init re-selects Debian's OpenBLAS 0.3.21 kernels on CPUs it does not know (force.c). The
// wheel's OpenBLAS (0.3.34) knows the CPUs this matters for and exports no selection to redo.
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
