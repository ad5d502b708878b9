# FAISS's find_package(LAPACK) in the wheel's build: the LAPACK inside scipy-openblas32.
set(LAPACK_FOUND TRUE)
set(LAPACK_LIBRARIES "${OPENBLAS_LIB}")
