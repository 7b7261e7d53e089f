/* Ember's own CUDA kernels: the fatbins embedded in the library (one per .cu file under
 * kernels/, built by nvcc for sm_80 and sm_90 with compute_90 PTX, turned into C arrays
 * by embed_binary.cmake), loaded as modules, and every entry point looked up by name.
 * The Hopper-only modules (conv_wgmma, conv_halo and gemm_wgmma, sm_90a) are optional: a GPU they
 * have no code for leaves them unloaded, and their kernels are not used there.
 *
 * A program loads its own modules in prepare (cuModuleLoadData, in its context) and
 * unloads them in destroy, so nothing about kernels is process-global. */
#ifndef EMBER_SRC_CUDA_CUDA_KERNELS_H_
#define EMBER_SRC_CUDA_CUDA_KERNELS_H_

#include <stdbool.h>

#include "cuda_driver.h"

/* Kernels that exist once per float dtype are consecutive: base + dtype index
 * (ember_cuda_dtype_index). */
typedef enum ember_cuda_kernel_id {
  EMBER_CUDA_KERNEL_UNARY = 0, /* + dtype */
  EMBER_CUDA_KERNEL_BIAS_ACT = 3,
  EMBER_CUDA_KERNEL_BINARY = 6,
  EMBER_CUDA_KERNEL_SOFTMAX_ROWS = 9,
  EMBER_CUDA_KERNEL_SOFTMAX_STRIDED = 12,
  EMBER_CUDA_KERNEL_LAYER_NORM = 15,
  /* Kernels by element size are consecutive too: base + log2(size) (1, 2, 4, 8 bytes). */
  EMBER_CUDA_KERNEL_GATHER = 18, /* + size index */
  EMBER_CUDA_KERNEL_COPY_BYTES = 22,
  EMBER_CUDA_KERNEL_COPY_ROWS = 23,
  EMBER_CUDA_KERNEL_WHERE = 24, /* + size index */
  EMBER_CUDA_KERNEL_CAST = 28,
  EMBER_CUDA_KERNEL_EMBEDDING_2 = 29,
  EMBER_CUDA_KERNEL_EMBEDDING_4 = 30,
  EMBER_CUDA_KERNEL_REDUCE_THREAD = 31, /* + dtype */
  EMBER_CUDA_KERNEL_REDUCE_BLOCK = 34,
  EMBER_CUDA_KERNEL_SDPA = 37,
  EMBER_CUDA_KERNEL_CONV2D = 40,
  EMBER_CUDA_KERNEL_POOL2D = 43,
  EMBER_CUDA_KERNEL_IM2COL = 46,
  EMBER_CUDA_KERNEL_SDPA_SOFTMAX = 49,
  EMBER_CUDA_KERNEL_GEMV = 52,
  /* Tensor-core kernels exist for float16 and bfloat16 only: base + dtype index - 1. */
  EMBER_CUDA_KERNEL_SDPA_FLASH = 55,
  EMBER_CUDA_KERNEL_CONV_IGEMM = 57,
  EMBER_CUDA_KERNEL_NHWC_PACK_2 = 59,
  /* sm_90a only (conv_wgmma), by channel tile (64, 128); + dtype index - 1 */
  EMBER_CUDA_KERNEL_CONV_WGMMA_64 = 60,
  EMBER_CUDA_KERNEL_CONV_WGMMA_128 = 62,
  EMBER_CUDA_KERNEL_IM2COL_NHWC_2 = 64,
  /* sm_90a only (gemm_wgmma); + dtype index - 1 */
  EMBER_CUDA_KERNEL_GEMM_WGMMA = 65,
  EMBER_CUDA_KERNEL_CONV_IGEMM_WEIGHTS_3 = 67,
  EMBER_CUDA_KERNEL_SPACE_TO_DEPTH_PACK = 68,
  /* sm_90a only (conv_halo), the streaming form by strip width (EMBER_K_CONV_HALO_WIDTHS,
   * index w): + 2·w + dtype index - 1 */
  EMBER_CUDA_KERNEL_CONV_HALO = 69,
  EMBER_CUDA_KERNEL_MAX_POOL2D_NHWC = 81, /* + dtype */
  /* gemv's tensor-core form (9 to 64 rows); + dtype index - 1 */
  EMBER_CUDA_KERNEL_GEMV_MMA = 84,
  /* sm_90a only (conv_halo), the resident-weights form by strip width
   * (EMBER_K_CONV_HALO_UNITS_WIDTHS, index w) and halo row (64 channels, or 16: c16 1):
   * + 4·w + 2·c16 + dtype index - 1 */
  EMBER_CUDA_KERNEL_CONV_HALO_UNITS = 86,
  /* sm_90a only (gemm_wgmma), the narrow GEMM by R = 16 << r and B K tiles a stage
   * (kernel_params.h ember_k_gemm_narrow_params): + 2·(4·r + B - 1) + dtype index - 1 */
  EMBER_CUDA_KERNEL_GEMM_NARROW = 94,
  /* sm_90a only (gemm_wgmma), gemm_wgmma's tiles of EMBER_K_GEMM_WGMMA_BN_SMALL columns;
   * + dtype index - 1 */
  EMBER_CUDA_KERNEL_GEMM_WGMMA_SMALL = 126,
  /* sm_90a only (conv_wgmma), the sum of a conv's splits over K; + dtype index - 1 */
  EMBER_CUDA_KERNEL_CONV_SPLIT_SUM = 128,
  /* sm_90a only (gemm_wgmma), LINEARs one after another as one kernel; + dtype index - 1 */
  EMBER_CUDA_KERNEL_GEMM_CHAIN = 130,
  EMBER_CUDA_KERNEL_COUNT = 132,
} ember_cuda_kernel_id;

