/* cuBLASLt, loaded at run time by its soname.
 *
 * Ember carries no copy of cuBLASLt and links none: "libcublasLt.so.13" is dlopen'ed on
 * first use. glibc's dlopen searches the DT_RUNPATH of the object that calls it, so the
 * library's RUNPATH entry $ORIGIN/../../nvidia/cu13/lib finds the copy that NVIDIA's pip
 * package nvidia-cublas installs beside ours in site-packages, with no LD_LIBRARY_PATH;
 * a system-wide copy (ldconfig, LD_LIBRARY_PATH) is found the usual way.
 *
 * Loaded once per process under pthread_once, like the driver (cuda_driver.h), and only
 * when a program has a GEMM that runs on it: the dlopen alone takes ~60 ms, which a program
 * of Ember's own kernels (gemv included) would pay for nothing. */
#ifndef EMBER_SRC_CUDA_CUBLASLT_LIBRARY_H_
#define EMBER_SRC_CUDA_CUBLASLT_LIBRARY_H_

#include <stdbool.h>

#include "cublaslt_api.h"
#include "status.h"

/* The soname Ember's CUDA 13 build loads, and the pip package that provides it. */
#define EMBER_CUBLASLT_SONAME "libcublasLt.so.13"
#define EMBER_CUBLASLT_PIP_PACKAGE "nvidia-cublas"

#define EMBER_CUBLASLT_SYMBOLS(X)          \
  X(cublasLtCreate)                        \
  X(cublasLtDestroy)                       \
  X(cublasLtGetVersion)                    \
  X(cublasLtMatmulDescCreate)              \
  X(cublasLtMatmulDescDestroy)             \
  X(cublasLtMatmulDescSetAttribute)        \
  X(cublasLtMatrixLayoutCreate)            \
  X(cublasLtMatrixLayoutDestroy)           \
  X(cublasLtMatrixLayoutSetAttribute)      \
  X(cublasLtMatmulPreferenceCreate)        \
  X(cublasLtMatmulPreferenceDestroy)       \
  X(cublasLtMatmulPreferenceSetAttribute)  \
  X(cublasLtMatmulAlgoGetHeuristic)        \
  X(cublasLtMatmul)

/* Looked up too, but a library without them still serves. */
#define EMBER_CUBLASLT_OPTIONAL_SYMBOLS(X) \
  X(cublasLtGetStatusName)                 \
  X(cublasLtGetStatusString)

typedef struct ember_cublaslt_library {
  size_t version; /* cublasLtGetVersion(), e.g. 130100 */
#define EMBER_CUBLASLT_MEMBER(name) __typeof__(&name) name;
  EMBER_CUBLASLT_SYMBOLS(EMBER_CUBLASLT_MEMBER)
  EMBER_CUBLASLT_OPTIONAL_SYMBOLS(EMBER_CUBLASLT_MEMBER)
#undef EMBER_CUBLASLT_MEMBER
} ember_cublaslt_library;

/* The process's cuBLASLt table, loaded on first call. A missing library is
 * EMBER_UNAVAILABLE with a message naming it and the pip package that provides it. */
ember_status* ember_cublaslt_library_get(const ember_cublaslt_library** out_library);

/* Whether this process has tried to load cuBLASLt (ember_cublaslt_library_get was
 * called), whether or not the load succeeded. For tests: a program without GEMMs must
 * not. */
bool ember_cublaslt_library_attempted(void);

/* An ember_status (EMBER_OUT_OF_MEMORY for CUBLAS_STATUS_ALLOC_FAILED, else
 * EMBER_INTERNAL) for a failed cuBLASLt call named by `call`. */
ember_status* ember_cublaslt_status(const ember_cublaslt_library* library,
                                    cublasStatus_t result, const char* call);

#endif /* EMBER_SRC_CUDA_CUBLASLT_LIBRARY_H_ */
