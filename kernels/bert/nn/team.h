// team: the fork-join threads of nn's few-row Linear (the GEMMs of a query).
#ifndef NEEDLE_NN_TEAM_H
#define NEEDLE_NN_TEAM_H
#include <stdint.h>

typedef void (*team_fn)(void *arg, int64_t task);

enum { TEAM_MAX_THREADS = 64 }; // threads past this count are not started

// team_run calls fn(arg, t) for every t < tasks on up to threads threads (the caller is
// one of them) and returns when all are done. A call that finds the team busy with another
// caller's job runs its tasks alone on the calling thread.
void team_run(int64_t tasks, team_fn fn, void *arg, int threads);
// team_run_stoppable is team_run that claims no more tasks once *stop is nonzero (stop may be
// NULL: never): each thread finishes the task it is in, so the call returns one task after the
// flag is set. Some tasks then never ran; the caller checks team_stopped(stop) afterwards.
void team_run_stoppable(int64_t tasks, team_fn fn, void *arg, int threads, const int32_t *stop);

// team_stopped reads a stop flag that another thread (Go's nn.Stop.Set) may set at any time.
static inline int team_stopped(const int32_t *stop) { return stop && __atomic_load_n(stop, __ATOMIC_RELAXED); }
#endif