#define EMBER_CUDA_MODULE_COUNT 15

typedef struct ember_cuda_kernels {
  CUmodule modules[EMBER_CUDA_MODULE_COUNT];
  CUfunction functions[EMBER_CUDA_KERNEL_COUNT];
  bool conv_igemm; /* the implicit-GEMM conv kernels got their shared memory */
  bool conv_wgmma; /* their wgmma variant loaded (compute capability 9.0) and got its own */
  bool conv_halo;  /* the stride-1 halo conv on wgmma and the TMA loaded and got its shared
                      memory (compute capability 9.0) */
  bool gemm_wgmma; /* the LINEAR + activation kernel on wgmma and the TMA loaded and got its
                      shared memory (compute capability 9.0) */
  bool gemm_narrow; /* the narrow GEMM kernels got their shared memory too */
  bool gemm_chain;  /* and the chain kernel its */
} ember_cuda_kernels;

/* Loads every module into the current context and resolves every kernel. On error
 * nothing stays loaded. A device the fatbins have no code for gives EMBER_UNAVAILABLE. */
ember_status* ember_cuda_kernels_load(const ember_cuda_driver* driver,
                                      ember_cuda_kernels* out_kernels);

/* Unloads what ember_cuda_kernels_load loaded (in the current context); zeroes it. */
void ember_cuda_kernels_unload(const ember_cuda_driver* driver, ember_cuda_kernels* kernels);

/* Whether the embedded fatbin of `module` (its .cu file's name under kernels/) defines a
 * kernel called `kernel`, read from the image's bytes (its cubins' symbol names): no GPU
 * needed. */
bool ember_cuda_fatbin_defines(const char* module, const char* kernel);

/* The first kernel the table in cuda_kernels.c names that its module's fatbin does not
 * define, or NULL: what cuModuleGetFunction would refuse on a GPU, found on any machine
 * (the halo kernels' widths, for one, are listed in kernel_params.h, in that table and in
 * conv_halo.cu's instantiations, which must agree). */
const char* ember_cuda_kernels_first_undefined(void);

/* 0, 1, 2, 3 for elements of 1, 2, 4, 8 bytes. */
static inline uint32_t ember_cuda_size_index(size_t element_size) {
  return element_size == 8 ? 3u : element_size == 4 ? 2u : element_size == 2 ? 1u : 0u;
}

/* 0 float32, 1 float16, 2 bfloat16. Only called with a float dtype (verified plans). */
static inline uint32_t ember_cuda_dtype_index(ember_dtype dtype) {
  return dtype == EMBER_DTYPE_FLOAT16 ? 1u : dtype == EMBER_DTYPE_BFLOAT16 ? 2u : 0u;
}

/* 0 float16, 1 bfloat16: the tensor-core kernels (only called with one of the two). */
static inline uint32_t ember_cuda_half_index(ember_dtype dtype) {
  return dtype == EMBER_DTYPE_BFLOAT16 ? 1u : 0u;
}

#endif /* EMBER_SRC_CUDA_CUDA_KERNELS_H_ */
