// The OpenBLAS kernel set in use; the re-selection of Debian's is force.c.
#include <cblas.h>
#include "blascore.h"

const char *blascore_name(void) { return openblas_get_corename(); }
