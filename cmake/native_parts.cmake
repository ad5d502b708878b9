# How native parts are declared (included by the top CMakeLists.txt before any part). Every part's
# CMakeLists.txt (platform/*, testkit/cudaemu, kernels/<group>/<op>) may use:
#   needle_add_ptx(<target> <file.cu> <out.ptx>)   .cu -> sm_80 PTX with clang-16, no CUDA toolkit, and
#                                                 where nvcc is installed (`make setup`), also
#                                                 <file>.fatbin beside <out.ptx> (see below).
#                                                 Write <out.ptx> under the op's ptx/ folder (gitignored
#                                                 there) so the Go package can //go:embed it.
#   needle_add_emu_test(<name> <sources...>)      a C++20 ctest executable that runs the SAME .cu
#                                                 source on the CPU through testkit/cudaemu/cudaemu.h
#                                                 (the host half of kernels/common/cudev.h).
#   set_property(GLOBAL APPEND PROPERTY NEEDLE_KERNEL_C_SOURCES <file.c>...)
#                                                 C sources linked into libneedle.so (capi/; the same
#                                                 files cgo compiles for the Go package).
#   set_property(GLOBAL APPEND PROPERTY NEEDLE_KERNEL_CUDA_SOURCES <file_gpu.c>...)
#                                                 C launchers of a .cu on the CUDA host core
#                                                 (cuda/host.h), linked into libneedle.so with it.
# Sources include each other from the repository root (-I ${PROJECT_SOURCE_DIR}):
# "kernels/trainer/logprob/logprob.cu", "kernels/common/cudev.h", "platform/cpu/cpu.h".
find_package(Threads REQUIRED)
find_program(NEEDLE_CLANG_CUDA NAMES clang-16 REQUIRED)

# The PTX ISA feature: clang cannot find a CUDA install to infer it from, and shfl.sync needs >= 6.0.
# PTX 7.0 is what sm_80 drivers (CUDA 11.0+) JIT; sm_90 GPUs JIT sm_80 PTX too.
# -ffp-contract=off (also for the emulation tests): float math as written, as the C kernels
# (see kernels/trainer/logprob/logprob.go); clang fuses a * b + c by default for CUDA.
set(NEEDLE_PTX_FLAGS -x cuda --cuda-device-only -nocudainc -nocudalib --cuda-gpu-arch=sm_80
    -Xclang -target-feature -Xclang +ptx70 -O3 -std=c++17 -ffp-contract=off)

# NVIDIA's compiler, CUDA 13.0 as the GPU machines' driver (580): tools/setup.sh installs it from
# PyPI into NEEDLE_CACHE. Only that pinned copy is used (a newer nvcc writes PTX the 13.0 driver
# rejects); without it the build has clang's PTX alone. Its ptxas checks clang's PTX for sm_90
# at build time, so PTX that the driver's JIT would refuse fails here, not on the GPU machine.
set(NEEDLE_NVCC_DIR "${NEEDLE_CACHE}/nvcc-13.0.88/nvidia/cu13/bin" CACHE PATH "nvcc 13.0 (tools/setup.sh)")
find_program(NEEDLE_NVCC nvcc HINTS "${NEEDLE_NVCC_DIR}" NO_DEFAULT_PATH)
find_program(NEEDLE_PTXAS ptxas HINTS "${NEEDLE_NVCC_DIR}" NO_DEFAULT_PATH)
if(NEEDLE_NVCC)
  message(STATUS "nvcc: ${NEEDLE_NVCC} (fatbins of sm_80/sm_90 machine code + compute_80 PTX)")
else()
  message(STATUS "nvcc: not found in ${NEEDLE_NVCC_DIR} (`make setup`); clang-16 PTX only")
endif()
# The fatbin: machine code for A100 (sm_80) and H100/H200 (sm_90), and compute_80 PTX that the
# driver JITs on newer GPUs. --fmad=false as -ffp-contract=off for clang.
set(NEEDLE_FATBIN_FLAGS -fatbin -gencode arch=compute_80,code=[sm_80,compute_80]
    -gencode arch=compute_90,code=sm_90 -O3 -std=c++17 --fmad=false)

function(needle_add_ptx target cu_source ptx_out)
  get_filename_component(src "${cu_source}" ABSOLUTE)
  get_filename_component(out "${ptx_out}" ABSOLUTE)
  set(check_ptx "")
  if(NEEDLE_PTXAS)
    set(check_ptx COMMAND ${NEEDLE_PTXAS} -arch=sm_90 -o /dev/null "${out}.tmp")
  endif()
  get_filename_component(src_dir "${src}" DIRECTORY)
  file(GLOB src_headers CONFIGURE_DEPENDS "${src_dir}/*.h")  # e.g. <op>_launch.h, which the .cu includes
  file(GLOB common_headers CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/kernels/common/*.h")  # cudev.h, half.h
  set(deps "${src}" ${common_headers} ${src_headers})
  add_custom_command(OUTPUT "${out}"
    COMMAND ${NEEDLE_CLANG_CUDA} ${NEEDLE_PTX_FLAGS} -I "${PROJECT_SOURCE_DIR}"
            -S -o "${out}.tmp" "${src}"
    ${check_ptx}
    COMMAND ${CMAKE_COMMAND} -E rename "${out}.tmp" "${out}"
    DEPENDS ${deps}
    COMMENT "PTX ${out}")
  set(outputs "${out}")
  if(NEEDLE_NVCC)
    get_filename_component(dir "${out}" DIRECTORY)
    get_filename_component(stem "${src}" NAME_WE)
    set(fatbin "${dir}/${stem}.fatbin")
    add_custom_command(OUTPUT "${fatbin}"
      COMMAND ${NEEDLE_NVCC} ${NEEDLE_FATBIN_FLAGS} -I "${PROJECT_SOURCE_DIR}"
              -o "${fatbin}.tmp" "${src}"
      COMMAND ${CMAKE_COMMAND} -E rename "${fatbin}.tmp" "${fatbin}"
      DEPENDS ${deps}
      COMMENT "fatbin ${fatbin}")
    list(APPEND outputs "${fatbin}")
  endif()
  add_custom_target(${target} ALL DEPENDS ${outputs})
endfunction()

function(needle_add_emu_test name)
  add_executable(${name} ${ARGN})
  target_compile_features(${name} PRIVATE cxx_std_20)
  target_compile_options(${name} PRIVATE -O2 -Wall -ffp-contract=off)
  target_include_directories(${name} PRIVATE "${PROJECT_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE Threads::Threads m)
  add_test(NAME ${name} COMMAND ${name})
endfunction()

