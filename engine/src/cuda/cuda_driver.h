/* The CUDA driver API, loaded at run time.
 *
 * Ember links no CUDA library (DESIGN.md contract 8): libcuda.so.1 is dlopen'ed on first
 * use and every entry point is fetched through the driver's own cuGetProcAddress, asking
 * for the ABI of the cuda.h we compile against (CUDA_VERSION). That is how IREE's
 * cuda_dynamic_symbols works, and it is the lookup NVIDIA documents: a plain dlsym of
 * "cuMemAlloc" would find the CUDA 3.1 ABI, where cuda.h's macros mean cuMemAlloc_v2.
 * The table's members are typed from cuda.h's own prototypes (__typeof__), so a call
 * through the table is checked by the compiler exactly like a direct call.
 *
 * The driver is loaded and initialized (cuInit) once per process, under pthread_once; a
 * failure is remembered and reported the same way to every caller. */
#ifndef EMBER_SRC_CUDA_CUDA_DRIVER_H_
#define EMBER_SRC_CUDA_CUDA_DRIVER_H_

#include <cuda.h>

#include "status.h"

/* X(name): every driver entry point Ember calls. The name is cuda.h's public name (the
 * macro that may stand for a _v2 symbol), which is also what cuGetProcAddress takes. */
#define EMBER_CUDA_DRIVER_SYMBOLS(X)        \
  X(cuInit)                                 \
  X(cuDriverGetVersion)                     \
  X(cuGetErrorName)                         \
  X(cuGetErrorString)                       \
  X(cuDeviceGet)                            \
  X(cuDeviceGetCount)                       \
  X(cuDeviceGetAttribute)                   \
  X(cuDeviceGetName)                        \
  X(cuDevicePrimaryCtxRetain)               \
  X(cuDevicePrimaryCtxRelease)              \
  X(cuCtxPushCurrent)                       \
  X(cuCtxPopCurrent)                        \
  X(cuMemAlloc)                             \
  X(cuMemFree)                              \
  X(cuMemGetInfo)                           \
  X(cuMemsetD8Async)                        \
  X(cuMemcpyHtoDAsync)                      \
  X(cuMemcpyDtoHAsync)                      \
  X(cuMemcpyDtoDAsync)                      \
  X(cuPointerGetAttributes)                 \
  X(cuStreamCreate)                         \
  X(cuStreamDestroy)                        \
  X(cuStreamSynchronize)                    \
  X(cuStreamBeginCapture)                   \
  X(cuStreamEndCapture)                     \
  X(cuGraphCreate)                          \
  X(cuGraphDestroy)                         \
  X(cuGraphAddKernelNode)                   \
  X(cuGraphAddChildGraphNode)               \
  X(cuGraphAddDependencies)                 \
  X(cuGraphInstantiateWithFlags)            \
  X(cuGraphExecDestroy)                     \
  X(cuGraphExecKernelNodeSetParams)         \
  X(cuGraphExecChildGraphNodeSetParams)     \
  X(cuGraphLaunch)                          \
  X(cuModuleLoadData)                       \
  X(cuModuleUnload)                         \
  X(cuModuleGetFunction)                    \
  X(cuLaunchKernel)                         \
  X(cuFuncSetAttribute)                     \
  X(cuTensorMapEncodeTiled)                 \
  X(cuEventCreate)                          \
  X(cuEventDestroy)                         \
  X(cuEventRecord)                          \
  X(cuEventSynchronize)                     \
  X(cuEventElapsedTime)

typedef struct ember_cuda_driver {
  int driver_version; /* cuDriverGetVersion, e.g. 13000 */
#define EMBER_CUDA_DRIVER_MEMBER(name) __typeof__(&name) name;
  EMBER_CUDA_DRIVER_SYMBOLS(EMBER_CUDA_DRIVER_MEMBER)
#undef EMBER_CUDA_DRIVER_MEMBER
} ember_cuda_driver;

/* The process's driver table, loaded and cuInit'ed on first call. On failure the status
 * says why (EMBER_UNAVAILABLE: no libcuda.so.1, a driver older than the CUDA version
 * Ember was built for, no device) and *out_driver is NULL. The table lives until the
 * process ends (libcuda is never unloaded). */
ember_status* ember_cuda_driver_get(const ember_cuda_driver** out_driver);

/* An ember_status for a failed driver call `call` (a string naming it, e.g.
 * "cuMemAlloc(arena, 4096 bytes)"): EMBER_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY,
 * EMBER_UNAVAILABLE for errors that mean "this device cannot run Ember" (no binary for
 * the GPU, no device), else EMBER_INTERNAL, with the driver's error name and text. */
ember_status* ember_cuda_status(const ember_cuda_driver* driver, CUresult result,
                                const char* call);

/* Prefixes the message of `status` with "<context>: " (printf-formatted), keeping its
 * code; `status` is consumed. NULL stays NULL, so it can wrap any call. */
ember_status* ember_cuda_annotate(ember_status* status, const char* format, ...)
    EMBER_PRINTF_FORMAT(2, 3);

/* Evaluates a driver call once; on failure returns its ember_status from the enclosing
 * function. `call_text` names the call for the message. */
#define EMBER_CU_RETURN_IF_ERROR(driver, expr, call_text)              \
  do {                                                                 \
    CUresult ember_cu_result_ = (expr);                                \
    if (ember_cu_result_ != CUDA_SUCCESS) {                            \
      return ember_cuda_status((driver), ember_cu_result_, call_text); \
    }                                                                  \
  } while (0)

#endif /* EMBER_SRC_CUDA_CUDA_DRIVER_H_ */
