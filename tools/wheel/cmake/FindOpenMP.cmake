# FAISS's find_package(OpenMP) in the wheel's build: LLVM's libomp from PyPI (cmeel-libomp,
# OMP_DIR), since zig's clang ships no OpenMP runtime.
set(OpenMP_FOUND TRUE)
set(OpenMP_CXX_FOUND TRUE)
if(NOT TARGET OpenMP::OpenMP_CXX)
  add_library(OpenMP::OpenMP_CXX INTERFACE IMPORTED)
  set_target_properties(OpenMP::OpenMP_CXX PROPERTIES
    INTERFACE_COMPILE_OPTIONS "-fopenmp"
    INTERFACE_INCLUDE_DIRECTORIES "${OMP_DIR}/include"
    INTERFACE_LINK_LIBRARIES "${OMP_DIR}/lib/libomp.so")
endif()
