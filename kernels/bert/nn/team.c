// The fork-join team of nn's few-row Linear, in place of OpenMP.
//
// libgomp gives every OS thread that forks its own team, and a Go program calls in from
// many OS threads (FAISS forks teams too), so libgomp soon counts more threads than cores
// and then lets its workers spin only 100 times before sleeping on a futex: every op of a
// query paid a wake-up. Measured on a 2-vCPU VM: a 12-row 384x1536 Linear took 250 us
// called from Go against 85 us from one C thread. This team is one per process; its workers
// spin for SPIN_NS after each job, so the dozens of GEMMs of one forward pass (tens of
// microseconds of row ops apart) find them awake, and they sleep on a condition variable
// once encoding stops. A longer spin (1 ms) cost a single-client server 11-12 CPU-ms per query
// against 7-10 ms at 100 us and at 20 us on a loaded 2-core Xeon
// (docs/measurements/2026-11-27-thread-team.md).
//
// The caller never waits for a worker that has not started: it runs the job's tasks itself,
// closes the job, and then waits only for the workers that joined it (they are running a
// task). On a shared machine a worker that another process keeps off its core would
// otherwise hold every op of a forward pass until the scheduler gives it a slice.
#include <immintrin.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "team.h"

#define SPIN_NS 100000
// How long the caller spins on joined workers before it sleeps on a futex: about one dot
// task of a query's batch; longer means a joined worker was preempted mid-task.
#define CLOSE_SPIN_NS 50000

static pthread_mutex_t team_lock = PTHREAD_MUTEX_INITIALIZER; // held by the caller of the current job
static int started;                                           // workers created, ids 1..started (team_lock)

// The current job: written by its caller before it opens the job, read by workers that
// joined it; the caller rewrites it only once no worker is inside.
static struct {
	team_fn fn;
	void *arg;
	int64_t tasks;
	int threads;
	const int32_t *stop;
} job;
static _Atomic uint64_t gen;      // the latest job's generation (1, 2, ...): workers wake on a change
static _Atomic uint64_t open_gen; // the generation workers may still join; 0 once its caller closed it
static _Atomic int64_t next;      // next unclaimed task
static _Atomic int inside;        // workers between their join attempt and leaving (the futex word)
static _Atomic int closer_asleep; // the caller sleeps on inside

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

// join_and_run runs tasks of job g if it is still open. inside is raised before open_gen is
// read and the caller closes before it reads inside (all seq_cst): either the caller waits
// for this worker, or this worker finds the job closed and never reads it.
static void join_and_run(int id, uint64_t g) {
	atomic_fetch_add(&inside, 1);
	if (atomic_load(&open_gen) == g && id < job.threads) run_tasks();
	if (atomic_fetch_sub(&inside, 1) == 1 && atomic_load(&closer_asleep))
		syscall(SYS_futex, &inside, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
}

// close_job stops workers joining the current job and returns once those that joined left.
static void close_job(void) {
	atomic_store(&open_gen, 0);
	const int64_t t0 = now_ns();
	for (int spins = 1; atomic_load(&inside) > 0; spins++) {
		_mm_pause();
		if (spins % 64 != 0 || now_ns() - t0 < CLOSE_SPIN_NS) continue;
		atomic_store(&closer_asleep, 1);
		for (int n; (n = atomic_load(&inside)) > 0;)
			syscall(SYS_futex, &inside, FUTEX_WAIT_PRIVATE, n, 0, 0, 0);
		atomic_store(&closer_asleep, 0);
	}
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
		join_and_run(s->id, seen);
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
	const uint64_t g = atomic_load(&gen) + 1;
	atomic_store(&open_gen, g);
	atomic_store(&gen, g);
	if (atomic_load(&sleepers) > 0) {
		pthread_mutex_lock(&sleep_lock);
		pthread_cond_broadcast(&wake);
		pthread_mutex_unlock(&sleep_lock);
	}
	run_tasks();
	close_job();
	pthread_mutex_unlock(&team_lock);
}
