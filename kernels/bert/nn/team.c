// The fork-join team of nn's few-row Linear, in place of OpenMP.
//
// libgomp gives every OS thread that forks its own team, and a Go program calls in from
// many OS threads (FAISS forks teams too), so libgomp soon counts more threads than cores
// and then lets its workers spin only 100 times before sleeping on a futex: every op of a
// query paid a wake-up. Measured on a 2-vCPU VM: a 12-row 384x1536 Linear took 250 us
// called from Go against 85 us from one C thread. This team is one per process; its workers
// spin for SPIN_NS after each job, so the dozens of GEMMs of one forward pass find them
// awake, and they sleep on a condition variable once encoding stops.
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include "team.h"

#define SPIN_NS 1000000

static pthread_mutex_t team_lock = PTHREAD_MUTEX_INITIALIZER; // held by the caller of the current job
static int started;                                           // workers created, ids 1..started (team_lock)

// The current job: written by its caller before it bumps gen, read by workers after.
static struct {
	team_fn fn;
	void *arg;
	int64_t tasks;
	int threads;
	const int32_t *stop;
} job;
static _Atomic uint64_t gen;  // job generation: workers run each generation once
static _Atomic int64_t next;  // next unclaimed task
static _Atomic int acked;     // workers done with the current generation

static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static _Atomic int sleepers;

static int64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void run_tasks(void) {
	for (int64_t t; !team_stopped(job.stop) && (t = atomic_fetch_add(&next, 1)) < job.tasks;) job.fn(job.arg, t);
}

// wait_for returns the first generation after seen: spinning for SPIN_NS, then asleep.
// sleepers and gen are seq_cst on both sides, so team_run either sees this worker counted
// in sleepers or the worker sees the new gen before it waits: no wake-up is lost.
static uint64_t wait_for(uint64_t seen) {
	int64_t t0 = now_ns();
	for (int spins = 1;; spins++) {
		uint64_t g = atomic_load(&gen);
		if (g != seen) return g;
		_mm_pause();
		if (spins % 256 == 0 && now_ns() - t0 > SPIN_NS) break;
	}
	pthread_mutex_lock(&sleep_lock);
	atomic_fetch_add(&sleepers, 1);
	uint64_t g;
	while ((g = atomic_load(&gen)) == seen) pthread_cond_wait(&wake, &sleep_lock);
	atomic_fetch_sub(&sleepers, 1);
	pthread_mutex_unlock(&sleep_lock);
	return g;
}

typedef struct {
	int id;
	uint64_t seen;
} worker_start;

static worker_start starts[TEAM_MAX_THREADS];

static void *worker(void *p) {
	const worker_start *s = p;
	for (uint64_t seen = s->seen;;) {
		seen = wait_for(seen);
		if (s->id < job.threads) run_tasks();
		atomic_fetch_add(&acked, 1); // every worker acks, so the next job waits for all
	}
	return 0;
}

void team_run(int64_t tasks, team_fn fn, void *arg, int threads) { team_run_stoppable(tasks, fn, arg, threads, 0); }

void team_run_stoppable(int64_t tasks, team_fn fn, void *arg, int threads, const int32_t *stop) {
	if (threads > TEAM_MAX_THREADS) threads = TEAM_MAX_THREADS;
	if (threads <= 1 || tasks <= 1 || pthread_mutex_trylock(&team_lock) != 0) {
		for (int64_t t = 0; t < tasks && !team_stopped(stop); t++) fn(arg, t);
		return;
	}
	while (started < threads - 1) { // workers not yet created see the generation before this job
		pthread_t th;
		starts[started] = (worker_start){started + 1, atomic_load(&gen)};
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int failed = pthread_create(&th, &attr, worker, &starts[started]);
		pthread_attr_destroy(&attr);
		if (failed) break; // fewer helpers: the tasks still all run
		started++;
	}
	job.fn = fn;
	job.arg = arg;
	job.tasks = tasks;
	job.threads = threads;
	job.stop = stop;
	atomic_store(&next, 0);
	atomic_store(&acked, 0);
	atomic_fetch_add(&gen, 1);
	if (atomic_load(&sleepers) > 0) {
		pthread_mutex_lock(&sleep_lock);
		pthread_cond_broadcast(&wake);
		pthread_mutex_unlock(&sleep_lock);
	}
	run_tasks();
	while (atomic_load(&acked) < started) _mm_pause();
	pthread_mutex_unlock(&team_lock);
}
