#ifndef NEEDLE_BLASCORE_H
#define NEEDLE_BLASCORE_H
// OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott", ...), and a re-selection
// as `core` (see blascore.c); call only before any BLAS work.
const char *blascore_name(void);
void blascore_force(const char *core);
#endif
