# The CUDA executor, added to `ember_engine` when EMBER_CUDA is ON (included from
# engine/CMakeLists.txt after the target exists).
#
# Nothing here links a CUDA library: the C files call the driver and cuBLASLt through
# tables filled at run time (cuda_driver.c, cublaslt_library.c), so they need only
# headers (cuda.h, library_types.h). The kernels are compiled by nvcc to one fatbin per
# .cu file (SASS for sm_80 and sm_90, PTX for compute_90 so newer GPUs JIT it), and each
# fatbin is embedded as a C array by embed_binary.cmake. CMake's CUDA language is not
# used: it would link cudart, and we want fatbins, not objects.
#
#   EMBER_CUDA             default ON when nvcc and cuda.h are found
#   EMBER_NVCC             the nvcc to use
#   EMBER_CUDA_INCLUDE_DIR where cuda.h is
#   EMBER_CUDA_ARCHS       the -gencode list
#   EMBER_CUDA_LINEINFO    add -lineinfo (source lines in compute-sanitizer reports)

set(_ember_cuda_hints "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}" /usr/local/cuda)
find_program(EMBER_NVCC nvcc HINTS ${_ember_cuda_hints} PATH_SUFFIXES bin
             DOC "nvcc for Ember's kernels")
set(_ember_nvcc_include_hint "")
if(EMBER_NVCC)
  # Resolve wrappers/symlinks (e.g. /usr/local/bin/nvcc -> the toolkit) loosely: the
  # toolkit's include dir is ../include from its bin dir.
  get_filename_component(_ember_nvcc_dir "${EMBER_NVCC}" DIRECTORY)
  set(_ember_nvcc_include_hint "${_ember_nvcc_dir}/../include")
endif()
find_path(EMBER_CUDA_INCLUDE_DIR cuda.h
          HINTS ${_ember_nvcc_include_hint} ${_ember_cuda_hints}
          PATH_SUFFIXES include DOC "directory holding cuda.h")

if(EMBER_NVCC AND EMBER_CUDA_INCLUDE_DIR)
  set(_ember_cuda_default ON)
else()
  set(_ember_cuda_default OFF)
endif()
option(EMBER_CUDA "Build the CUDA executor (needs nvcc and cuda.h at build time only)"
       ${_ember_cuda_default})
set(EMBER_CUDA_ARCHS
    "-gencode=arch=compute_80,code=sm_80;-gencode=arch=compute_90,code=sm_90;-gencode=arch=compute_90,code=compute_90"
    CACHE STRING "nvcc -gencode options for Ember's kernels")
# Kernels on instructions of one target only (wgmma: sm_90a), in modules that a GPU of
# another compute capability does not load (cuda_kernels.c).
set(EMBER_CUDA_SM90A_ARCHS "-gencode=arch=compute_90a,code=sm_90a"
    CACHE STRING "nvcc -gencode options for Ember's Hopper-only kernels")
option(EMBER_CUDA_LINEINFO "Compile Ember's kernels with -lineinfo" OFF)
option(EMBER_CUDA_WERROR "Treat nvcc and host-compiler warnings in kernels as errors" ON)

if(NOT EMBER_CUDA)
  message(STATUS "Ember: CUDA executor OFF (nvcc: ${EMBER_NVCC}, cuda.h: ${EMBER_CUDA_INCLUDE_DIR})")
  return()
endif()
if(NOT EMBER_NVCC OR NOT EMBER_CUDA_INCLUDE_DIR)
  message(FATAL_ERROR "EMBER_CUDA is ON but nvcc (${EMBER_NVCC}) or cuda.h "
                      "(${EMBER_CUDA_INCLUDE_DIR}) was not found; set EMBER_NVCC and "
                      "EMBER_CUDA_INCLUDE_DIR, or -DEMBER_CUDA=OFF.")
endif()
message(STATUS "Ember: CUDA executor ON (nvcc ${EMBER_NVCC}, cuda.h in ${EMBER_CUDA_INCLUDE_DIR})")

set(_ember_cuda_dir "${CMAKE_CURRENT_LIST_DIR}")
set(_ember_kernel_dir "${_ember_cuda_dir}/kernels")
set(_ember_fatbin_dir "${CMAKE_CURRENT_BINARY_DIR}/ember_fatbins")
file(MAKE_DIRECTORY "${_ember_fatbin_dir}")

