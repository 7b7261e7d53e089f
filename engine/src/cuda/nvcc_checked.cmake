# Runs nvcc on a module of Ember's Hopper kernels and fails where ptxas reports that it
# changed how their wgmma run: its (C75xx) advisories, such as C7520 (a wgmma under a
# branch made it serialize every wgmma of the kernel, several times slower) and C7519 (it
# injected fences around a wgmma whose accumulators it had to move). They are infos, not
# warnings, so -Werror lets them through; none of Ember's kernels has one.
#
#   cmake -DNVCC=<nvcc> -DNVCC_ARGS=<its arguments, joined with '|'> -P nvcc_checked.cmake
string(REPLACE "|" ";" args "${NVCC_ARGS}")
execute_process(COMMAND "${NVCC}" ${args} RESULT_VARIABLE result OUTPUT_VARIABLE output
                ERROR_VARIABLE output)
if(output)
  message("${output}")
endif()
if(NOT result EQUAL 0)
  message(FATAL_ERROR "nvcc failed (exit ${result})")
endif()
if(output MATCHES "\\(C75[0-9][0-9]\\)")
  message(FATAL_ERROR "ptxas changed how this module's wgmma run (the (C75xx) lines above): "
                      "keep every wgmma out of branches and its accumulators in registers "
                      "it need not move, or build with -DEMBER_CUDA_WERROR=OFF to let it by")
endif()
