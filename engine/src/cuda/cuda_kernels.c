/* Loading the embedded kernel fatbins (cuda_kernels.h). */
#include "cuda_kernels.h"

#include "kernel_params.h"

#include <stdio.h>
#include <string.h>

/* Defined by the C files that embed_binary.cmake generates. */
#define EMBER_CUDA_FATBINS(X) \
  X(elementwise)              \
  X(binary)                   \
  X(softmax)                  \
  X(layer_norm)               \
  X(layout)                   \
  X(select_cast)              \
  X(embedding)                \
  X(reduce)                   \
  X(attention)                \
  X(conv_pool)                \
  X(gemv)                     \
  X(conv_igemm)               \
  X(conv_wgmma)               \
  X(conv_halo)                \
  X(gemm_wgmma)

#define EMBER_CUDA_FATBIN_DECLARE(name)                 \
  extern const unsigned char ember_fatbin_##name[];     \
  extern const size_t ember_fatbin_##name##_size;
EMBER_CUDA_FATBINS(EMBER_CUDA_FATBIN_DECLARE)
#undef EMBER_CUDA_FATBIN_DECLARE

enum {
#define EMBER_CUDA_FATBIN_INDEX(name) EMBER_CUDA_MODULE_##name,
  EMBER_CUDA_FATBINS(EMBER_CUDA_FATBIN_INDEX)
#undef EMBER_CUDA_FATBIN_INDEX
  EMBER_CUDA_MODULE_END
};
_Static_assert(EMBER_CUDA_MODULE_END == EMBER_CUDA_MODULE_COUNT, "module count");

static const struct {
  const char* name;
  const unsigned char* image;
  const size_t* size;
} fatbins[EMBER_CUDA_MODULE_COUNT] = {
#define EMBER_CUDA_FATBIN_ENTRY(name) {#name, ember_fatbin_##name, &ember_fatbin_##name##_size},
    EMBER_CUDA_FATBINS(EMBER_CUDA_FATBIN_ENTRY)
#undef EMBER_CUDA_FATBIN_ENTRY
};

/* Built for sm_90a alone (cuda.cmake's EMBER_CUDA_SM90A_ARCHS): other GPUs have no code in
 * it, and run what it holds on the other kernels. */
static bool module_is_optional(int m) {
  return m == EMBER_CUDA_MODULE_conv_wgmma || m == EMBER_CUDA_MODULE_conv_halo ||
         m == EMBER_CUDA_MODULE_gemm_wgmma;
}

