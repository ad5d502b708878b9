# FAISS's find_package(BLAS) in the wheel's build: scipy-openblas32 (OPENBLAS_LIB), whose
# prefixed symbols CMake's own FindBLAS cannot find. FAISS is built as a static library, so
# this only names the library; the Go link brings it in.
set(BLAS_FOUND TRUE)
set(BLAS_LIBRARIES "${OPENBLAS_LIB}")
