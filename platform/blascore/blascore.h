#ifndef NEEDLE_BLASCORE_H
#define NEEDLE_BLASCORE_H
// OpenBLAS kernel set in use ("SkylakeX", "Haswell", "Prescott", ...).
const char *blascore_name(void);
// A re-selection as `core` (force.c; the developers' build only); call only before any BLAS work.
void blascore_force(const char *core);
#endif
