// Package blascore makes the process's OpenBLAS use the kernels of this CPU's ISA when it
// fell back to its SSE3 "Prescott" kernels for a CPU model it does not know (see
// force.c), unless the user chose a core with OPENBLAS_CORETYPE. Every package that
// calls BLAS, directly or through FAISS, imports it, so the fix runs in init before any
// BLAS call. Process-wide: one libopenblas serves all of them.
package blascore

/*
#cgo CFLAGS: -O2
#include <stdlib.h>
#include <cblas.h>
#include "blascore.h"
*/
import "C"

// Name is the OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott", ...).
func Name() string { return C.GoString(C.blascore_name()) }

// Config is OpenBLAS's build line, e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Haswell
// MAX_THREADS=64" (its version first), for `needle doctor`.
func Config() string { return C.GoString(C.openblas_get_config()) }

// Threads is the number of threads OpenBLAS runs (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or
// the cores).
func Threads() int { return int(C.openblas_get_num_threads()) }