set(_ember_nvcc_flags -std=c++17 -O3)
if(EMBER_CUDA_WERROR)
  list(APPEND _ember_nvcc_flags -Werror all-warnings -Xcompiler=-Wall,-Wextra,-Werror)
endif()
if(EMBER_CUDA_LINEINFO)
  list(APPEND _ember_nvcc_flags -lineinfo)
endif()

# One module per .cu file; the names must match EMBER_CUDA_FATBINS in cuda_kernels.c.
set(_ember_kernel_names elementwise binary softmax layer_norm layout select_cast embedding reduce
    attention conv_pool gemv conv_igemm conv_wgmma conv_halo gemm_wgmma)
set(_ember_sm90a_kernel_names conv_wgmma conv_halo gemm_wgmma)
set(_ember_kernel_headers "${_ember_kernel_dir}/kernel_common.cuh"
    "${_ember_kernel_dir}/tensor_core.cuh"
    "${_ember_kernel_dir}/conv_igemm_tile.cuh"
    "${_ember_kernel_dir}/wgmma.cuh"
    "${_ember_kernel_dir}/pool_max.cuh"
    "${_ember_cuda_dir}/kernel_params.h")
set(_ember_fatbin_sources "")
foreach(name IN LISTS _ember_kernel_names)
  set(cu "${_ember_kernel_dir}/${name}.cu")
  set(fatbin "${_ember_fatbin_dir}/${name}.fatbin")
  set(c_file "${_ember_fatbin_dir}/${name}_fatbin.c")
  if(name IN_LIST _ember_sm90a_kernel_names)
    set(archs ${EMBER_CUDA_SM90A_ARCHS})
  else()
    set(archs ${EMBER_CUDA_ARCHS})
  endif()
  set(nvcc_args -fatbin ${_ember_nvcc_flags} ${archs} -o "${fatbin}" "${cu}")
  set(nvcc_command "${EMBER_NVCC}" ${nvcc_args})
  if(EMBER_CUDA_WERROR AND name IN_LIST _ember_sm90a_kernel_names)
    # ptxas's wgmma advisories fail the build too (nvcc_checked.cmake says why).
    list(JOIN nvcc_args "|" joined_args)
    set(nvcc_command "${CMAKE_COMMAND}" "-DNVCC=${EMBER_NVCC}" "-DNVCC_ARGS=${joined_args}"
                     -P "${_ember_cuda_dir}/nvcc_checked.cmake")
  endif()
  add_custom_command(
    OUTPUT "${fatbin}"
    COMMAND ${nvcc_command}
    DEPENDS "${cu}" ${_ember_kernel_headers} "${_ember_cuda_dir}/nvcc_checked.cmake"
    COMMENT "nvcc: Ember kernels ${name}.cu -> ${name}.fatbin"
    VERBATIM)
  add_custom_command(
    OUTPUT "${c_file}"
    COMMAND "${CMAKE_COMMAND}" -DINPUT=${fatbin} -DOUTPUT=${c_file}
            -DSYMBOL=ember_fatbin_${name} -P "${_ember_cuda_dir}/embed_binary.cmake"
    DEPENDS "${fatbin}" "${_ember_cuda_dir}/embed_binary.cmake"
    COMMENT "Embedding ${name}.fatbin"
    VERBATIM)
  list(APPEND _ember_fatbin_sources "${c_file}")
endforeach()

target_sources(ember_engine PRIVATE
  "${_ember_cuda_dir}/cublaslt_library.c"
  "${_ember_cuda_dir}/cuda_driver.c"
  "${_ember_cuda_dir}/cuda_executor.c"
  "${_ember_cuda_dir}/cuda_gemm.c"
  "${_ember_cuda_dir}/cuda_kernels.c"
  "${_ember_cuda_dir}/cuda_profile.c"
  ${_ember_fatbin_sources})
# cuda.h as a system header: its own code is not held to the engine's warning flags.
target_include_directories(ember_engine SYSTEM PRIVATE "${EMBER_CUDA_INCLUDE_DIR}")
target_include_directories(ember_engine PRIVATE "${_ember_cuda_dir}")
target_compile_definitions(ember_engine PRIVATE EMBER_HAVE_CUDA=1)
# dlopen/dlsym (libdl is part of libc from glibc 2.34; older ones need -ldl).
target_link_libraries(ember_engine PUBLIC ${CMAKE_DL_LIBS})
