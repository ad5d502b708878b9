/* Forced into every C/C++ file of the wheel's build (-include, tools/wheel/toolchain.sh):
 * scipy-openblas32 exports its BLAS, LAPACK and OpenBLAS functions with a scipy_ prefix, so that
 * it never clashes with another BLAS in the same process (a user's numpy or torch). These are the
 * ones FAISS and needle call. */
#ifndef NEEDLE_BLAS_PREFIX_H
#define NEEDLE_BLAS_PREFIX_H
#define sgemm_ scipy_sgemm_
#define sgemv_ scipy_sgemv_
#define ssyrk_ scipy_ssyrk_
#define sgesvd_ scipy_sgesvd_
#define sgeqrf_ scipy_sgeqrf_
#define sorgqr_ scipy_sorgqr_
#define ssyev_ scipy_ssyev_
#define sgelsd_ scipy_sgelsd_
#define sgetrf_ scipy_sgetrf_
#define sgetri_ scipy_sgetri_
#define dgemm_ scipy_dgemm_
#define dgesvd_ scipy_dgesvd_
#define dgetrf_ scipy_dgetrf_
#define dgetri_ scipy_dgetri_
#define dsyev_ scipy_dsyev_
#define openblas_get_config scipy_openblas_get_config
#define openblas_get_corename scipy_openblas_get_corename
#define openblas_get_num_threads scipy_openblas_get_num_threads
#define openblas_set_num_threads scipy_openblas_set_num_threads
#endif
