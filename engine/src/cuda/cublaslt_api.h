/* The part of cuBLASLt's C API that Ember uses, declared here from NVIDIA's documented
 * ABI because cublasLt.h ships only with the CUDA toolkit's math libraries (the
 * nvidia-cublas wheel), not with the compiler; Ember never links the library either
 * (cublaslt_library.c dlopen's it).
 *
 * The names are NVIDIA's, so the code reads like any cuBLASLt code, and so that
 * engine/tests/cuda/cublaslt_header_check.c can include the real cublasLt.h and this
 * file in one translation unit: every function below is then a redeclaration that the
 * compiler checks against NVIDIA's (a different signature does not compile), every
 * constant is compared with a static assertion, and the two structs are compared field
 * by field. Under EMBER_CUBLASLT_CHECK_AGAINST_NVIDIA_HEADER the types and enums below
 * are taken from cublasLt.h and only the checks are emitted.
 *
 * cudaDataType comes from the toolkit's library_types.h (a header of enums only). */
#ifndef EMBER_SRC_CUDA_CUBLASLT_API_H_
#define EMBER_SRC_CUDA_CUBLASLT_API_H_

#include <cuda.h>
#include <library_types.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, value) lists: the enumerators Ember uses, with NVIDIA's values. */
#define EMBER_CUBLAS_STATUS_VALUES(X)     \
  X(CUBLAS_STATUS_SUCCESS, 0)             \
  X(CUBLAS_STATUS_NOT_INITIALIZED, 1)     \
  X(CUBLAS_STATUS_ALLOC_FAILED, 3)        \
  X(CUBLAS_STATUS_INVALID_VALUE, 7)       \
  X(CUBLAS_STATUS_ARCH_MISMATCH, 8)       \
  X(CUBLAS_STATUS_MAPPING_ERROR, 11)      \
  X(CUBLAS_STATUS_EXECUTION_FAILED, 13)   \
  X(CUBLAS_STATUS_INTERNAL_ERROR, 14)     \
  X(CUBLAS_STATUS_NOT_SUPPORTED, 15)      \
  X(CUBLAS_STATUS_LICENSE_ERROR, 16)

#define EMBER_CUBLAS_COMPUTE_VALUES(X) \
  X(CUBLAS_COMPUTE_32F, 68)            \
  X(CUBLAS_COMPUTE_32F_PEDANTIC, 69)

#define EMBER_CUBLAS_OPERATION_VALUES(X) \
  X(CUBLAS_OP_N, 0)                      \
  X(CUBLAS_OP_T, 1)

#define EMBER_CUBLASLT_MATRIX_LAYOUT_VALUES(X)    \
  X(CUBLASLT_MATRIX_LAYOUT_TYPE, 0)               \
  X(CUBLASLT_MATRIX_LAYOUT_ORDER, 1)              \
  X(CUBLASLT_MATRIX_LAYOUT_ROWS, 2)               \
  X(CUBLASLT_MATRIX_LAYOUT_COLS, 3)               \
  X(CUBLASLT_MATRIX_LAYOUT_LD, 4)                 \
  X(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 5)        \
  X(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 6)

#define EMBER_CUBLASLT_MATMUL_DESC_VALUES(X) \
  X(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 0)    \
  X(CUBLASLT_MATMUL_DESC_SCALE_TYPE, 1)      \
  X(CUBLASLT_MATMUL_DESC_POINTER_MODE, 2)    \
  X(CUBLASLT_MATMUL_DESC_TRANSA, 3)          \
  X(CUBLASLT_MATMUL_DESC_TRANSB, 4)          \
  X(CUBLASLT_MATMUL_DESC_TRANSC, 5)          \
  X(CUBLASLT_MATMUL_DESC_EPILOGUE, 7)        \
  X(CUBLASLT_MATMUL_DESC_BIAS_POINTER, 8)    \
  X(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, 10)

