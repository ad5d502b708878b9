//go:build !wheel

// OpenBLAS core selection. Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH and picks
// its kernels from the CPU model at load time; CPUs newer than it knows (e.g. Emerald
// Rapids, model 207) fall back to the SSE3 "Prescott" kernels, 3.4x slower on an AVX-512
// machine. OPENBLAS_CORETYPE fixes that but is read by the library's constructor, before
// Go runs, so blascore_force re-runs the selection with it set (exported symbols of
// DYNAMIC_ARCH builds; called once from Go init, before any BLAS call).
#include <stdlib.h>
#include <cblas.h>
#include "blascore.h"

extern void *gotoblas; // the selected kernel table (gotoblas_t *)
extern void gotoblas_dynamic_init(void);

void blascore_force(const char *core) {
	setenv("OPENBLAS_CORETYPE", core, 1);
	gotoblas = NULL;
	gotoblas_dynamic_init();
	unsetenv("OPENBLAS_CORETYPE");
}
