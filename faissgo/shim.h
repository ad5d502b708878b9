// C shim between faissgo and FAISS's C API (FAISS 1.12.0's c_api, libfaiss_c.a: tools/faiss.sh).
// Every fallible entry point copies faiss_get_last_error() into the caller's err buffer
// (errlen bytes, always NUL-terminated) before returning, in the SAME call: the error is
// thread-local in FAISS and a goroutine may change OS thread between two cgo calls.
// Return value: 0 on success, the c_api's negative status otherwise.
#ifndef NEEDLE_FAISSGO_SHIM_H
#define NEEDLE_FAISSGO_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <faiss/c_api/Index_c.h>

#ifdef __cplusplus
extern "C" {
#endif

// needle_faiss_init sets the BLAS threshold to 1 (BLAS for every batch size) and the
// OpenMP thread count applied by every compute call below (threads <= 0: OpenMP default).
void needle_faiss_init(int threads);

int needle_index_factory(FaissIndex** out, int d, const char* description, int metric,
                         char* err, size_t errlen);
int needle_read_index(const char* path, int io_flags, FaissIndex** out, char* err, size_t errlen);
// needle_write_index_fd writes idx to the open file fd (a dup of it; fd stays open) and
// reports every write error, including those of the final flush, which FAISS's own writers
// drop (faiss/impl/io.cpp: ~FileIOWriter prints fclose's error and carries on), so a full
// disk cannot pass for a written index.
int needle_write_index_fd(const FaissIndex* idx, int fd, char* err, size_t errlen);
int needle_train(FaissIndex* idx, int64_t n, const float* x, char* err, size_t errlen);
int needle_add(FaissIndex* idx, int64_t n, const float* x, char* err, size_t errlen);
// needle_search writes n*k distances and labels into the caller's buffers. A flat index
// (IndexFlat) is searched in one call for all n queries (one pass over its vectors); any other
// index one query per call, the queries on the OpenMP threads, so that a query's results do
// not depend on the others (FAISS computes a batch's coarse assignments and transforms by
// sgemm, whose rounding follows the batch). On an error, the first failing query's message.
int needle_search(const FaissIndex* idx, int64_t n, const float* x, int64_t k, float* distances,
                  int64_t* labels, char* err, size_t errlen);
// needle_set_param sets a search-time parameter (nprobe, efSearch, ...) through ParameterSpace.
int needle_set_param(FaissIndex* idx, const char* name, double value, char* err, size_t errlen);
// needle_index_is_flat reports whether idx is an IndexFlat (IP or L2); typename.cpp.
int needle_index_is_flat(const FaissIndex* idx);
// needle_index_type_name writes the C++ class name of idx (e.g. "IndexHNSWFlat"); typename.cpp.
void needle_index_type_name(const FaissIndex* idx, char* out, size_t outlen);
// needle_faiss_compile_options writes faiss::get_compile_options() (e.g. "OPTIMIZE GENERIC "),
// which the C API does not offer; typename.cpp.
void needle_faiss_compile_options(char* out, size_t outlen);

#ifdef __cplusplus
}
#endif

#endif