#define EMBER_CUBLASLT_EPILOGUE_VALUES(X) \
  X(CUBLASLT_EPILOGUE_DEFAULT, 1)         \
  X(CUBLASLT_EPILOGUE_RELU, 2)            \
  X(CUBLASLT_EPILOGUE_BIAS, 4)            \
  X(CUBLASLT_EPILOGUE_RELU_BIAS, 6)       \
  X(CUBLASLT_EPILOGUE_GELU, 32)           \
  X(CUBLASLT_EPILOGUE_GELU_BIAS, 36)

#define EMBER_CUBLASLT_PREFERENCE_VALUES(X)         \
  X(CUBLASLT_MATMUL_PREF_SEARCH_MODE, 0)            \
  X(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 1)    \
  X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 5)  \
  X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 6)  \
  X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 7)  \
  X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 8)

#define EMBER_CUBLASLT_POINTER_MODE_VALUES(X) X(CUBLASLT_POINTER_MODE_HOST, 0)

/* Struct bodies, shared by the definitions and the layout checks. */
#define EMBER_CUBLASLT_MATMUL_ALGO_BODY \
  {                                     \
    uint64_t data[8];                   \
  }
#define EMBER_CUBLASLT_HEURISTIC_RESULT_BODY \
  {                                          \
    cublasLtMatmulAlgo_t algo;               \
    size_t workspaceSize;                    \
    cublasStatus_t state;                    \
    float wavesCount;                        \
    int reserved[4];                         \
  }

#if !defined(EMBER_CUBLASLT_CHECK_AGAINST_NVIDIA_HEADER)

#define EMBER_CUBLASLT_ENUMERATOR(name, value) name = value,

typedef enum { EMBER_CUBLAS_STATUS_VALUES(EMBER_CUBLASLT_ENUMERATOR) } cublasStatus_t;
typedef enum { EMBER_CUBLAS_COMPUTE_VALUES(EMBER_CUBLASLT_ENUMERATOR) } cublasComputeType_t;
typedef enum { EMBER_CUBLAS_OPERATION_VALUES(EMBER_CUBLASLT_ENUMERATOR) } cublasOperation_t;
typedef enum {
  EMBER_CUBLASLT_MATRIX_LAYOUT_VALUES(EMBER_CUBLASLT_ENUMERATOR)
} cublasLtMatrixLayoutAttribute_t;
typedef enum {
  EMBER_CUBLASLT_MATMUL_DESC_VALUES(EMBER_CUBLASLT_ENUMERATOR)
} cublasLtMatmulDescAttributes_t;
typedef enum { EMBER_CUBLASLT_EPILOGUE_VALUES(EMBER_CUBLASLT_ENUMERATOR) } cublasLtEpilogue_t;
typedef enum {
  EMBER_CUBLASLT_PREFERENCE_VALUES(EMBER_CUBLASLT_ENUMERATOR)
} cublasLtMatmulPreferenceAttributes_t;
typedef enum {
  EMBER_CUBLASLT_POINTER_MODE_VALUES(EMBER_CUBLASLT_ENUMERATOR)
} cublasLtPointerMode_t;

#undef EMBER_CUBLASLT_ENUMERATOR

/* Opaque handles: pointers to structs whose contents only cuBLASLt knows. */
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

typedef struct EMBER_CUBLASLT_MATMUL_ALGO_BODY cublasLtMatmulAlgo_t;
typedef struct EMBER_CUBLASLT_HEURISTIC_RESULT_BODY cublasLtMatmulHeuristicResult_t;

#endif /* !EMBER_CUBLASLT_CHECK_AGAINST_NVIDIA_HEADER */

/* The functions, with NVIDIA's names and signatures. Nothing defines them: they are
 * declared so that __typeof__ can type the table in cublaslt_library.h, and so that the
 * header check compares them with cublasLt.h's. (cudaStream_t is CUstream.) */
cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
size_t cublasLtGetVersion(void);
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t sizeInBytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t sizeInBytes);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
    cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t preference,
    int requestedAlgoCount, cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int* returnAlgoCount);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                              const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                              const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                              void* workspace, size_t workspaceSizeInBytes, CUstream stream);

#endif /* EMBER_SRC_CUDA_CUBLASLT_API_H_ */
