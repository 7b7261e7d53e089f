/* Proves that engine/src/cuda/cublaslt_api.h, written from NVIDIA's documentation, says
 * what NVIDIA's own cublasLt.h says, for everything Ember uses:
 *
 *   - every function is declared twice in this translation unit, by cublasLt.h and by
 *     cublaslt_api.h; C rejects two declarations of one function with different types;
 *   - every enumerator's value is compared by a static assertion;
 *   - the two structs whose layout Ember relies on (cublasLtMatmulAlgo_t,
 *     cublasLtMatmulHeuristicResult_t) are compared in size and field offsets.
 *
 * So this file compiling is the check; running it prints which header it was. Built
 * only where cublasLt.h is available (tests/cuda/CMakeLists.txt). */
#include <cublasLt.h>
#include <stddef.h>
#include <stdio.h>

#define EMBER_CUBLASLT_CHECK_AGAINST_NVIDIA_HEADER 1
#include "cublaslt_api.h"

#define EMBER_CHECK_VALUE(name, value) \
  _Static_assert((long long)(name) == (long long)(value), #name " differs from cublasLt.h");
EMBER_CUBLAS_STATUS_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLAS_COMPUTE_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLAS_OPERATION_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLASLT_MATRIX_LAYOUT_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLASLT_MATMUL_DESC_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLASLT_EPILOGUE_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLASLT_PREFERENCE_VALUES(EMBER_CHECK_VALUE)
EMBER_CUBLASLT_POINTER_MODE_VALUES(EMBER_CHECK_VALUE)

typedef struct EMBER_CUBLASLT_MATMUL_ALGO_BODY ember_algo_layout;
_Static_assert(sizeof(ember_algo_layout) == sizeof(cublasLtMatmulAlgo_t), "algo size");

typedef struct EMBER_CUBLASLT_HEURISTIC_RESULT_BODY ember_heuristic_layout;
#define EMBER_CHECK_FIELD(field)                                                     \
  _Static_assert(offsetof(ember_heuristic_layout, field) ==                          \
                     offsetof(cublasLtMatmulHeuristicResult_t, field),               \
                 "cublasLtMatmulHeuristicResult_t." #field " offset");              \
  _Static_assert(sizeof(((ember_heuristic_layout*)0)->field) ==                      \
                     sizeof(((cublasLtMatmulHeuristicResult_t*)0)->field),           \
                 "cublasLtMatmulHeuristicResult_t." #field " size");
EMBER_CHECK_FIELD(algo)
EMBER_CHECK_FIELD(workspaceSize)
EMBER_CHECK_FIELD(state)
EMBER_CHECK_FIELD(wavesCount)
EMBER_CHECK_FIELD(reserved)
_Static_assert(sizeof(ember_heuristic_layout) == sizeof(cublasLtMatmulHeuristicResult_t),
               "heuristic result size");

int main(void) {
  printf("cublaslt_api.h agrees with cublasLt.h (cuBLAS %d.%d.%d)\n", CUBLAS_VER_MAJOR,
         CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
  return 0;
}
