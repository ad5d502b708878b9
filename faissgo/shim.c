#include "shim.h"

#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>
#include <faiss/c_api/utils/distances_c.h>

// threads is written once by needle_faiss_init before any compute call (faissgo.Init).
static int threads;

void needle_faiss_init(int n) {
    threads = n;
    faiss_set_distance_compute_blas_threshold(1);
}

// apply_threads sets the OpenMP thread count of the calling OS thread: libgomp keeps it per
// thread, and cgo calls arrive on whichever thread the goroutine runs on.
static void apply_threads(void) {
    if (threads > 0 && omp_get_max_threads() != threads) {
        omp_set_num_threads(threads);
    }
}

// finish copies the pending FAISS error (if status != 0) into err and returns status.
static int finish(int status, char* err, size_t errlen) {
    if (status != 0 && errlen > 0) {
        const char* msg = faiss_get_last_error();
        snprintf(err, errlen, "%s", msg ? msg : "unknown FAISS error");
    }
    return status;
}

int needle_index_factory(FaissIndex** out, int d, const char* description, int metric,
                         char* err, size_t errlen) {
    return finish(faiss_index_factory(out, d, description, (FaissMetricType)metric), err, errlen);
}

int needle_read_index(const char* path, int io_flags, FaissIndex** out, char* err, size_t errlen) {
    return finish(faiss_read_index_fname(path, io_flags, out), err, errlen);
}

int needle_write_index_fd(const FaissIndex* idx, int fd, char* err, size_t errlen) {
    int dupfd = dup(fd);
    FILE* f = dupfd < 0 ? NULL : fdopen(dupfd, "wb");
    if (f == NULL) {
        snprintf(err, errlen, "open the index file for writing: %s", strerror(errno));
        if (dupfd >= 0) close(dupfd);
        return -1;
    }
    int status = finish(faiss_write_index(idx, f), err, errlen);
    if (fflush(f) != 0 && status == 0) {
        snprintf(err, errlen, "write: %s", strerror(errno));
        status = -1;
    }
    if (fclose(f) != 0 && status == 0) {
        snprintf(err, errlen, "close: %s", strerror(errno));
        status = -1;
    }
    return status;
}

int needle_train(FaissIndex* idx, int64_t n, const float* x, char* err, size_t errlen) {
    apply_threads();
    return finish(faiss_Index_train(idx, n, x), err, errlen);
}

int needle_add(FaissIndex* idx, int64_t n, const float* x, char* err, size_t errlen) {
    apply_threads();
    return finish(faiss_Index_add(idx, n, x), err, errlen);
}

int needle_search(const FaissIndex* idx, int64_t n, const float* x, int64_t k, float* distances,
                  int64_t* labels, char* err, size_t errlen) {
    apply_threads();
    if (n == 1 || needle_index_is_flat(idx)) {
        return finish(faiss_Index_search(idx, n, x, k, distances, labels), err, errlen);
    }
    const int64_t d = faiss_Index_d(idx);
    int status = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < n; i++) {
        int st = faiss_Index_search(idx, 1, x + i * d, k, distances + i * k, labels + i * k);
        if (st != 0) {
#pragma omp critical
            if (status == 0) { // the message is this thread's, read right after its call
                status = finish(st, err, errlen);
            }
        }
    }
    return status;
}

int needle_set_param(FaissIndex* idx, const char* name, double value, char* err, size_t errlen) {
    FaissParameterSpace* ps = NULL;
    int status = faiss_ParameterSpace_new(&ps);
    if (status == 0) {
        status = faiss_ParameterSpace_set_index_parameter(ps, idx, name, value);
    }
    status = finish(status, err, errlen);
    faiss_ParameterSpace_free(ps);
    return status;
}