#define PER_DTYPE(id, module, stem)                   \
  {id + 0, EMBER_CUDA_MODULE_##module, stem "_f32"},  \
  {id + 1, EMBER_CUDA_MODULE_##module, stem "_f16"},  \
  {id + 2, EMBER_CUDA_MODULE_##module, stem "_bf16"}

#define PER_HALF(id, module, stem)                   \
  {id + 0, EMBER_CUDA_MODULE_##module, stem "_f16"},  \
  {id + 1, EMBER_CUDA_MODULE_##module, stem "_bf16"}

#define PER_SIZE(id, module, stem)                   \
  {id + 0, EMBER_CUDA_MODULE_##module, stem "_1"},   \
  {id + 1, EMBER_CUDA_MODULE_##module, stem "_2"},   \
  {id + 2, EMBER_CUDA_MODULE_##module, stem "_4"},   \
  {id + 3, EMBER_CUDA_MODULE_##module, stem "_8"}

static const struct {
  int id;
  int module;
  const char* name;
} kernel_names[EMBER_CUDA_KERNEL_COUNT] = {
    PER_DTYPE(EMBER_CUDA_KERNEL_UNARY, elementwise, "ember_unary"),
    PER_DTYPE(EMBER_CUDA_KERNEL_BIAS_ACT, elementwise, "ember_bias_act"),
    PER_DTYPE(EMBER_CUDA_KERNEL_BINARY, binary, "ember_binary"),
    PER_DTYPE(EMBER_CUDA_KERNEL_SOFTMAX_ROWS, softmax, "ember_softmax_rows"),
    PER_DTYPE(EMBER_CUDA_KERNEL_SOFTMAX_STRIDED, softmax, "ember_softmax_strided"),
    PER_DTYPE(EMBER_CUDA_KERNEL_LAYER_NORM, layer_norm, "ember_layer_norm"),
    PER_SIZE(EMBER_CUDA_KERNEL_GATHER, layout, "ember_gather"),
    {EMBER_CUDA_KERNEL_COPY_BYTES, EMBER_CUDA_MODULE_layout, "ember_copy_bytes"},
    {EMBER_CUDA_KERNEL_COPY_ROWS, EMBER_CUDA_MODULE_layout, "ember_copy_rows"},
    PER_SIZE(EMBER_CUDA_KERNEL_WHERE, select_cast, "ember_where"),
    {EMBER_CUDA_KERNEL_CAST, EMBER_CUDA_MODULE_select_cast, "ember_cast"},
    {EMBER_CUDA_KERNEL_EMBEDDING_2, EMBER_CUDA_MODULE_embedding, "ember_embedding_2"},
    {EMBER_CUDA_KERNEL_EMBEDDING_4, EMBER_CUDA_MODULE_embedding, "ember_embedding_4"},
    PER_DTYPE(EMBER_CUDA_KERNEL_REDUCE_THREAD, reduce, "ember_reduce_thread"),
    PER_DTYPE(EMBER_CUDA_KERNEL_REDUCE_BLOCK, reduce, "ember_reduce_block"),
    PER_DTYPE(EMBER_CUDA_KERNEL_SDPA, attention, "ember_sdpa"),
    PER_DTYPE(EMBER_CUDA_KERNEL_CONV2D, conv_pool, "ember_conv2d"),
    PER_DTYPE(EMBER_CUDA_KERNEL_POOL2D, conv_pool, "ember_pool2d"),
    PER_DTYPE(EMBER_CUDA_KERNEL_MAX_POOL2D_NHWC, conv_pool, "ember_max_pool2d_nhwc"),
    PER_DTYPE(EMBER_CUDA_KERNEL_IM2COL, conv_pool, "ember_im2col"),
    PER_DTYPE(EMBER_CUDA_KERNEL_SDPA_SOFTMAX, attention, "ember_sdpa_softmax"),
    PER_DTYPE(EMBER_CUDA_KERNEL_GEMV, gemv, "ember_gemv"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMV_MMA, gemv, "ember_gemv_mma"),
    PER_HALF(EMBER_CUDA_KERNEL_SDPA_FLASH, attention, "ember_sdpa_flash"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_IGEMM, conv_igemm, "ember_conv_igemm"),
    {EMBER_CUDA_KERNEL_NHWC_PACK_2, EMBER_CUDA_MODULE_conv_igemm, "ember_nhwc_pack_2"},
    {EMBER_CUDA_KERNEL_IM2COL_NHWC_2, EMBER_CUDA_MODULE_conv_igemm, "ember_im2col_nhwc_2"},
    {EMBER_CUDA_KERNEL_CONV_IGEMM_WEIGHTS_3, EMBER_CUDA_MODULE_conv_igemm,
     "ember_conv_igemm_weights_3"},
    {EMBER_CUDA_KERNEL_SPACE_TO_DEPTH_PACK, EMBER_CUDA_MODULE_conv_igemm,
     "ember_space_to_depth_pack"},
    PER_HALF(EMBER_CUDA_KERNEL_CONV_WGMMA_64, conv_wgmma, "ember_conv_wgmma64"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_WGMMA_128, conv_wgmma, "ember_conv_wgmma128"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_WGMMA, gemm_wgmma, "ember_gemm_wgmma"),
    /* EMBER_K_CONV_HALO_WIDTHS, in order */
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO + 0, conv_halo, "ember_conv_halo120"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO + 2, conv_halo, "ember_conv_halo128"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO + 4, conv_halo, "ember_conv_halo144"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO + 6, conv_halo, "ember_conv_halo208"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO + 8, conv_halo, "ember_conv_halo216"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO + 10, conv_halo, "ember_conv_halo224"),
    /* EMBER_K_CONV_HALO_UNITS_WIDTHS, in order */
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO_UNITS + 0, conv_halo, "ember_conv_halo_units232"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO_UNITS + 2, conv_halo, "ember_conv_halo_units232_c16"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO_UNITS + 4, conv_halo, "ember_conv_halo_units256"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_HALO_UNITS + 6, conv_halo, "ember_conv_halo_units256_c16"),
    /* R = 16, 32, 64, 128; B = 1..EMBER_K_GEMM_NARROW_MAX_BOXES */
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 0, gemm_wgmma, "ember_gemm_narrow16_1"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 2, gemm_wgmma, "ember_gemm_narrow16_2"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 4, gemm_wgmma, "ember_gemm_narrow16_3"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 6, gemm_wgmma, "ember_gemm_narrow16_4"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 8, gemm_wgmma, "ember_gemm_narrow32_1"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 10, gemm_wgmma, "ember_gemm_narrow32_2"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 12, gemm_wgmma, "ember_gemm_narrow32_3"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 14, gemm_wgmma, "ember_gemm_narrow32_4"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 16, gemm_wgmma, "ember_gemm_narrow64_1"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 18, gemm_wgmma, "ember_gemm_narrow64_2"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 20, gemm_wgmma, "ember_gemm_narrow64_3"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 22, gemm_wgmma, "ember_gemm_narrow64_4"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 24, gemm_wgmma, "ember_gemm_narrow128_1"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 26, gemm_wgmma, "ember_gemm_narrow128_2"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 28, gemm_wgmma, "ember_gemm_narrow128_3"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_NARROW + 30, gemm_wgmma, "ember_gemm_narrow128_4"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_WGMMA_SMALL, gemm_wgmma, "ember_gemm_wgmma192"),
    PER_HALF(EMBER_CUDA_KERNEL_CONV_SPLIT_SUM, conv_wgmma, "ember_conv_split_sum"),
    PER_HALF(EMBER_CUDA_KERNEL_GEMM_CHAIN, gemm_wgmma, "ember_gemm_chain"),
};
#undef PER_DTYPE
#undef PER_HALF
#undef PER_SIZE

/* Whether image[0, size) holds `name` as a whole string: a NUL after it, and before it a
 * NUL (the string table of a cubin's symbols) or a '.' (a section named for the kernel). */
static bool image_has_name(const unsigned char* image, size_t size, const char* name) {
  const size_t length = strlen(name);
  for (size_t at = 1; at + length < size; ++at) {
    if (image[at + length] == 0 && (image[at - 1] == 0 || image[at - 1] == '.') &&
        memcmp(image + at, name, length) == 0) {
      return true;
    }
  }
  return false;
}

bool ember_cuda_fatbin_defines(const char* module, const char* kernel) {
  for (int m = 0; m < EMBER_CUDA_MODULE_COUNT; ++m) {
    if (strcmp(fatbins[m].name, module) == 0) {
      return image_has_name(fatbins[m].image, *fatbins[m].size, kernel);
    }
  }
  return false;
}

const char* ember_cuda_kernels_first_undefined(void) {
  for (int k = 0; k < EMBER_CUDA_KERNEL_COUNT; ++k) {
    const int m = kernel_names[k].module;
    if (!image_has_name(fatbins[m].image, *fatbins[m].size, kernel_names[k].name)) {
      return kernel_names[k].name;
    }
  }
  return NULL;
}

/* Lets kernels first .. first + count - 1 launch with `bytes` of dynamic shared memory,
 * past the 48 KB a launch gets unasked; false when the GPU cannot give a block that much. */
static bool allow_dynamic_shared(const ember_cuda_driver* driver, const ember_cuda_kernels* kernels,
                                 int first, int count, int bytes) {
  for (int k = 0; k < count; ++k) {
    if (driver->cuFuncSetAttribute(kernels->functions[first + k],
                                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   bytes) != CUDA_SUCCESS) {
      return false;
    }
  }
  return true;
}

ember_status* ember_cuda_kernels_load(const ember_cuda_driver* driver,
                                      ember_cuda_kernels* out_kernels) {
  memset(out_kernels, 0, sizeof *out_kernels);
  ember_status* status = NULL;
  char call[128];
  for (int m = 0; m < EMBER_CUDA_MODULE_COUNT && status == NULL; ++m) {
    CUresult result = driver->cuModuleLoadData(&out_kernels->modules[m], fatbins[m].image);
    if (result == CUDA_ERROR_NO_BINARY_FOR_GPU && module_is_optional(m)) {
      out_kernels->modules[m] = NULL;
      continue;
    }
    if (result != CUDA_SUCCESS) {
      out_kernels->modules[m] = NULL;
      snprintf(call, sizeof call, "cuModuleLoadData(%s kernels; built for sm_80, sm_90 and "
               "compute_90 PTX)", fatbins[m].name);
      status = ember_cuda_status(driver, result, call);
    }
  }
  for (int k = 0; k < EMBER_CUDA_KERNEL_COUNT && status == NULL; ++k) {
    const int id = kernel_names[k].id;
    if (out_kernels->modules[kernel_names[k].module] == NULL) continue; /* optional, absent */
    CUresult result = driver->cuModuleGetFunction(
        &out_kernels->functions[id], out_kernels->modules[kernel_names[k].module],
        kernel_names[k].name);
    if (result != CUDA_SUCCESS) {
      snprintf(call, sizeof call, "cuModuleGetFunction(%s)", kernel_names[k].name);
      status = ember_cuda_status(driver, result, call);
    }
  }
  /* The implicit-GEMM conv's ring of stages is past the 48 KB a launch gets unasked; a
   * GPU that cannot give a block that much (compute capability 8.6 and 8.9 have 99 KB)
   * runs convs the other ways. */
  out_kernels->conv_igemm =
      status == NULL && allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_CONV_IGEMM, 2,
                                             EMBER_K_CONV_IGEMM_SMEM_BYTES(128));
  out_kernels->conv_wgmma =
      out_kernels->conv_igemm && out_kernels->modules[EMBER_CUDA_MODULE_conv_wgmma] != NULL &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_CONV_WGMMA_64, 2,
                           EMBER_K_CONV_WGMMA_SMEM_BYTES(64)) &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_CONV_WGMMA_128, 2,
                           EMBER_K_CONV_WGMMA_SMEM_BYTES(128));
  /* Each halo conv asks what its rings need (cuda_executor.c conv_halo_plan_of), at most
   * this. */
  out_kernels->conv_halo =
      out_kernels->conv_wgmma && out_kernels->modules[EMBER_CUDA_MODULE_conv_halo] != NULL &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_CONV_HALO,
                           2 * EMBER_K_CONV_HALO_WIDTH_COUNT, EMBER_K_CONV_HALO_MAX_SMEM_BYTES) &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_CONV_HALO_UNITS,
                           4 * EMBER_K_CONV_HALO_UNITS_WIDTH_COUNT,
                           EMBER_K_CONV_HALO_MAX_SMEM_BYTES);
  out_kernels->gemm_wgmma =
      status == NULL && out_kernels->modules[EMBER_CUDA_MODULE_gemm_wgmma] != NULL &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_GEMM_WGMMA, 2,
                           EMBER_K_GEMM_WGMMA_SMEM_BYTES) &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_GEMM_WGMMA_SMALL, 2,
                           EMBER_K_GEMM_WGMMA_SMEM_BYTES);
  out_kernels->gemm_narrow =
      out_kernels->gemm_wgmma &&
      allow_dynamic_shared(driver, out_kernels, EMBER_CUDA_KERNEL_GEMM_NARROW,
                           2 * EMBER_K_GEMM_NARROW_ROWS_COUNT * EMBER_K_GEMM_NARROW_MAX_BOXES,
                           EMBER_K_GEMM_NARROW_SMEM_BYTES);
  out_kernels->gemm_chain =
      out_kernels->gemm_wgmma && allow_dynamic_shared(driver, out_kernels,
                                                      EMBER_CUDA_KERNEL_GEMM_CHAIN, 2,
                                                      EMBER_K_GEMM_CHAIN_SMEM_BYTES);
  if (status != NULL) ember_cuda_kernels_unload(driver, out_kernels);
  return status;
}

void ember_cuda_kernels_unload(const ember_cuda_driver* driver, ember_cuda_kernels* kernels) {
  for (int m = 0; m < EMBER_CUDA_MODULE_COUNT; ++m) {
    if (kernels->modules[m] != NULL) driver->cuModuleUnload(kernels->modules[m]);
  }
  memset(kernels, 0, sizeof *kernels);
}
