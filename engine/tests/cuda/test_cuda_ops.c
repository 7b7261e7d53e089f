/* The CUDA executor against the CPU reference executor, op by op and program by program
 * (ggml's test-backend-ops is the model): every plan that make_cuda_op_plans.py wrote
 * runs on both executors with the same random inputs, and each output must agree within
 * a normalized mean squared error bound per dtype. Then the binding paths: host inputs
 * and outputs (staged; the copy counters grow by exactly the bytes), device inputs and
 * outputs allocated here with the driver API (used in place; the counters do not move),
 * pointers that change between runs (graph updates), device pointers too little
 * aligned for the GEMMs (staged on the device), and pointers one element off 16-byte
 * alignment (used in place, so the kernels' 16-byte paths must fall back). And GELU's
 * two forms at every 16-bit input against the exact values (run_every16_case).
 *
 * Without an NVIDIA driver, a device, or cuBLASLt, the test still runs every case on the
 * CPU executor (so a plan the verifier refuses, or a CPU kernel that fails, shows up in
 * CI), then prints why and exits with 77, which ctest reports as skipped
 * (SKIP_RETURN_CODE), so CI without a GPU stays green.
 *
 * Integer inputs are floor(uniform(low, high)) (an EMBEDDING case's range is its index
 * range); bool inputs are 0 or 1 at random. Integer and bool outputs must match exactly.
 *
 * Usage: test_cuda_ops DATA_DIR [FILTER]
 *   DATA_DIR/cases.txt and DATA_DIR/<case>.plan; with FILTER, only the cases whose name
 *   contains it (tools/gpu_check.sh runs a subset under compute-sanitizer).
 *   EMBER_TEST_CPU_SHARD=k/n splits the CPU-only run (main says how). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cublaslt_library.h"
#include "cuda_driver.h"
#include "cuda_executor.h"
#include "float_formats.h"
#include "kernel_params.h"
#include "program_internal.h"
#include "test_support.h"

#define SKIP_EXIT_CODE 77

#define COUNT(x) TEST_COUNT(x)
#define EXPECT(cond, ...) TEST_EXPECT(cond, __VA_ARGS__)

static const ember_cuda_driver* g_driver;
static CUcontext g_context;
static int g_sm_count;             /* device 0's SMs */
static bool g_gemm_wgmma_forced;   /* EMBER_CUDA_GEMM_WGMMA=1 */
static bool g_gemm_narrow_forced;  /* EMBER_CUDA_GEMM_NARROW=1 */
static bool g_branches_off;        /* EMBER_CUDA_BRANCHES=0 */
static bool g_gemm_chain;          /* EMBER_CUDA_GEMM_CHAIN=1 (settings.c: 0 by default) */

/* ---- values ------------------------------------------------------------------------- */

static uint64_t g_rng;
static double next_uniform(double low, double high) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return low + (high - low) * (double)(g_rng >> 11) / 9007199254740992.0;
}

static double load_value(const void* data, ember_dtype dtype, size_t i) {
  if (dtype == EMBER_DTYPE_INT64) {
    int64_t v;
    memcpy(&v, (const uint8_t*)data + 8 * i, 8);
    return (double)v;
  }
  if (dtype == EMBER_DTYPE_INT32) {
    int32_t v;
    memcpy(&v, (const uint8_t*)data + 4 * i, 4);
    return v;
  }
  if (dtype == EMBER_DTYPE_BOOL) return ((const uint8_t*)data)[i];
  if (dtype == EMBER_DTYPE_FLOAT32) {
    float v;
    memcpy(&v, (const uint8_t*)data + 4 * i, 4);
    return v;
  }
  uint16_t bits;
  memcpy(&bits, (const uint8_t*)data + 2 * i, 2);
  return dtype == EMBER_DTYPE_FLOAT16 ? ember_f16_to_f32(bits) : ember_bf16_to_f32(bits);
}

static void store_value(void* data, ember_dtype dtype, size_t i, double value) {
  if (dtype == EMBER_DTYPE_INT64) {
    const int64_t v = (int64_t)floor(value);
    memcpy((uint8_t*)data + 8 * i, &v, 8);
    return;
  }
  if (dtype == EMBER_DTYPE_INT32) {
    const int32_t v = (int32_t)floor(value);
    memcpy((uint8_t*)data + 4 * i, &v, 4);
    return;
  }
  if (dtype == EMBER_DTYPE_BOOL) {
    ((uint8_t*)data)[i] = value != 0.0;
    return;
  }
  const float f = (float)value;
  if (dtype == EMBER_DTYPE_FLOAT32) {
    memcpy((uint8_t*)data + 4 * i, &f, 4);
    return;
  }
  const uint16_t bits = dtype == EMBER_DTYPE_FLOAT16 ? ember_f32_to_f16(f) : ember_f32_to_bf16(f);
  memcpy((uint8_t*)data + 2 * i, &bits, 2);
}

/* Normalized mean squared error bound per dtype: about a quarter of an ulp squared, on
 * average over the elements, so a kernel that is off by an ulp here and there passes and
 * one that computes something else does not. */
/* Multiplies the bounds of the case being compared: cases.txt may give a fourth field for
 * a whole program (a decoder block), where float16/bfloat16 roundings compound over many
 * ops; 1 for single ops. */
static double g_nmse_scale = 1.0;

static double nmse_bound(ember_dtype dtype) {
  switch (dtype) {
    case EMBER_DTYPE_FLOAT32: return 1e-10 * g_nmse_scale;
    case EMBER_DTYPE_FLOAT16: return 1e-6 * g_nmse_scale;
    case EMBER_DTYPE_BFLOAT16: return 3e-5 * g_nmse_scale;
    default: return 0.0; /* integers and bools: exact */
  }
}

typedef struct compare_result {
  double nmse;
  double max_abs;
  size_t bad_specials; /* NaN or infinity on one side only, or of another sign */
} compare_result;

static compare_result compare_values(const void* expected, const void* actual,
                                     ember_dtype dtype, size_t count) {
  compare_result r = {0.0, 0.0, 0};
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double e = load_value(expected, dtype, i), a = load_value(actual, dtype, i);
    if (!isfinite(e) || !isfinite(a)) {
      if (!(isnan(e) && isnan(a)) && e != a) ++r.bad_specials;
      continue;
    }
    err += (a - e) * (a - e);
    norm += e * e;
    if (fabs(a - e) > r.max_abs) r.max_abs = fabs(a - e);
  }
  r.nmse = norm > 0.0 ? err / norm : err;
  return r;
}

/* ---- programs ----------------------------------------------------------------------- */

typedef struct buffers {
  size_t count;
  void** data;
  ember_tensor_binding* bindings;
} buffers;

static ember_tensor_binding binding_for(const ember_tensor_info* info, void* data) {
  ember_tensor_binding b;
  memset(&b, 0, sizeof b);
  b.data = data;
  b.nbytes = info->nbytes;
  b.dtype = info->dtype;
  b.rank = info->rank;
  b.dims = info->dims;
  return b;
}

/* Host buffers for a program's inputs (random in [low, high]) or outputs (a pattern). The
 * infos (and so the dims the bindings point at) live in `infos`. */
static buffers host_buffers(const ember_program* program, bool inputs, ember_tensor_info* infos,
                            double low, double high) {
  buffers b;
  b.count = inputs ? ember_program_input_count(program) : ember_program_output_count(program);
  b.data = calloc(b.count + 1, sizeof(void*));
  b.bindings = calloc(b.count + 1, sizeof(ember_tensor_binding));
  for (size_t i = 0; i < b.count; ++i) {
    ember_status* s = inputs ? ember_program_input_info(program, i, &infos[i])
                             : ember_program_output_info(program, i, &infos[i]);
    if (s != NULL) abort();
    b.data[i] = malloc(infos[i].nbytes + 1);
    const size_t n = infos[i].nbytes / ember_dtype_size(infos[i].dtype);
    if (inputs) {
      for (size_t k = 0; k < n; ++k) {
        const double value = infos[i].dtype == EMBER_DTYPE_BOOL ? (next_uniform(0.0, 1.0) < 0.5)
                                                                : next_uniform(low, high);
        store_value(b.data[i], infos[i].dtype, k, value);
      }
    } else {
      memset(b.data[i], 0xA5, infos[i].nbytes + 1);
    }
    b.bindings[i] = binding_for(&infos[i], infos[i].nbytes == 0 ? NULL : b.data[i]);
  }
  return b;
}

static void free_buffers(buffers* b) {
  for (size_t i = 0; i < b->count; ++i) free(b->data[i]);
  free(b->data);
  free(b->bindings);
}

/* Creates the program from a copy of the plan that is scribbled over and freed right
 * after: the CUDA executor reads the constants from the caller's bytes during create
 * only, and every case checks that nothing reads them later. */
static ember_status* create(const uint8_t* plan, size_t size, ember_executor_kind kind,
                            ember_program** out) {
  ember_program_options options;
  ember_program_options_initialize(&options);
  options.executor = kind;
  uint8_t* copy = malloc(size);
  if (copy == NULL) return ember_status_make(EMBER_OUT_OF_MEMORY, "test: out of memory");
  memcpy(copy, plan, size);
  ember_status* status = ember_program_create(copy, size, &options, out);
  memset(copy, 0xEE, size);
  free(copy);
  return status;
}

/* Compares every output of two runs; returns whether all are within bounds. */
static bool compare_outputs(const char* name, const ember_tensor_info* infos, size_t count,
                            void* const* expected, void* const* actual, bool verbose) {
  bool ok = true;
  for (size_t o = 0; o < count; ++o) {
    const size_t n = infos[o].nbytes / ember_dtype_size(infos[o].dtype);
    compare_result r = compare_values(expected[o], actual[o], infos[o].dtype, n);
    const bool pass = r.nmse <= nmse_bound(infos[o].dtype) && r.bad_specials == 0;
    if (verbose || !pass) {
      printf("  %-34s out%zu %-8s n=%-7zu nmse=%.3e max_abs=%.3e %s\n", name, o,
             ember_dtype_name(infos[o].dtype), n, r.nmse, r.max_abs, pass ? "ok" : "FAIL");
    }
    EXPECT(pass, "%s output %zu: nmse %.3e (bound %.1e), max abs error %.3e, %zu "
                "mismatched NaN/inf", name, o, r.nmse, nmse_bound(infos[o].dtype), r.max_abs,
                r.bad_specials);
    ok = ok && pass;
  }
  return ok;
}

static uint64_t hash_name(const char* s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ (uint8_t)*s) * 1099511628211ull;
  return h | 1u;
}

static ember_cuda_executor_info info_of(const ember_program* program) {
  ember_cuda_executor_info info;
  ember_cuda_executor_get_info(program->executor, &info);
  return info;
}

/* Cases whose GEMM + activation pairs must (or must not) be fused into the cuBLASLt
 * epilogue or the gemv kernel: the activations each must show fused, and how many of
 * their outputs had to move off bytes the memory plan shares with the GEMM's input. */
static const struct {
  const char* prefix;
  uint32_t fused_activations;
  uint32_t relocated;
} kFusion[] = {
    {"linear_relu_", 1, 0},       {"linear_gelu_tanh_", 1, 0}, {"matmul_relu_", 1, 0},
    {"mlp_", 2, 1},               /* two of its three GELUs are the tanh form */
    {"linear_gelu_erf_", 0, 0},   /* cuBLASLt's GELU is the tanh form */
    {"linear_gelu_reuse_", 1, 1}, /* the activation's output overlaps the GEMM's input */
    {"linear_two_readers_", 0, 0},
    /* gemv (LINEAR of at most 8 rows) fuses every activation, GELU's erf form too. */
    {"gemv_m", 1, 0},             {"gemv_k3", 1, 0},           {"gemv_long_", 1, 0},
    {"gemv_wide_", 1, 0},         {"gemv_weight_input_", 1, 0},
    {"gemv_exp_", 0, 0},          /* EXP is not an activation */
    {"gemv_chain_", 4, 2},        /* two hidden activations share bytes with their input */
    /* 9 to 64 rows of a small product: gemv in groups of 8 rows, so the same; 65 rows are
     * cuBLASLt's, whose epilogue takes the RELU. */
    {"gemv_rows9_", 1, 0},        {"gemv_rows16_", 1, 0},      {"gemv_rows23_", 1, 0},
    {"gemv_rows37_", 1, 0},       {"gemv_rows64_", 0, 0},      {"linear_rows65_", 1, 0},
    {"gemv_rows13_", 1, 0},       /* the tensor-core form's tails in float16 and bfloat16 */
    /* CONV2D takes a RELU into its GEMM's epilogue; after the direct kernel (groups 2) the
     * RELU runs in place on the output, which is not an epilogue. */
    {"conv2d_relu_chain_", 2, 1}, /* the second RELU's output is on the first's bytes */
    {"conv2d_relu_groups_", 0, 0},
    {"convnet_block_", 2, 0},
    /* A binary op takes a RELU into its kernel, unless its output has another reader. */
    {"add_relu_same_", 1, 0},     {"add_relu_bias_", 1, 0},    {"add_relu_two_readers_", 0, 0},
};

/* kFusion's cases whose LINEARs the narrow GEMM kernel takes (float16 and bfloat16 on an
 * H100 or H200, info.gemm_narrows > 0), where that differs: the kernel fuses every
 * activation, GELU's erf form too, and the MLP's hidden GELU of that form then writes
 * over its input's bytes as well. */
static const struct {
  const char* prefix;
  uint32_t fused_activations;
  uint32_t relocated;
} kFusionNarrow[] = {
    {"linear_gelu_erf_", 1, 0},
    {"mlp_", 3, 2},
};

/* LINEAR cases and how many of their LINEARs run as the gemv kernel (weight [N, K], at
 * most 8 rows of x, or at most 64 of a product of at most 2^26 multiply-adds) rather than
 * cuBLASLt; the first matching prefix counts. */
static const struct {
  const char* prefix;
  uint32_t gemv_kernels;
} kGemv[] = {
    {"gemv_chain_", 4},        {"gemv_", 1},          {"linear_l0_", 1},
    {"linear_l1_", 0},         /* weight [K, N] */    {"linear_rank3_", 1},
    {"linear_m1_", 1},         {"linear_bias_input_", 1}, {"linear_two_readers_", 1},
    {"linear_big_", 0},        {"linear_k0_", 0},     {"linear_relu_", 0},
    {"linear_gelu_", 0},       {"mlp_", 0},           {"convnet_block_", 1},
    {"decoder_block_", 5},     /* 12 rows */            {"linear_rows", 0},
};

/* CONV2D cases and how many of their convs run as im2col + cuBLASLt GEMM (groups 1 with
 * constant weights) rather than the direct kernel (groups, depthwise, a weight input),
 * how many of those as one GEMM over all images (several images of few positions), and
 * how many im2col + GEMM pairs they take in float16 or bfloat16 and in float32 (0: one
 * per conv; more where a chunk of the images fills the col buffer). `split_moved` of
 * those (flat ones) run on the wgmma kernel instead where the executor takes convs of too
 * few tiles for it (info.conv_split_k), in float16 and bfloat16: channels at most a
 * quarter padded (16 and 8 in, where 3, 4, 5 and 6 are not). */
static const struct {
  const char* prefix;
  uint32_t conv_gemms;
  uint32_t flat;
  uint32_t chunks;
  uint32_t chunks_f32;
  uint32_t split_moved;
} kConv[] = {
    {"conv2d_col_chunks_", 1, 0, 2, 3, 0},
    {"conv2d_pad1_", 1, 1, 0, 0, 0}, {"conv2d_stride2_", 1, 1, 0, 0, 0},
    {"conv2d_dilation2_", 1, 0, 0, 0, 0}, {"conv2d_1x1_", 1, 1, 0, 0, 1},
    {"conv2d_rect_", 1, 0, 0, 0, 0}, {"conv2d_stem_", 1, 0, 0, 0, 0},
    {"conv2d_per_image_", 1, 0, 0, 0, 0}, {"conv2d_relu_chain_", 3, 3, 0, 0, 0},
    {"conv2d_relu_groups_", 0, 0, 0, 0, 0}, {"conv2d_groups2_", 0, 0, 0, 0, 0},
    {"conv2d_depthwise_", 0, 0, 0, 0, 0}, {"conv2d_weight_input_", 0, 0, 0, 0, 0},
    {"convnet_block_", 2, 2, 0, 0, 1}, /* its third conv is depthwise; its stem has 3 channels */
};

/* CONV2D cases on the implicit-GEMM tensor-core kernel in float16 and bfloat16: how many
 * convs take it, how many run as im2col + GEMM instead (the stem: too few channels), how
 * many residual ADDs it fuses, the activations fused in all (its ReLUs, and a binary
 * kernel's), how many of its inputs are packed channels last by a copy, and how many
 * tensors stay channels last between such convs (no copy). In float32 every one of those
 * convs runs as im2col + GEMM, which takes the same residuals (as cuBLASLt's C). Where the executor takes the kernel's wgmma form
 * (info.conv_wgmma: an H100 or H200, unless EMBER_CUDA_WGMMA=0), every conv on the kernel
 * runs on that form; `wgmma_only` convs take the kernel only then (fewer tiles than the
 * mma.sync form needs), else im2col + GEMM. `conv_gemms_nhwc` of the im2col + GEMM convs
 * run channels last (im2col from channels last, the output channels as the GEMM's M: in
 * float16 and bfloat16, too few tiles for the kernel, the output and residual channels
 * last); none in float32. Where the executor takes such convs onto the wgmma kernel, K
 * split (info.conv_split_k), a row with `split_moves` runs all its im2col + GEMM convs
 * there, none channels last through cuBLASLt, with `split_packs` packs and
 * `split_channels_last` tensors kept channels last. */
static const struct {
  const char* prefix;
  uint32_t conv_igemms;
  uint32_t conv_gemms;
  uint32_t fused_residuals;
  uint32_t fused_activations;
  uint32_t conv_packs;
  uint32_t channels_last;
  bool wgmma_only;
  uint32_t conv_gemms_nhwc;
  bool split_moves;
  uint32_t split_packs;
  uint32_t split_channels_last;
} kIgemm[] = {
    {"conv2d_igemm_3x3_", 1, 0, 0, 0, 1, 0, false, 0, false, 0, 0},
    {"conv2d_igemm_o136_stride2_", 1, 0, 0, 0, 1, 0, false, 0, false, 0, 0},
    /* Folded space-to-depth on the wgmma kernel (conv_folds below), else im2col + GEMM. */
    {"conv2d_igemm_stem_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
    {"conv2d_igemm_fold_c1_k5_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
    {"conv2d_igemm_fold_c4_k4_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
    {"conv2d_igemm_fold_rect_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
    {"conv2d_igemm_fold_relu_", 1, 0, 0, 1, 1, 0, true, 0, false, 0, 0},
    {"conv2d_igemm_dil_rect_", 1, 0, 0, 0, 1, 0, false, 0, false, 0, 0},
    {"conv2d_igemm_1x1_stride2_", 1, 0, 0, 0, 1, 0, false, 0, false, 0, 0},
    /* The inner RELU's output is read only by the second conv. */
    {"conv2d_igemm_block_", 2, 0, 1, 2, 1, 1, false, 0, false, 0, 0},
    /* Controls: the conv's output is read by a kernel that wants NCHW. */
    {"conv2d_igemm_add_bcast_", 1, 0, 0, 1, 1, 0, false, 0, false, 0, 0},
    {"conv2d_igemm_two_readers_", 1, 0, 0, 0, 1, 0, false, 0, false, 0, 0},
    {"conv2d_igemm_tiles96_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
    /* Both inner RELUs and the first block's output. */
    {"conv2d_igemm_chain_", 4, 0, 2, 4, 1, 3, false, 0, false, 0, 0},
    /* The first block's output shares its NCHW residual's bytes: it moves, staying
     * channels last (else it would be packed for the second block: 2 packs, 2 kept). */
    {"conv2d_igemm_relocated_chain_", 4, 0, 2, 4, 1, 3, false, 0, false, 0, 0},
    {"conv2d_igemm_wide_chain_", 2, 0, 0, 1, 1, 1, false, 0, false, 0, 0},
    /* A block too small for the kernel in every dtype: im2col + GEMM, the residual as the
     * second GEMM's C, both RELUs in the epilogues; where the executor splits K, on the
     * wgmma kernel as conv2d_igemm_block is. */
    {"conv2d_gemm_block_", 0, 2, 1, 2, 0, 0, false, 0, true, 1, 1},
    /* The conv's output stays channels last for the two REDUCEs that read it (the
     * add_bcast row is the control: a reader that wants NCHW keeps it so). */
    {"conv2d_igemm_pool_", 1, 0, 0, 1, 1, 1, false, 0, false, 0, 0},
    /* Every conv channels last: both RELUs inside the blocks, the second conv's output
     * (the first block's residual, taken by the 1x1 conv after it), both blocks' outputs;
     * the input is packed for the two convs that read it. The gemm_block row is the
     * control: its block writes a plan output, so both its convs stay NCHW. Where the
     * executor splits K, the same on the wgmma kernel. */
    {"conv2d_gemm_nhwc_chain_", 0, 5, 2, 4, 2, 5, false, 5, true, 2, 5},
    /* The stem conv's RELU output, the max pool's output and the block's inner RELU
     * (pools_channels_last below); the control: the pool writes the plan's output. */
    {"conv2d_igemm_maxpool_block_", 3, 0, 1, 3, 1, 3, false, 0, false, 0, 0},
    {"conv2d_igemm_maxpool_out_", 1, 0, 0, 0, 1, 0, false, 0, false, 0, 0},
    /* The first conv's output and the pool's. */
    {"conv2d_igemm_maxpool_s1_", 2, 0, 0, 0, 1, 2, false, 0, false, 0, 0},
    {"conv2d_igemm_maxpool_k2_", 2, 0, 0, 0, 1, 2, false, 0, false, 0, 0},
    /* The plan's input added and the RELU; the output NCHW, or channels last for the
     * REDUCEs (66 tiles: the wgmma kernels only). */
    {"conv2d_halo_images_last_", 1, 0, 1, 1, 1, 1, true, 0, false, 0, 0},
    {"conv2d_halo_images_nchw_", 1, 0, 1, 1, 1, 0, true, 0, false, 0, 0},
    {"conv2d_halo_odd_strips_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
    /* One halo stage: on the halo kernel over one chunk, on conv_wgmma over two (kHalo). */
    {"conv2d_halo_one_stage_", 1, 0, 0, 0, 1, 0, true, 0, false, 0, 0},
};

/* split_k_cases: convs of too few tiles for the wgmma kernel (under 64) where the
 * executor takes them onto it anyway (info.conv_split_k), in float16 and bfloat16: how
 * many of the case's convs (all on that kernel, none on cuBLASLt, which is not loaded),
 * how many of those split K over blocks with a sum step after (9 K tiles and 18: 3
 * splits and 9; the 1x1 convs' one K tile is not split), and the residual ADDs they take.
 * The controls: float32, and executors that do not take them (EMBER_CUDA_CONV_SPLIT_K=0,
 * EMBER_CUDA_WGMMA=0), where every conv runs as im2col + cuBLASLt GEMM and none splits. */
static const struct {
  const char* prefix;
  uint32_t conv_wgmmas, conv_splits, fused_residuals;
} kSplit[] = {
    {"conv2d_split_block_", 2, 2, 1},
    {"conv2d_split_down_", 4, 2, 1},
    {"conv2d_split_nchw_", 1, 1, 1},
};

/* CONV2D cases on the halo kernel (conv_halo.cu) where the executor takes it, how many of
 * their convs, how many of those on its resident-weights form (at most 64 channels out,
 * 64 or 16 in), and how many with whole images stacked in a strip: the two of a resnet
 * block of 64 channels (the first's output channels last, the second's NCHW), a conv of
 * two 64-channel chunks (N 224, the control: weights streamed), two convs of more strips
 * than two a block, one of each form, one on the resident-weights form with two halo
 * slots, a stem read space-to-depth (16 channels) of 300 strips, two or more for each SM
 * of the GPU, its output channels last (igemm_stem, 81 strips, is the control: it stays
 * on conv_wgmma), and the 1x1 conv after its pool, two 2 x 30 images a strip; 7 x 7
 * images two a strip of N 120, the output NCHW or channels last (every other halo conv
 * is the control for stacking: strips of rows); a 16-channel stem of resnet's width
 * whose epilogue takes the max pool (its 1x1 conv after on conv_wgmma: 16 channels); an
 * odd number of strips two a block (the last copy wholly outside x); one halo stage
 * over one chunk (over two: conv_wgmma); and the widths no other case takes (three
 * streamed, one keeping its weights). */
static const struct {
  const char* prefix;
  uint32_t conv_halos, conv_halo_units, conv_halo_stacked;
} kHalo[] = {
    {"conv2d_halo_block_", 2, 2, 0},
    {"conv2d_halo_chunks_", 1, 0, 0},
    {"conv2d_halo_odd_strips_", 1, 0, 0},
    {"conv2d_halo_units_", 2, 1, 0},
    {"conv2d_halo_two_slots_", 1, 1, 0},
    /* One halo stage over one chunk; over two it stays on conv_wgmma (the last match
     * counts). */
    {"conv2d_halo_one_stage_", 1, 0, 0},
    {"conv2d_halo_one_stage_chunks2_", 0, 0, 0},
    {"conv2d_halo_stem_", 2, 1, 1},
    {"conv2d_halo_images_", 1, 0, 1},
    {"conv2d_halo_pool_stem_", 1, 1, 0},
    {"conv2d_halo_widths_", 4, 1, 0},
};

/* Cases with an ADD right before a LAYER_NORM, and how many of those ADDs the LAYER_NORM
 * does (its output read only by that norm, no broadcast), in every dtype. The first
 * matching prefix counts. */
static const struct {
  const char* prefix;
  uint32_t norm_adds;
} kNormAdd[] = {
    {"norm_add_two_readers_", 0}, /* the sum is also read by a NEG */
    {"norm_add_bcast_", 0},       /* a per-column constant */
    {"norm_add_chain_", 3},
    {"norm_add_", 1},
};

/* LINEAR cases (with an activation or none; make_cuda_op_plans.py gemm_wgmma_cases,
 * tma_only_cases): how many LINEARs run on the gemm_wgmma kernel in float16 and bfloat16
 * where the executor uses it (info.gemm_wgmma: an H100 or H200 unless
 * EMBER_CUDA_GEMM_WGMMA=0), their rows and outputs, whether a MATMUL beside them loads
 * cuBLASLt anyway, whether their activation is one cuBLASLt's epilogue lacks, and the
 * activations fused on the kernel. Under 1 (the cuda.test_cuda_ops_gemm_wgmma variant) a
 * LINEAR takes the kernel whatever its tiles and activation, and so under auto (the
 * default) in a program without the MATMUL (which then loads no cuBLASLt at all); beside
 * it, only with an activation cuBLASLt lacks and tiles that fit in one wave (no more than
 * the GPU's SMs). 0 elsewhere and in float32 (cuBLASLt, then a bias_act kernel for an
 * activation it lacks). The first matching prefix counts. */
static const struct {
  const char* prefix;
  uint32_t gemm_wgmmas;
  uint32_t rows, n;
  bool beside_matmul;
  bool lacking;
  uint32_t fused;
} kGemmWgmma[] = {
    {"gemm_wgmma_few_tiles_", 0, 512, 256, false, true, 0}, /* too few tiles */
    {"gemm_wgmma_k60_", 0, 8200, 8, false, true, 0},        /* K not a multiple of 8 */
    {"gemm_wgmma_gelu_tails_", 1, 4100, 264, false, true, 1},
    {"gemm_wgmma_silu_grid_", 1, 4096, 512, false, true, 1},
    {"gemm_wgmma_sigmoid_rank3_", 1, 8192, 256, false, true, 1},
    {"gemm_wgmma_tanh_k8_", 1, 8200, 264, false, true, 1},
    {"gemm_wgmma_long_k_", 1, 8200, 8, false, true, 1},
    {"gemm_wgmma_waves_", 1, 8448, 768, false, true, 1}, /* more tiles than 132 SMs */
    {"tma_only_gelu_tanh_", 1, 4096, 512, false, false, 1},
    {"tma_only_relu_", 1, 4096, 520, false, false, 1},
    {"tma_only_plain_", 1, 4096, 768, false, false, 0},
    {"tma_only_wide_", 1, 4100, 1024, false, true, 1}, /* tiles of 256 columns */
    /* auto's controls: cuBLASLt loaded for the MATMUL */
    {"tma_only_matmul_relu_", 1, 4096, 520, true, false, 1},
    {"tma_only_matmul_waves_", 1, 8448, 768, true, true, 1},
    {"tma_only_matmul_gelu_", 1, 4096, 512, true, true, 1}, /* taken: one wave */
};

/* gemm_wgmma's columns a tile (cuda_executor.c gemm_wgmma_columns, restated): 192 where
 * its waves of tiles times 192 are fewer than those of 256 times 256. */
static uint32_t gemm_wgmma_columns(uint32_t rows, uint32_t n, uint32_t sms) {
  const uint32_t m_tiles = (rows + 127) / 128;
  const uint32_t waves256 = (m_tiles * ((n + 255) / 256) + sms - 1) / sms;
  const uint32_t waves192 = (m_tiles * ((n + 191) / 192) + sms - 1) / sms;
  return waves192 * 192 < waves256 * 256 ? 192 : 256;
}

/* Narrow GEMM cases (make_cuda_op_plans.py gemm_narrow_cases): how many LINEARs run on
 * the narrow GEMM kernel in float16 and bfloat16 where the executor uses it
 * (info.gemm_narrow: an H100 or H200 unless EMBER_CUDA_GEMM_NARROW=0, the control
 * cuda.test_cuda_ops_gemm_narrow_off), how many activations those fuse, and their blocks:
 * under auto (the default) a LINEAR takes the kernel only when its blocks fit in one
 * wave, under 1 (cuda.test_cuda_ops_gemm_narrow) whatever their number. 0 elsewhere and
 * in float32. */
static const struct {
  const char* prefix;
  uint32_t gemm_narrows;
  uint32_t fused;
  uint32_t blocks;
} kGemmNarrow[] = {
    {"gemm_narrow_r64_gelu_", 1, 1, 66},
    {"gemm_narrow_r32_wrap_", 1, 0, 64},
    {"gemm_narrow_r16_relu_", 1, 1, 60},
    {"gemm_narrow_long_k_", 1, 1, 5},
    {"gemm_narrow_rank3_", 1, 0, 72},
    {"gemm_narrow_gelu_tanh_", 1, 1, 56},
    {"gemm_narrow_silu_", 1, 1, 56},
    {"gemm_narrow_sigmoid_", 1, 1, 56},
    {"gemm_narrow_r128_", 1, 1, 64},
    {"gemm_narrow_k60_", 0, 0, 0}, /* K not a multiple of 8 */
    {"gemm_narrow_waves_", 1, 1, 144}, /* auto's control: more blocks than 132 SMs */
};

/* Chain cases (make_cuda_op_plans.py wgmma_chain_cases): the chain kernels their LINEARs
 * were merged into and the LINEARs in them, in float16 and bfloat16 where the executor
 * uses gemm_wgmma (info.gemm_wgmma: an H100 or H200) under EMBER_CUDA_GEMM_CHAIN=1
 * (cuda.test_cuda_ops_gemm_chain); none under the default, 0 (the control,
 * cuda.test_cuda_ops), and in float32. Every LINEAR of them is on gemm_wgmma either way,
 * its activation fused. */
static const struct {
  const char* prefix;
  uint32_t chains, layers, linears, fused;
} kGemmChain[] = {
    {"wgmma_chain_five_", 1, 4, 5, 4},    /* a chain of 4, then one alone */
    {"wgmma_chain_widths_", 1, 2, 2, 2},  /* the first output bound */
    {"wgmma_chain_k_break_", 1, 2, 3, 3}, /* the first LINEAR's 3 K tiles keep it out */
};

/* REDUCE cases and how many of their REDUCEs take 32 contiguous outputs a block, and of
 * those 16 bytes of them a lane, in every dtype on every GPU (plan inputs: their layout
 * is the plan's). The first matching prefix counts; the reduce cases before
 * reduce_columns are controls (the kept innermost dim strided, or of fewer than 8
 * elements, or no reduction past 32 elements), and so is reduce_columns_long (300
 * elements: a block per output); reduce_columns_max's 33 columns are the vectors'
 * control. */
static const struct {
  const char* prefix;
  uint32_t reduce_columns, reduce_column_vectors;
} kReduceColumns[] = {
    {"reduce_columns_long_", 0, 0},
    {"reduce_columns_max_", 1, 0},
    {"reduce_columns_", 1, 1},
    {"reduce_", 0, 0},
};

static bool ends_with(const char* s, const char* suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* SDPA cases: how many of their SDPAs run on the tensor-core flash kernel (float16 or
 * bfloat16, no mask tensor, e == ev of 64 or 128) rather than as GEMMs or the fused
 * kernel, and how many layout copies around them fold into its strides (no step). A
 * case's float32 variant expects 0 and 0 (the flash kernel has no float32 form), so every
 * row checks both ways. The first matching prefix counts. */
static const struct {
  const char* prefix;
  uint32_t sdpa_flash; /* in the float16 and bfloat16 variants */
  uint32_t folded_layout_ops;
} kFlash[] = {
    {"sdpa_flash_mask_", 0, 0}, /* a mask tensor: the fused kernel */
    {"sdpa_flash_e80_", 0, 0},  /* head dim 80 */
    {"sdpa_flash_ev_", 0, 0},   /* e 64, ev 128 */
    {"sdpa_flash_", 1, 0},      {"sdpa_gpt_", 1, 0},
    {"sdpa_plain_", 0, 0},      /* head dim 16 */
    {"sdpa_wide_v_", 0, 0},     {"sdpa_mask_add_", 0, 0},
    {"sdpa_softmax_", 0, 0},    {"decoder_block_", 0, 0}, /* head dim 8 */
    /* The encoder's attention: the [3, L, B, E] permute, three SLICEs, three permutes to
     * [B, H, L, hd], y's permute back. */
    {"sdpa_fold_encoder_mask_", 0, 0},
    {"sdpa_fold_encoder_", 1, 8},
    /* q, k, v are SLICEs of one permute ([3, B, H, L, hd]); y is permuted back. */
    {"sdpa_fold_gpt_y_two_readers_", 1, 4}, /* y is read by another op: its permute stays */
    {"sdpa_fold_gpt_y_output_", 1, 4},      /* y's permute writes a plan output: stays */
    /* q is read by another op, or is a plan output: its SLICE stays, so does the permute
     * that SLICE reads (k's and v's SLICEs read the permute's output in place). */
    {"sdpa_fold_gpt_q_two_readers_", 1, 3},
    {"sdpa_fold_gpt_q_output_", 1, 3},
    /* A step between the permute and the SDPA writes qkv's bytes: the SLICEs read the
     * permute's output, which stays. */
    {"sdpa_fold_gpt_base_reused_", 1, 4},
    {"sdpa_fold_gpt_", 1, 5},
};

static size_t g_cases_passed, g_cases_run;
static ember_cuda_executor_info g_totals;
/* EMBER_CUDA_PDL=auto: cases whose graphs prepare timed with and without PDL, and of
 * those, the ones that kept PDL. */
static uint32_t g_pdl_timed, g_pdl_kept;
static double g_worst_nmse[8];

static void run_op_case(const char* dir, const char* name, double low, double high) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  ember_program* cpu = NULL;
  ember_program* gpu = NULL;
  ++g_cases_run;
  if (!COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CPU, &cpu))) ||
      !COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CUDA, &gpu)))) {
    printf("  %-34s FAIL (create)\n", name);
    ember_program_destroy(cpu);
    free(plan);
    return;
  }
  EXPECT(ember_program_executor(gpu) == EMBER_EXECUTOR_CUDA, "%s: executor", name);
  const ember_cuda_executor_info info = info_of(gpu);
  g_totals.steps += info.steps;
  g_totals.gemms += info.gemms;
  g_totals.fused_biases += info.fused_biases;
  g_totals.fused_activations += info.fused_activations;
  g_totals.bias_act_kernels += info.bias_act_kernels;
  g_totals.conv_gemms += info.conv_gemms;
  g_totals.conv_gemms_nhwc += info.conv_gemms_nhwc;
  g_totals.norm_adds += info.norm_adds;
  g_totals.gemm_wgmmas += info.gemm_wgmmas;
  g_totals.gemm_wgmma = g_totals.gemm_wgmma || info.gemm_wgmma;
  g_totals.gemm_narrows += info.gemm_narrows;
  g_totals.gemm_chains += info.gemm_chains;
  g_totals.gemm_chain_layers += info.gemm_chain_layers;
  g_totals.gemm_narrow = g_totals.gemm_narrow || info.gemm_narrow;
  g_totals.conv_igemms += info.conv_igemms;
  g_totals.conv_wgmmas += info.conv_wgmmas;
  g_totals.conv_folds += info.conv_folds;
  g_totals.conv_halos += info.conv_halos;
  g_totals.conv_halo_units += info.conv_halo_units;
  g_totals.conv_halo_stacked += info.conv_halo_stacked;
  g_totals.conv_halo_kernels |= info.conv_halo_kernels;
  g_totals.conv_halo = g_totals.conv_halo || info.conv_halo;
  g_totals.conv_wgmma = g_totals.conv_wgmma || info.conv_wgmma;
  g_totals.conv_split_k = g_totals.conv_split_k || info.conv_split_k;
  g_totals.fused_residuals += info.fused_residuals;
  g_totals.gemv_kernels += info.gemv_kernels;
  g_totals.sdpa_flash += info.sdpa_flash;
  g_totals.folded_layout_ops += info.folded_layout_ops;
  g_totals.programmatic_edges += info.programmatic_edges;
  g_totals.pdl = g_totals.pdl || info.pdl;
  /* Under PDL every edge between two kernels is programmatic; a plan without cuBLASLt
   * GEMMs is a chain of kernels, but for the edges to, within and from a group of steps
   * side by side, which are full: the one case with such a group (beside_steps, asserted
   * below) has one of two steps between single steps, whose 3 edges a chain would have.
   * Without PDL there are none. */
  if (!info.pdl) {
    EXPECT(info.programmatic_edges == 0, "%s: %u programmatic edges without PDL", name,
           info.programmatic_edges);
  } else if (info.gemms == 0 && info.steps > 0) {
    const uint32_t grouped = info.beside_steps != 0 ? info.beside_steps + 2u : 0u;
    EXPECT(info.programmatic_edges == info.steps - 1 - grouped,
           "%s: %u programmatic edges in a chain of %u kernels (%u steps beside another)", name,
           info.programmatic_edges, info.steps, info.beside_steps);
  }
  /* Timed both ways: PDL kept only where its replay was the faster. */
  if (info.pdl_timed) {
    ++g_pdl_timed;
    if (info.pdl) ++g_pdl_kept;
    EXPECT(info.pdl_off_us > 0.0f && info.pdl_on_us > 0.0f &&
               (!info.pdl || info.pdl_on_us < info.pdl_off_us),
           "%s: PDL %s after replays of %.2f us with it and %.2f without", name,
           info.pdl ? "kept" : "left", (double)info.pdl_on_us, (double)info.pdl_off_us);
  }
  for (size_t f = 0; f < sizeof kFusion / sizeof kFusion[0]; ++f) {
    if (strncmp(name, kFusion[f].prefix, strlen(kFusion[f].prefix)) == 0) {
      uint32_t fused = kFusion[f].fused_activations, relocated = kFusion[f].relocated;
      for (size_t n = 0; n < sizeof kFusionNarrow / sizeof kFusionNarrow[0]; ++n) {
        if (info.gemm_narrows > 0 && strcmp(kFusionNarrow[n].prefix, kFusion[f].prefix) == 0) {
          fused = kFusionNarrow[n].fused_activations;
          relocated = kFusionNarrow[n].relocated;
        }
      }
      EXPECT(info.fused_activations == fused && info.relocated_tensors == relocated,
             "%s: %u activations fused into GEMM epilogues (%u relocated, %u LINEAR on the "
             "narrow kernel), expected %u (%u)", name, info.fused_activations,
             info.relocated_tensors, info.gemm_narrows, fused, relocated);
    }
  }
  for (size_t g = 0; g < sizeof kGemv / sizeof kGemv[0]; ++g) {
    if (strncmp(name, kGemv[g].prefix, strlen(kGemv[g].prefix)) == 0) {
      EXPECT(info.gemv_kernels == kGemv[g].gemv_kernels, "%s: %u LINEAR ran as gemv, "
             "expected %u", name, info.gemv_kernels, kGemv[g].gemv_kernels);
      break;
    }
  }
  for (size_t f = 0; f < sizeof kFlash / sizeof kFlash[0]; ++f) {
    if (strncmp(name, kFlash[f].prefix, strlen(kFlash[f].prefix)) == 0) {
      const bool f32 = ends_with(name, "_f32");
      const uint32_t flash = f32 ? 0 : kFlash[f].sdpa_flash;
      const uint32_t folded = f32 ? 0 : kFlash[f].folded_layout_ops;
      EXPECT(info.sdpa_flash == flash && info.folded_layout_ops == folded,
             "%s: %u SDPA ran on the flash kernel (%u layout copies folded), expected %u (%u)",
             name, info.sdpa_flash, info.folded_layout_ops, flash, folded);
      break;
    }
  }
  for (size_t c = 0; c < sizeof kConv / sizeof kConv[0]; ++c) {
    if (strncmp(name, kConv[c].prefix, strlen(kConv[c].prefix)) == 0) {
      const bool f32 = ends_with(name, "_f32");
      const uint32_t moved = info.conv_split_k && !f32 ? kConv[c].split_moved : 0;
      const uint32_t gemms = kConv[c].conv_gemms - moved, flat = kConv[c].flat - moved;
      const uint32_t listed = f32 ? kConv[c].chunks_f32 : kConv[c].chunks;
      const uint32_t chunks = listed != 0 ? listed : gemms;
      EXPECT(info.conv_gemms == gemms && info.conv_gemms_flat == flat &&
                 info.conv_gemm_chunks == chunks && info.conv_wgmmas >= moved,
             "%s: %u CONV2D ran as im2col + GEMM (%u over all images, %u chunks; %u on the "
             "wgmma kernel), expected %u (%u, %u; at least %u)", name, info.conv_gemms,
             info.conv_gemms_flat, info.conv_gemm_chunks, info.conv_wgmmas, gemms, flat, chunks,
             moved);
      break;
    }
  }
  for (size_t c = 0; c < sizeof kGemmWgmma / sizeof kGemmWgmma[0]; ++c) {
    if (strncmp(name, kGemmWgmma[c].prefix, strlen(kGemmWgmma[c].prefix)) != 0) continue;
    const uint32_t columns =
        gemm_wgmma_columns(kGemmWgmma[c].rows, kGemmWgmma[c].n, (uint32_t)g_sm_count);
    const uint32_t tiles =
        (kGemmWgmma[c].rows + 127) / 128 * ((kGemmWgmma[c].n + columns - 1) / columns);
    const bool one_wave = tiles <= (uint32_t)g_sm_count;
    const bool taken = info.gemm_wgmma && !ends_with(name, "_f32") &&
                       (g_gemm_wgmma_forced || !kGemmWgmma[c].beside_matmul ||
                        (kGemmWgmma[c].lacking && one_wave));
    const uint32_t expected = taken ? kGemmWgmma[c].gemm_wgmmas : 0;
    const uint32_t small = columns == 192 ? expected : 0;
    EXPECT(info.gemm_wgmmas_small == small,
           "%s: %u LINEAR on gemm_wgmma's tiles of 192 columns, expected %u (%u tiles)", name,
           info.gemm_wgmmas_small, small, tiles);
    /* Off the kernel, an activation cuBLASLt lacks is fused only by the narrow kernel
     * (gemm_wgmma_few_tiles under auto); one it has, by cuBLASLt. */
    const uint32_t fused =
        expected == 0 && kGemmWgmma[c].lacking ? info.gemm_narrows : kGemmWgmma[c].fused;
    EXPECT(info.gemm_wgmmas == expected && info.fused_activations == fused,
           "%s: %u LINEAR on the gemm_wgmma kernel (%u activations fused, %u LINEAR on the "
           "narrow kernel), expected %u (%u fused)", name, info.gemm_wgmmas,
           info.fused_activations, info.gemm_narrows, expected, fused);
    /* With every GEMM on Ember's kernels, no cuBLASLt; beside the MATMUL, cuBLASLt. */
    if (expected > 0 || kGemmWgmma[c].beside_matmul) {
      EXPECT(info.cublaslt == kGemmWgmma[c].beside_matmul, "%s: cuBLASLt %s, expected %s",
             name, info.cublaslt ? "loaded" : "not loaded",
             kGemmWgmma[c].beside_matmul ? "loaded" : "not loaded");
    }
    break;
  }
  for (size_t c = 0; c < sizeof kGemmNarrow / sizeof kGemmNarrow[0]; ++c) {
    if (strncmp(name, kGemmNarrow[c].prefix, strlen(kGemmNarrow[c].prefix)) != 0) continue;
    const bool one_wave = kGemmNarrow[c].blocks <= (uint32_t)g_sm_count;
    const bool taken =
        info.gemm_narrow && !ends_with(name, "_f32") && (one_wave || g_gemm_narrow_forced);
    const uint32_t expected = taken ? kGemmNarrow[c].gemm_narrows : 0;
    EXPECT(info.gemm_narrows == expected,
           "%s: %u LINEAR on the narrow GEMM kernel, expected %u", name, info.gemm_narrows,
           expected);
    if (taken) {
      EXPECT(info.fused_activations == kGemmNarrow[c].fused,
             "%s: %u activations fused, expected %u", name, info.fused_activations,
             kGemmNarrow[c].fused);
    }
    break;
  }
  for (size_t c = 0; c < sizeof kGemmChain / sizeof kGemmChain[0]; ++c) {
    if (strncmp(name, kGemmChain[c].prefix, strlen(kGemmChain[c].prefix)) != 0) continue;
    const bool on_wgmma = info.gemm_wgmma && !ends_with(name, "_f32");
    const bool chained = on_wgmma && g_gemm_chain;
    EXPECT(info.gemm_chains == (chained ? kGemmChain[c].chains : 0) &&
               info.gemm_chain_layers == (chained ? kGemmChain[c].layers : 0),
           "%s: %u chain kernels of %u LINEARs, expected %u of %u", name, info.gemm_chains,
           info.gemm_chain_layers, chained ? kGemmChain[c].chains : 0,
           chained ? kGemmChain[c].layers : 0);
    if (on_wgmma) {
      EXPECT(info.gemm_wgmmas == kGemmChain[c].linears &&
                 info.fused_activations == kGemmChain[c].fused,
             "%s: %u LINEAR on gemm_wgmma (%u activations fused), expected %u (%u)", name,
             info.gemm_wgmmas, info.fused_activations, kGemmChain[c].linears,
             kGemmChain[c].fused);
    }
    break;
  }
  for (size_t c = 0; c < sizeof kReduceColumns / sizeof kReduceColumns[0]; ++c) {
    if (strncmp(name, kReduceColumns[c].prefix, strlen(kReduceColumns[c].prefix)) == 0) {
      EXPECT(info.reduce_columns == kReduceColumns[c].reduce_columns &&
                 info.reduce_column_vectors == kReduceColumns[c].reduce_column_vectors,
             "%s: %u REDUCEs of contiguous outputs 32 a block (%u of them 16 bytes a lane), "
             "expected %u (%u)", name, info.reduce_columns, info.reduce_column_vectors,
             kReduceColumns[c].reduce_columns, kReduceColumns[c].reduce_column_vectors);
      break;
    }
  }
  for (size_t c = 0; c < sizeof kNormAdd / sizeof kNormAdd[0]; ++c) {
    if (strncmp(name, kNormAdd[c].prefix, strlen(kNormAdd[c].prefix)) == 0) {
      EXPECT(info.norm_adds == kNormAdd[c].norm_adds,
             "%s: %u ADDs done by the LAYER_NORM after them, expected %u", name,
             info.norm_adds, kNormAdd[c].norm_adds);
      break;
    }
  }
  {
    /* Steps the graph runs beside the step before them: the downsampling block's 1x1
     * stride-2 conv and first 3x3 (both on the wgmma kernel, reading the same intermediate
     * into outputs of their own) in float16 and bfloat16. Every other case is a control:
     * resnet_block's convs in a chain (each reads the one before), a conv reading its input
     * packed (conv_packed, which every pack writes), float32 (im2col + cuBLASLt), no graph,
     * EMBER_CUDA_BRANCHES=0. */
    const bool branches = strncmp(name, "conv2d_branches_downsample_", 27) == 0 &&
                          info.graph && info.conv_wgmma && !ends_with(name, "_f32") &&
                          !g_branches_off;
    EXPECT(info.beside_steps == (branches ? 1u : 0u),
           "%s: %u steps beside the step before them in the graph, expected %u", name,
           info.beside_steps, branches ? 1u : 0u);
  }
  /* resnet's stem on the halo kernel's 16-channel form, with its max pool after it or in
   * its epilogue. */
  const bool halo_stem = strncmp(name, "conv2d_halo_stem_", 17) == 0 ||
                         strncmp(name, "conv2d_halo_pool_stem_", 22) == 0;
  {
    /* The convs that read their input folded space-to-depth: the stem cases on the wgmma
     * kernel (or the halo kernel), in float16 and bfloat16. Every other case is a control:
     * more channels (o136_stride2), stride 1 (3x3), too few tiles (im2col_stem), float32. */
    const bool fold_case = strncmp(name, "conv2d_igemm_stem_", 18) == 0 ||
                           strncmp(name, "conv2d_igemm_fold_", 18) == 0 || halo_stem;
    const uint32_t expected = fold_case && info.conv_wgmma && !ends_with(name, "_f32") ? 1u : 0u;
    EXPECT(info.conv_folds == expected,
           "%s: %u CONV2D read their input space-to-depth, expected %u", name, info.conv_folds,
           expected);
    /* Of those, packed rows at a time through shared memory: 3 channels or 1
     * (fold_c1_k5, whose width of 130 copies its rows 2 bytes at a time); fold_c4_k4 is the
     * control. */
    const uint32_t rows_expected = strstr(name, "fold_c4_k4") != NULL ? 0u : expected;
    EXPECT(info.conv_fold_rows == rows_expected,
           "%s: %u CONV2D packed space-to-depth through shared memory, expected %u", name,
           info.conv_fold_rows, rows_expected);
  }
  {
    /* MAX_POOL2Ds reading and writing channels last: the one between the implicit-GEMM
     * convs of the maxpool cases (3 x 3 of stride 2 or 1, 2 x 2), in float16 and
     * bfloat16, and the stem cases' (halo_stem, halo_pool_stem) where their stem reads
     * space-to-depth (the wgmma kernels; elsewhere its 3 channels keep it on im2col +
     * GEMM, NCHW). Every other case with a MAX_POOL2D is a control: maxpool_out (its
     * output is the plan's), the pool cases (a plan input or an NCHW intermediate in),
     * dyn_conv (convs too small for the kernel), float32. */
    const bool pooled = (strncmp(name, "conv2d_igemm_maxpool_", 21) == 0 &&
                         strncmp(name, "conv2d_igemm_maxpool_out_", 25) != 0) ||
                        (halo_stem && info.conv_wgmma);
    const uint32_t expected = pooled && !ends_with(name, "_f32") ? 1u : 0u;
    EXPECT(info.pools_channels_last == expected,
           "%s: %u MAX_POOL2D channels last, expected %u", name, info.pools_channels_last,
           expected);
    /* Of those, the stems' are done in their conv's epilogue where it runs on the halo
     * kernel, with no step of their own (halo_stem's strips hold whole images,
     * halo_pool_stem's half of one: a strip's first pooled row takes the row above from
     * the consumer's previous strip, or at a boundary between consumers or blocks from
     * whichever strip arrives second); the maxpool cases' convs (8 channels) are the
     * control. */
    const uint32_t in_conv = expected != 0 && halo_stem && info.conv_halo ? 1u : 0u;
    EXPECT(info.pools_in_conv == in_conv,
           "%s: %u MAX_POOL2D done in the conv before them, expected %u", name,
           info.pools_in_conv, in_conv);
    /* The others' 3 x 3 pools read their input rows through shared memory; maxpool_k2's
     * 2 x 2 pool is the control. */
    const uint32_t shared_rows = expected != 0 && in_conv == 0 &&
                                         strncmp(name, "conv2d_igemm_maxpool_k2_", 24) != 0
                                     ? 1u
                                     : 0u;
    EXPECT(info.pools_shared_rows == shared_rows,
           "%s: %u MAX_POOL2D with their rows in shared memory, expected %u", name,
           info.pools_shared_rows, shared_rows);
  }
  {
    /* The convs on the halo kernel (kHalo) where the executor takes it, in float16 and
     * bfloat16. Every other case is a control: stride 2 (o136_stride2, 1x1_stride2),
     * packed channels neither 16 nor a multiple of 64 (3x3, dil_rect and the blocks and
     * chains of 8 channels; fold_c1_k5, read space-to-depth in 8), 16 with taps not a
     * multiple of 4 (tiles96's 9), fewer strips than two an SM (fold_c4_k4 and fold_relu,
     * 44 each, whose strips of 232 keep 80% and 83% of the positions; igemm_stem, 81),
     * more than 64 output channels (fold_rect), float32, and the
     * executors without it (EMBER_CUDA_WGMMA=0, other GPUs). */
    uint32_t expected = 0, expected_units = 0, expected_stacked = 0;
    for (size_t c = 0; c < sizeof kHalo / sizeof kHalo[0]; ++c) {
      if (info.conv_halo && !ends_with(name, "_f32") &&
          strncmp(name, kHalo[c].prefix, strlen(kHalo[c].prefix)) == 0) {
        expected = kHalo[c].conv_halos;
        expected_units = kHalo[c].conv_halo_units;
        expected_stacked = kHalo[c].conv_halo_stacked;
      }
    }
    EXPECT(info.conv_halos == expected && info.conv_halo_units == expected_units &&
               info.conv_halo_stacked == expected_stacked,
           "%s: %u CONV2D on the halo kernel (%u on its resident-weights form, %u with images "
           "stacked), expected %u (%u, %u)",
           name, info.conv_halos, info.conv_halo_units, info.conv_halo_stacked, expected,
           expected_units, expected_stacked);
  }
  for (size_t c = 0; c < sizeof kIgemm / sizeof kIgemm[0]; ++c) {
    if (strncmp(name, kIgemm[c].prefix, strlen(kIgemm[c].prefix)) != 0) continue;
    if (ends_with(name, "_f32")) {
      const uint32_t convs = kIgemm[c].conv_igemms + kIgemm[c].conv_gemms;
      EXPECT(info.conv_igemms == 0 && info.fused_residuals == kIgemm[c].fused_residuals &&
                 info.conv_gemms == convs && info.channels_last_tensors == 0 &&
                 info.conv_gemms_nhwc == 0,
             "%s: float32 ran %u CONV2D on the implicit-GEMM kernel and %u as im2col + GEMM "
             "(%u residuals fused, as C), expected 0 and %u (%u)", name, info.conv_igemms,
             info.conv_gemms, info.fused_residuals, convs, kIgemm[c].fused_residuals);
    } else {
      const bool moved = kIgemm[c].wgmma_only && !info.conv_wgmma; /* to im2col + GEMM */
      const bool split = kIgemm[c].split_moves && info.conv_split_k; /* to the wgmma kernel */
      const uint32_t igemms = moved ? 0 : kIgemm[c].conv_igemms + (split ? kIgemm[c].conv_gemms : 0);
      const uint32_t gemms =
          split ? 0 : kIgemm[c].conv_gemms + (moved ? kIgemm[c].conv_igemms : 0);
      EXPECT(info.conv_wgmmas == (info.conv_wgmma ? info.conv_igemms : 0),
             "%s: %u of %u implicit-GEMM convs on the wgmma kernel, which this executor %s",
             name, info.conv_wgmmas, info.conv_igemms, info.conv_wgmma ? "takes" : "does not take");
      const uint32_t packs = moved ? 0 : split ? kIgemm[c].split_packs : kIgemm[c].conv_packs;
      /* Moved, the halo_images convs run as one GEMM over all their images, NCHW, which
       * takes no residual (the ADD and its RELU stay a kernel). */
      const uint32_t kept = moved  ? 0
                            : split ? kIgemm[c].split_channels_last
                                    : kIgemm[c].channels_last;
      const uint32_t residuals = moved ? 0 : kIgemm[c].fused_residuals;
      EXPECT(info.conv_packs == packs && info.channels_last_tensors == kept,
             "%s: %u inputs packed channels last and %u tensors kept so, expected %u and %u",
             name, info.conv_packs, info.channels_last_tensors, packs, kept);
      const uint32_t nhwc = split ? 0 : kIgemm[c].conv_gemms_nhwc;
      EXPECT(info.conv_gemms_nhwc == nhwc,
             "%s: %u im2col + GEMM convs ran channels last, expected %u", name,
             info.conv_gemms_nhwc, nhwc);
      EXPECT(info.conv_igemms == igemms &&
                 info.conv_gemms == gemms &&
                 info.fused_residuals == residuals &&
                 info.fused_activations == kIgemm[c].fused_activations,
             "%s: %u CONV2D on the implicit-GEMM kernel (%u im2col + GEMM), %u residuals and "
             "%u activations fused, expected %u (%u), %u and %u", name, info.conv_igemms,
             info.conv_gemms, info.fused_residuals, info.fused_activations,
             igemms, gemms, residuals, kIgemm[c].fused_activations);
    }
  }
  for (size_t c = 0; c < sizeof kSplit / sizeof kSplit[0]; ++c) {
    if (strncmp(name, kSplit[c].prefix, strlen(kSplit[c].prefix)) != 0) continue;
    if (info.conv_split_k && !ends_with(name, "_f32")) {
      EXPECT(info.conv_wgmmas == kSplit[c].conv_wgmmas && info.conv_splits == kSplit[c].conv_splits &&
                 info.conv_gemms == 0 && !info.cublaslt &&
                 info.fused_residuals == kSplit[c].fused_residuals,
             "%s: %u CONV2D on the wgmma kernel, %u of them split over K, %u im2col + GEMM, "
             "cuBLASLt %s, %u residuals fused; expected %u, %u, 0, not loaded, %u",
             name, info.conv_wgmmas, info.conv_splits, info.conv_gemms,
             info.cublaslt ? "loaded" : "not loaded", info.fused_residuals,
             kSplit[c].conv_wgmmas, kSplit[c].conv_splits, kSplit[c].fused_residuals);
    } else {
      EXPECT(info.conv_splits == 0 && info.conv_gemms == kSplit[c].conv_wgmmas && info.cublaslt,
             "%s: %u CONV2D split over K, %u im2col + GEMM (cuBLASLt %s); expected 0 and %u on "
             "cuBLASLt", name, info.conv_splits, info.conv_gemms,
             info.cublaslt ? "loaded" : "not loaded", kSplit[c].conv_wgmmas);
    }
  }
  g_totals.conv_splits += info.conv_splits;
  g_rng = hash_name(name);
  ember_tensor_info in_info[16], out_info[16];
  buffers in = host_buffers(cpu, true, in_info, low, high);
  buffers cpu_out = host_buffers(cpu, false, out_info, 0, 0);
  buffers gpu_out = host_buffers(gpu, false, out_info, 0, 0);
  bool ok = COUNT(CHECK_OK(ember_program_run(cpu, in.bindings, in.count, cpu_out.bindings,
                                             cpu_out.count)));
  ok = COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, gpu_out.bindings,
                                        gpu_out.count))) && ok;
  if (ok) {
    ok = compare_outputs(name, out_info, cpu_out.count, cpu_out.data, gpu_out.data, false);
    for (size_t o = 0; o < cpu_out.count; ++o) {
      const size_t n = out_info[o].nbytes / ember_dtype_size(out_info[o].dtype);
      compare_result r = compare_values(cpu_out.data[o], gpu_out.data[o], out_info[o].dtype, n);
      if (r.nmse > g_worst_nmse[out_info[o].dtype]) g_worst_nmse[out_info[o].dtype] = r.nmse;
    }
    /* A second run replays the graph: the same bits again. */
    buffers again = host_buffers(gpu, false, out_info, 0, 0);
    if (COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, again.bindings,
                                         again.count)))) {
      for (size_t o = 0; o < again.count; ++o) {
        if (memcmp(again.data[o], gpu_out.data[o], out_info[o].nbytes) != 0) {
          printf("  %-34s note: output %zu differs between two runs (not bitwise "
                 "deterministic)\n", name, o);
        }
      }
    }
    free_buffers(&again);
  }
  if (ok) ++g_cases_passed;
  free_buffers(&in);
  free_buffers(&cpu_out);
  free_buffers(&gpu_out);
  ember_program_destroy(gpu);
  ember_program_destroy(cpu);
  free(plan);
}

/* ---- binding paths ------------------------------------------------------------------ */

static bool cu_ok(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return true;
  const char* name = NULL;
  g_driver->cuGetErrorName(result, &name);
  test_fail(__FILE__, __LINE__, "%s failed: %s", what, name != NULL ? name : "?");
  return false;
}

typedef struct device_set {
  size_t count;
  CUdeviceptr blocks[16];
  void* data[16];
  ember_tensor_binding bindings[16];
} device_set;

/* Device buffers for each tensor, `offset` bytes and `elements` of its elements into an
 * allocation of its own (one element off: as little aligned as a binding may be and still
 * be used in place, which the kernels' vector paths must notice). */
static void device_buffers(const ember_tensor_info* infos, size_t count, size_t offset,
                           size_t elements, device_set* out) {
  memset(out, 0, sizeof *out);
  out->count = count;
  for (size_t i = 0; i < count; ++i) {
    const size_t shift = offset + elements * ember_dtype_size(infos[i].dtype);
    if (!cu_ok(g_driver->cuMemAlloc(&out->blocks[i], infos[i].nbytes + shift + 256),
               "cuMemAlloc")) {
      abort();
    }
    out->data[i] = (void*)(uintptr_t)(out->blocks[i] + shift);
    out->bindings[i] = binding_for(&infos[i], infos[i].nbytes == 0 ? NULL : out->data[i]);
  }
}

static void free_device(device_set* set) {
  for (size_t i = 0; i < set->count; ++i) g_driver->cuMemFree(set->blocks[i]);
}

static void upload(device_set* set, const buffers* host) {
  for (size_t i = 0; i < set->count; ++i) {
    if (host->bindings[i].nbytes == 0) continue;
    cu_ok(g_driver->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)set->data[i], host->data[i],
                                      host->bindings[i].nbytes, NULL),
          "cuMemcpyHtoDAsync");
  }
  cu_ok(g_driver->cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static void download(buffers* host, const device_set* set) {
  for (size_t i = 0; i < set->count; ++i) {
    if (host->bindings[i].nbytes == 0) continue;
    cu_ok(g_driver->cuMemcpyDtoHAsync(host->data[i], (CUdeviceptr)(uintptr_t)set->data[i],
                                      host->bindings[i].nbytes, NULL),
          "cuMemcpyDtoHAsync");
  }
  cu_ok(g_driver->cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static size_t total_bytes(const ember_tensor_info* infos, size_t count) {
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) total += infos[i].nbytes;
  return total;
}

static void expect_stats_delta(ember_program* program, ember_program_stats* before,
                               uint64_t h2d, uint64_t d2h, const char* what) {
  ember_program_stats now;
  ember_program_get_stats(program, &now);
  EXPECT(now.runs == before->runs + 1, "%s: runs %" PRIu64 " -> %" PRIu64, what,
              before->runs, now.runs);
  EXPECT(now.bytes_host_to_device - before->bytes_host_to_device == h2d,
              "%s: %" PRIu64 " bytes host->device, expected %" PRIu64, what,
              now.bytes_host_to_device - before->bytes_host_to_device, h2d);
  EXPECT(now.bytes_device_to_host - before->bytes_device_to_host == d2h,
              "%s: %" PRIu64 " bytes device->host, expected %" PRIu64, what,
              now.bytes_device_to_host - before->bytes_device_to_host, d2h);
  printf("  %-34s runs=%" PRIu64 " h2d=+%" PRIu64 " d2h=+%" PRIu64 "\n", what, now.runs,
         now.bytes_host_to_device - before->bytes_host_to_device,
         now.bytes_device_to_host - before->bytes_device_to_host);
  *before = now;
}

/* Host, device, changed device pointers, misaligned device pointers, mixed, host again:
 * each result equal to the CPU's, each run's copies counted exactly. */
static void run_binding_case(const char* dir, const char* name) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  ember_program* cpu = NULL;
  ember_program* gpu = NULL;
  if (!COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CPU, &cpu))) ||
      !COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CUDA, &gpu)))) {
    ember_program_destroy(cpu);
    free(plan);
    return;
  }
  g_rng = hash_name(name) ^ 0x5555u;
  ember_tensor_info in_info[16], out_info[16];
  buffers in = host_buffers(cpu, true, in_info, -1.0, 1.0);
  buffers expected = host_buffers(cpu, false, out_info, 0, 0);
  buffers got = host_buffers(gpu, false, out_info, 0, 0);
  const size_t in_bytes = total_bytes(in_info, in.count);
  const size_t out_bytes = total_bytes(out_info, expected.count);
  char what[96];
  ember_program_stats stats;
  ember_program_get_stats(cpu, &stats);
  EXPECT(stats.runs == 0 && stats.bytes_host_to_device == 0 &&
              stats.bytes_device_to_host == 0, "%s: fresh CPU program stats not zero", name);
  COUNT(CHECK_OK(ember_program_run(cpu, in.bindings, in.count, expected.bindings, expected.count)));
  ember_program_get_stats(cpu, &stats);
  EXPECT(stats.runs == 1 && stats.bytes_host_to_device == 0 &&
              stats.bytes_device_to_host == 0, "%s: CPU program copies", name);

  ember_program_get_stats(gpu, &stats);
  EXPECT(stats.runs == 0 && stats.bytes_host_to_device == 0, "%s: fresh stats", name);

  /* 1. Host memory: staged, counted. */
  snprintf(what, sizeof what, "%s host", name);
  COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, got.bindings, got.count)));
  expect_stats_delta(gpu, &stats, in_bytes, out_bytes, what);
  compare_outputs(what, out_info, got.count, expected.data, got.data, true);

  /* 2. Device memory: in place, nothing copied. Two sets, alternated, so the graph is
   * updated both ways; then misaligned pointers (staged on the device where a GEMM needs
   * more alignment; one element off, used in place by the other kernels). */
  device_set din[4], dout[4];
  const size_t offsets[4] = {0, 0, 16, 0}, elements[4] = {0, 0, 0, 1};
  const char* labels[4] = {"device A", "device B", "device +16B", "device +1 element"};
  for (int s = 0; s < 4; ++s) {
    device_buffers(in_info, in.count, offsets[s], elements[s], &din[s]);
    device_buffers(out_info, got.count, offsets[s], elements[s], &dout[s]);
    upload(&din[s], &in);
  }
  const int order[6] = {0, 1, 0, 2, 3, 1};
  for (int k = 0; k < 6; ++k) {
    const int s = order[k];
    snprintf(what, sizeof what, "%s %s", name, labels[s]);
    for (size_t o = 0; o < got.count; ++o) memset(got.data[o], 0xA5, out_info[o].nbytes);
    /* Poison the first output; the legacy stream does not order itself with the
     * program's non-blocking stream, so wait for it. */
    cu_ok(g_driver->cuMemsetD8Async(dout[s].blocks[0], 0xA5, out_info[0].nbytes + 16, NULL),
          "cuMemsetD8Async");
    cu_ok(g_driver->cuStreamSynchronize(NULL), "cuStreamSynchronize");
    COUNT(CHECK_OK(ember_program_run(gpu, din[s].bindings, in.count, dout[s].bindings,
                                     got.count)));
    expect_stats_delta(gpu, &stats, 0, 0, what);
    download(&got, &dout[s]);
    compare_outputs(what, out_info, got.count, expected.data, got.data, true);
  }

  /* The pointer changes were handled by updating graph nodes, never by a rebuild. */
  ember_cuda_executor_info info = info_of(gpu);
  printf("  %-34s graph=%d node updates=%" PRIu64 " rebuilds=%" PRIu64 "\n", name,
         (int)info.graph, info.graph_node_updates, info.graph_rebuilds);
  if (info.graph) {
    EXPECT(info.graph_node_updates > 0 && info.graph_rebuilds == 0,
           "%s: %" PRIu64 " graph node updates, %" PRIu64 " rebuilds", name,
           info.graph_node_updates, info.graph_rebuilds);
  }

  /* 3. Device inputs, host outputs: only the outputs are copied. */
  snprintf(what, sizeof what, "%s device in, host out", name);
  for (size_t o = 0; o < got.count; ++o) memset(got.data[o], 0xA5, out_info[o].nbytes);
  COUNT(CHECK_OK(ember_program_run(gpu, din[1].bindings, in.count, got.bindings, got.count)));
  expect_stats_delta(gpu, &stats, 0, out_bytes, what);
  compare_outputs(what, out_info, got.count, expected.data, got.data, true);

  /* 4. Host again. */
  snprintf(what, sizeof what, "%s host again", name);
  for (size_t o = 0; o < got.count; ++o) memset(got.data[o], 0xA5, out_info[o].nbytes);
  COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, got.bindings, got.count)));
  expect_stats_delta(gpu, &stats, in_bytes, out_bytes, what);
  compare_outputs(what, out_info, got.count, expected.data, got.data, true);

  for (int s = 0; s < 4; ++s) {
    free_device(&din[s]);
    free_device(&dout[s]);
  }
  free_buffers(&in);
  free_buffers(&expected);
  free_buffers(&got);
  ember_program_destroy(gpu);
  ember_program_destroy(cpu);
  free(plan);
}

/* Without a GPU: every case on the CPU executor alone (create and run), so the plans and
 * the CPU kernels of every case are exercised in CI. */
static size_t g_cpu_cases_passed;
static void run_cpu_case(const char* dir, const char* name, double low, double high) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  ember_program* cpu = NULL;
  if (!COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CPU, &cpu)))) {
    printf("  %-34s FAIL (create on the CPU)\n", name);
    free(plan);
    return;
  }
  g_rng = hash_name(name);
  ember_tensor_info in_info[16], out_info[16];
  buffers in = host_buffers(cpu, true, in_info, low, high);
  buffers out = host_buffers(cpu, false, out_info, 0, 0);
  if (COUNT(CHECK_OK(ember_program_run(cpu, in.bindings, in.count, out.bindings, out.count)))) {
    ++g_cpu_cases_passed;
  } else {
    printf("  %-34s FAIL (run on the CPU)\n", name);
  }
  free_buffers(&in);
  free_buffers(&out);
  ember_program_destroy(cpu);
  free(plan);
}

/* EMBEDDING with an index out of range: the run fails with EMBER_INVALID_ARGUMENT on both
 * executors (the CUDA kernel writes zeros and records the position; the run reports it),
 * and the next run with good indices succeeds and agrees with the CPU again. */
static void run_embedding_range_case(const char* dir, const char* name) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  ember_program* cpu = NULL;
  ember_program* gpu = NULL;
  if (!COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CPU, &cpu))) ||
      !COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CUDA, &gpu)))) {
    ember_program_destroy(cpu);
    free(plan);
    return;
  }
  g_rng = hash_name(name);
  ember_tensor_info in_info[16], out_info[16];
  buffers in = host_buffers(cpu, true, in_info, 0.0, 50.0);
  buffers cpu_out = host_buffers(cpu, false, out_info, 0, 0);
  buffers gpu_out = host_buffers(gpu, false, out_info, 0, 0);
  const size_t n = in_info[0].nbytes / ember_dtype_size(in_info[0].dtype);
  for (int bad = 0; bad < 2 && n > 5; ++bad) {
    const double good = load_value(in.data[0], in_info[0].dtype, 5);
    store_value(in.data[0], in_info[0].dtype, 5, bad == 0 ? 50.0 : -1.0);
    ember_status* cs = ember_program_run(cpu, in.bindings, in.count, cpu_out.bindings, cpu_out.count);
    ember_status* gs = ember_program_run(gpu, in.bindings, in.count, gpu_out.bindings, gpu_out.count);
    EXPECT(cs != NULL && ember_status_code_of(cs) == EMBER_INVALID_ARGUMENT,
           "%s: a bad index must fail on the CPU", name);
    EXPECT(gs != NULL && ember_status_code_of(gs) == EMBER_INVALID_ARGUMENT,
           "%s: a bad index must fail on the CUDA executor", name);
    printf("  %s bad index: cpu '%s'; cuda '%s'\n", name,
           cs != NULL ? ember_status_message(cs) : "(ok)",
           gs != NULL ? ember_status_message(gs) : "(ok)");
    ember_status_free(cs);
    ember_status_free(gs);
    store_value(in.data[0], in_info[0].dtype, 5, good);
    if (COUNT(CHECK_OK(ember_program_run(cpu, in.bindings, in.count, cpu_out.bindings,
                                         cpu_out.count))) &&
        COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, gpu_out.bindings,
                                         gpu_out.count)))) {
      compare_outputs(name, out_info, cpu_out.count, cpu_out.data, gpu_out.data, true);
    }
  }
  free_buffers(&in);
  free_buffers(&cpu_out);
  free_buffers(&gpu_out);
  ember_program_destroy(gpu);
  ember_program_destroy(cpu);
  free(plan);
}

/* ---- every 16-bit input -------------------------------------------------------------- */

/* Order of 16-bit float patterns along the number line: ulps between a and b are the
 * difference of their keys (+0 and -0 both 0). */
static int32_t ordered_key16(uint16_t bits) {
  return (bits & 0x8000u) != 0 ? -(int32_t)(bits & 0x7FFFu) : (int32_t)bits;
}

/* A GELU case over all 65536 16-bit patterns (make_cuda_op_plans.py's gelu_*_every16) on
 * the CUDA executor, against the exact values of every16_exact.bin, block `block` of its
 * four (float16 erf, float16 tanh, bfloat16 erf, bfloat16 tanh): NaN where expected (NaN
 * and both infinities in); elsewhere within a unit of the exact value, and at most 1% of
 * the inputs a unit off. In bfloat16, whose range reaches far smaller results, that holds
 * from x = -5 up; below, where they are under 1e-5, within 30% of it or 2^-120
 * (kernel_common.cuh gelu_erf_16bit: within a factor of 1.3 under -6, zero past -13). */
static void run_every16_case(const char* dir, const char* name, int block) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  char* exact_path = test_join(dir, "every16_exact.bin", "");
  size_t exact_size;
  uint8_t* exact = test_read_file(exact_path, &exact_size);
  free(exact_path);
  ember_program* gpu = NULL;
  if (!EXPECT(exact_size == 4u * 65536u * 2u, "every16_exact.bin: %zu bytes", exact_size) ||
      !COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CUDA, &gpu)))) {
    free(exact);
    free(plan);
    return;
  }
  ember_tensor_info in_info[2], out_info[2];
  buffers in = host_buffers(gpu, true, in_info, 0.0, 1.0);
  buffers out = host_buffers(gpu, false, out_info, 0, 0);
  const ember_dtype dtype = in_info[0].dtype;
  uint16_t* x = in.data[0];
  for (uint32_t h = 0; h < 65536u; ++h) x[h] = (uint16_t)h;
  if (COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, out.bindings, out.count)))) {
    const uint16_t* y = out.data[0];
    uint32_t off = 0, worst = 0, worst_at = 0, nan_mismatches = 0, tail_bad = 0;
    for (uint32_t h = 0; h < 65536u; ++h) {
      uint16_t want;
      memcpy(&want, exact + 2u * (65536u * (uint32_t)block + h), 2);
      const double e = load_value(&want, dtype, 0), a = load_value(&y[h], dtype, 0);
      if (isnan(e) || isnan(a)) {
        if (isnan(e) != isnan(a)) ++nan_mismatches;
        continue;
      }
      if (dtype == EMBER_DTYPE_BFLOAT16 && load_value(&x[h], dtype, 0) < -5.0) {
        if (fabs(a - e) > 0.3 * fabs(e) + 0x1p-120) ++tail_bad;
        continue;
      }
      const uint32_t ulps = (uint32_t)abs(ordered_key16(y[h]) - ordered_key16(want));
      if (ulps > 0) ++off;
      if (ulps > worst) {
        worst = ulps;
        worst_at = h;
      }
    }
    printf("  %-34s every 16-bit input: %u a unit off the exact value, at most %u units "
           "(input %#06x); %u NaN mismatches, %u tiny results over 30%% off\n",
           name, off, worst, worst_at, nan_mismatches, tail_bad);
    EXPECT(worst <= 1 && off <= 655 && nan_mismatches == 0 && tail_bad == 0,
           "%s: %u inputs off the exact value (at most 655 may be, by a unit), the worst by %u "
           "units (input %#06x); %u NaN where the exact value is not or the reverse; %u tiny "
           "results over 30%% off", name, off, worst, worst_at, nan_mismatches, tail_bad);
  }
  free_buffers(&in);
  free_buffers(&out);
  ember_program_destroy(gpu);
  free(exact);
  free(plan);
}

/* ---- dynamic batch ------------------------------------------------------------------ */

/* Host buffers for the inputs at batch `batch` (dim 0 of every input, coefficient 1), and
 * for the outputs that batch gives (ember_program_resolve_outputs). */
static void dynamic_buffers(const ember_program* program, int64_t batch, double low,
                            double high, ember_tensor_info* in_info, buffers* in,
                            ember_tensor_info* out_info, buffers* out) {
  in->count = ember_program_input_count(program);
  in->data = calloc(in->count + 1, sizeof(void*));
  in->bindings = calloc(in->count + 1, sizeof(ember_tensor_binding));
  for (size_t i = 0; i < in->count; ++i) {
    if (ember_program_input_info(program, i, &in_info[i]) != NULL) abort();
    const size_t element = ember_dtype_size(in_info[i].dtype);
    const size_t row = in_info[i].nbytes / (size_t)in_info[i].dims[0];
    in_info[i].dims[0] = batch;
    in_info[i].nbytes = row * (size_t)batch;
    in->data[i] = malloc(in_info[i].nbytes + 1);
    for (size_t k = 0; k < in_info[i].nbytes / element; ++k) {
      const double value = in_info[i].dtype == EMBER_DTYPE_BOOL ? (next_uniform(0.0, 1.0) < 0.5)
                                                                : next_uniform(low, high);
      store_value(in->data[i], in_info[i].dtype, k, value);
    }
    in->bindings[i] = binding_for(&in_info[i], in_info[i].nbytes == 0 ? NULL : in->data[i]);
  }
  out->count = ember_program_output_count(program);
  out->data = calloc(out->count + 1, sizeof(void*));
  out->bindings = calloc(out->count + 1, sizeof(ember_tensor_binding));
  if (!COUNT(CHECK_OK(ember_program_resolve_outputs(program, in->bindings, in->count, out_info,
                                                    out->count)))) {
    abort();
  }
  for (size_t o = 0; o < out->count; ++o) {
    out->data[o] = malloc(out_info[o].nbytes + 1);
    memset(out->data[o], 0xA5, out_info[o].nbytes + 1);
    out->bindings[o] = binding_for(&out_info[o], out_info[o].nbytes == 0 ? NULL : out->data[o]);
  }
}

/* A plan with a dynamic batch, at its largest, smallest and a middle batch and back (so
 * a smaller run after a larger one reads no stale rows), on the CPU and (with a GPU) on
 * the CUDA executor, which must agree. One the CUDA executor cannot run at its largest
 * shapes must be refused with EMBER_UNAVAILABLE, and AUTO must then pick the CPU. */
static void run_dynamic_case(const char* dir, const char* name, double low, double high,
                             bool supported, bool gpu_present) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  ember_program* cpu = NULL;
  ember_program* gpu = NULL;
  if (!COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CPU, &cpu)))) {
    free(plan);
    return;
  }
  if (gpu_present && !supported) {
    ember_status* status = create(plan, size, EMBER_EXECUTOR_CUDA, &gpu);
    EXPECT(status != NULL && ember_status_code_of(status) == EMBER_UNAVAILABLE,
           "%s: the CUDA executor must refuse this dynamic plan", name);
    printf("  %-34s refused as expected: %s\n", name,
           status != NULL ? ember_status_message(status) : "(created!)");
    ember_status_free(status);
    ember_program_destroy(gpu);
    gpu = NULL;
    ember_program* automatic = NULL;
    if (COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_AUTO, &automatic)))) {
      EXPECT(ember_program_executor(automatic) == EMBER_EXECUTOR_CPU, "%s: AUTO must fall back "
             "to the CPU", name);
    }
    ember_program_destroy(automatic);
  } else if (gpu_present && !COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CUDA, &gpu)))) {
    ember_program_destroy(cpu);
    free(plan);
    return;
  }
  int64_t mins[EMBER_MAX_RANK], maxs[EMBER_MAX_RANK];
  if (!COUNT(CHECK_OK(ember_program_input_dim_bounds(cpu, 0, mins, maxs)))) abort();
  const int64_t batches[] = {maxs[0], mins[0], (mins[0] + maxs[0]) / 2, maxs[0], mins[0] + 1};
  for (size_t b = 0; b < sizeof batches / sizeof batches[0]; ++b) {
    const int64_t batch = batches[b] > maxs[0] ? maxs[0] : batches[b];
    g_rng = hash_name(name) + (uint64_t)b;
    ember_tensor_info in_info[16], out_info[16], gpu_info[16];
    buffers in, cpu_out, gpu_out, unused;
    dynamic_buffers(cpu, batch, low, high, in_info, &in, out_info, &cpu_out);
    ember_status* cpu_status =
        ember_program_run(cpu, in.bindings, in.count, cpu_out.bindings, cpu_out.count);
    if (cpu_status != NULL && batch != maxs[0] &&
        strstr(ember_status_message(cpu_status), "the plan expects") != NULL) {
      /* An engine whose ember_program_run does not take dynamic bindings yet (as
       * test_dynamic_shapes.c allows): only the largest batch can run. */
      printf("  %-34s batch %lld skipped: %s\n", name, (long long)batch,
             ember_status_message(cpu_status));
      ember_status_free(cpu_status);
      free_buffers(&in);
      free_buffers(&cpu_out);
      continue;
    }
    bool ok = COUNT(CHECK_OK(cpu_status));
    if (gpu != NULL) {
      dynamic_buffers(cpu, batch, low, high, gpu_info, &unused, gpu_info + 8, &gpu_out);
      ok = COUNT(CHECK_OK(ember_program_run(gpu, in.bindings, in.count, gpu_out.bindings,
                                            gpu_out.count))) && ok;
      if (ok) {
        char what[160];
        snprintf(what, sizeof what, "%s batch %lld", name, (long long)batch);
        compare_outputs(what, out_info, cpu_out.count, cpu_out.data, gpu_out.data, true);
      }
      free_buffers(&unused);
      free_buffers(&gpu_out);
    }
    free_buffers(&in);
    free_buffers(&cpu_out);
  }
  ember_program_destroy(gpu);
  ember_program_destroy(cpu);
  free(plan);
}

static void run_dynamic_cases(const char* dir, const char* filter, bool gpu_present) {
  char* list = test_join(dir, "dynamic.txt", "");
  size_t count;
  char** lines = test_read_lines(list, &count);
  free(list);
  for (size_t i = 0; i < count; ++i) {
    char name[128];
    double low, high, scale = 1.0;
    int supported;
    const int fields = sscanf(lines[i], "%127s %lf %lf %d %lf", name, &low, &high, &supported,
                              &scale);
    if (fields != 4 && fields != 5) {
      EXPECT(false, "bad line in dynamic.txt: %s", lines[i]);
      continue;
    }
    if (strstr(name, filter) != NULL) {
      g_nmse_scale = scale;
      run_dynamic_case(dir, name, low, high, supported != 0, gpu_present);
      g_nmse_scale = 1.0;
    }
  }
  test_free_lines(lines, count);
}

static double now_us(void) {
  struct timespec t;
  timespec_get(&t, TIME_UTC);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Not a check: how long one run takes with device-resident inputs and outputs (the
 * host's work per call plus the GPU's), printed for the record. */
static void time_case(const char* dir, const char* name, int iterations) {
  char* path = test_join(dir, name, ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  ember_program* gpu = NULL;
  if (!COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CUDA, &gpu)))) {
    free(plan);
    return;
  }
  ember_tensor_info in_info[16], out_info[16];
  /* [0, 1): integer inputs (token indices) are then 0, in range. */
  buffers in = host_buffers(gpu, true, in_info, 0.0, 1.0);
  buffers out = host_buffers(gpu, false, out_info, 0, 0);
  device_set din, dout;
  device_buffers(in_info, in.count, 0, 0, &din);
  device_buffers(out_info, out.count, 0, 0, &dout);
  upload(&din, &in);
  double best = 1e30, total = 0.0;
  for (int i = 0; i < iterations + 10; ++i) {
    const double start = now_us();
    if (!COUNT(CHECK_OK(ember_program_run(gpu, din.bindings, in.count, dout.bindings,
                                          out.count)))) {
      break;
    }
    const double took = now_us() - start;
    if (i >= 10) { /* after warm-up */
      total += took;
      if (took < best) best = took;
    }
  }
  const ember_cuda_executor_info info = info_of(gpu);
  printf("timing %-34s device-resident run: mean %.1f us, best %.1f us over %d runs "
         "(%u steps, %u fused activations, %u relocated, graph %d)\n",
         name, total / iterations, best, iterations, info.steps, info.fused_activations,
         info.relocated_tensors, (int)info.graph);
  free_device(&din);
  free_device(&dout);
  free_buffers(&in);
  free_buffers(&out);
  ember_program_destroy(gpu);
  free(plan);
}

/* Each case of cases.txt whose name contains `filter` and whose line number is `shard`
 * modulo `shards`, on the CPU executor alone. */
static void run_cpu_only(const char* dir, const char* filter, size_t shard, size_t shards) {
  char* list = test_join(dir, "cases.txt", "");
  size_t count;
  char** lines = test_read_lines(list, &count);
  free(list);
  size_t run = 0;
  for (size_t i = 0; i < count; ++i) {
    char name[128];
    double low, high;
    double scale = 1.0;
    if (sscanf(lines[i], "%127s %lf %lf %lf", name, &low, &high, &scale) < 3) {
      EXPECT(false, "bad line in cases.txt: %s", lines[i]);
      continue;
    }
    g_nmse_scale = scale;
    /* The chain cases are for the GPU (make_cuda_op_plans.py wgmma_chain_cases). */
    if (i % shards == shard && strstr(name, filter) != NULL &&
        strncmp(name, "wgmma_chain_", 12) != 0) {
      ++run;
      run_cpu_case(dir, name, low, high);
    }
  }
  test_free_lines(lines, count);
  g_nmse_scale = 1.0;
  printf("op cases on the CPU executor alone: %zu of %zu ran\n", g_cpu_cases_passed, run);
}

/* Whether environment variable `name` is set to `value` (the test's variants). */
static bool env_is(const char* name, const char* value) {
  const char* text = getenv(name);
  return text != NULL && strcmp(text, value) == 0;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s DATA_DIR [FILTER | time=CASE]\n", argv[0]);
    return 2;
  }
  const char* filter = argc == 3 ? argv[2] : "";
  const char* dir = argv[1];
  /* EMBER_TEST_CPU_SHARD=k/n: without a GPU, only every n-th case from the k-th, so
   * that ctest runs the CPU half on several cores (CMakeLists.txt); with one, the GPU
   * half runs every case in shard 0 and the other shards have nothing to do. */
  size_t shard = 0, shards = 1;
  const char* shard_text = getenv("EMBER_TEST_CPU_SHARD");
  if (shard_text != NULL && (sscanf(shard_text, "%zu/%zu", &shard, &shards) != 2 ||
                             shards == 0 || shard >= shards)) {
    fprintf(stderr, "EMBER_TEST_CPU_SHARD=%s: expected k/n with k < n, as 1/2\n", shard_text);
    return 2;
  }
  ember_status* status = ember_cuda_driver_get(&g_driver);
  const ember_cublaslt_library* lt = NULL;
  if (status == NULL) status = ember_cublaslt_library_get(&lt);
  if (status != NULL) {
    /* The variants (CMakeLists.txt sets one of these settings for each) would run the
     * same CPU half again: only the CUDA half differs, and there is none here. Without a
     * GPU the conv2d one alone took 166 s of CI's Debug run. */
    static const char* const variant_settings[] = {
        "EMBER_CUDA_GRAPHS",      "EMBER_CUDA_WGMMA", "EMBER_CUDA_GEMM_WGMMA",
        "EMBER_CUDA_GEMM_NARROW", "EMBER_CUDA_PDL",   "EMBER_CUDA_GEMM_CHAIN",
        "EMBER_CUDA_CONV_SPLIT_K"};
    const char* variant = NULL;
    for (size_t i = 0; i < sizeof variant_settings / sizeof variant_settings[0]; ++i) {
      if (getenv(variant_settings[i]) != NULL) variant = variant_settings[i];
    }
    if (variant != NULL) {
      printf("SKIP test_cuda_ops (the %s variant): %s; the CPU half runs in "
             "cuda.test_cuda_ops\n",
             variant, ember_status_message(status));
      ember_status_free(status);
      return SKIP_EXIT_CODE;
    }
    run_cpu_only(dir, filter, shard, shards);
    if (shard == 0) run_dynamic_cases(dir, filter, false);
    printf("SKIP test_cuda_ops: %s\n", ember_status_message(status));
    ember_status_free(status);
    const int cpu_result = test_finish("test_cuda_ops (CPU half)", test_counted_checks());
    return cpu_result != 0 ? cpu_result : SKIP_EXIT_CODE;
  }
  if (shard != 0) {
    printf("SKIP test_cuda_ops (CPU shard %zu of %zu): a GPU is here, and shard 0 runs every "
           "case on both executors\n", shard, shards);
    return SKIP_EXIT_CODE;
  }
  CUdevice device;
  char device_name[128] = "?";
  if (!cu_ok(g_driver->cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !cu_ok(g_driver->cuDevicePrimaryCtxRetain(&g_context, device), "cuDevicePrimaryCtxRetain") ||
      !cu_ok(g_driver->cuCtxPushCurrent(g_context), "cuCtxPushCurrent")) {
    return 1;
  }
  g_driver->cuDeviceGetName(device_name, (int)sizeof device_name, device);
  g_driver->cuDeviceGetAttribute(&g_sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  g_gemm_wgmma_forced = env_is("EMBER_CUDA_GEMM_WGMMA", "1");
  g_gemm_narrow_forced = env_is("EMBER_CUDA_GEMM_NARROW", "1");
  g_branches_off = env_is("EMBER_CUDA_BRANCHES", "0");
  g_gemm_chain = env_is("EMBER_CUDA_GEMM_CHAIN", "1");
  printf("test_cuda_ops: device 0 %s, driver %d, cuBLASLt %zu\n", device_name,
         g_driver->driver_version, lt->version);

  char* list = test_join(dir, "cases.txt", "");
  size_t count;
  char** lines = test_read_lines(list, &count);
  free(list);
  for (size_t i = 0; i < count; ++i) {
    char name[128];
    double low, high;
    double scale = 1.0;
    if (sscanf(lines[i], "%127s %lf %lf %lf", name, &low, &high, &scale) < 3) {
      EXPECT(false, "bad line in cases.txt: %s", lines[i]);
      continue;
    }
    g_nmse_scale = scale;
    if (strstr(name, filter) != NULL) run_op_case(dir, name, low, high);
  }
  test_free_lines(lines, count);
  g_nmse_scale = 1.0;
  printf("op cases: %zu of %zu agree with the CPU; worst nmse f32 %.2e f16 %.2e bf16 %.2e\n",
         g_cases_passed, g_cases_run, g_worst_nmse[EMBER_DTYPE_FLOAT32],
         g_worst_nmse[EMBER_DTYPE_FLOAT16], g_worst_nmse[EMBER_DTYPE_BFLOAT16]);
  printf("op cases: %u steps, %u GEMMs, %u biases fused into cuBLASLt epilogues, %u "
         "activations fused (cuBLASLt or gemv), %u bias_act kernels, %u CONV2D as im2col + "
         "GEMM (%u of them channels last), %u as implicit GEMM (%u of them on wgmma, which this GPU %s; %u "
         "of them space-to-depth, %u on the halo kernel (%u keeping their weights, %u with images stacked); %u residuals fused), %u ADDs done by a LAYER_NORM, %u LINEAR as gemv, %u LINEAR + activation on "
         "gemm_wgmma (which this GPU %s), %u SDPA on the flash kernel (%u layout copies folded)\n",
         g_totals.steps, g_totals.gemms, g_totals.fused_biases, g_totals.fused_activations,
         g_totals.bias_act_kernels, g_totals.conv_gemms, g_totals.conv_gemms_nhwc,
         g_totals.conv_igemms,
         g_totals.conv_wgmmas, g_totals.conv_wgmma ? "takes" : "does not take",
         g_totals.conv_folds, g_totals.conv_halos, g_totals.conv_halo_units, g_totals.conv_halo_stacked, g_totals.fused_residuals, g_totals.norm_adds, g_totals.gemv_kernels,
         g_totals.gemm_wgmmas, g_totals.gemm_wgmma ? "has" : "does not have", g_totals.sdpa_flash,
         g_totals.folded_layout_ops);

  printf("op cases: %u LINEAR on the narrow GEMM kernel (which this executor %s)\n",
         g_totals.gemm_narrows, g_totals.gemm_narrow ? "takes" : "does not take");
  printf("op cases: %u chain kernels of %u LINEARs\n", g_totals.gemm_chains,
         g_totals.gemm_chain_layers);
  /* Where gemm_wgmma runs and chains are on, the chain cases chained (each case's check
   * says how; this says they were not all skipped): 4 chains. */
  if (g_totals.gemm_wgmma && g_gemm_chain && strstr("wgmma_chain_", filter) != NULL) {
    EXPECT(g_totals.gemm_chains >= 4, "%u chain kernels, expected at least 4",
           g_totals.gemm_chains);
  }
  printf("op cases: %u CONV2D of too few tiles split over K on the wgmma kernel (which this "
         "executor %s)\n", g_totals.conv_splits, g_totals.conv_split_k ? "does" : "does not do");
  /* Where it does, the split cases ran so (each case's check says how; this says they were
   * not all skipped): 5 split convs in each of float16 and bfloat16. */
  if (g_totals.conv_split_k && strstr("conv2d_split_", filter) != NULL) {
    EXPECT(g_totals.conv_splits >= 10, "%u CONV2D split over K, expected at least 10",
           g_totals.conv_splits);
  }
  /* Under EMBER_CUDA_GEMM_NARROW=1 or auto on a GPU that has the kernel, the narrow cases
   * ran on it (the per-case checks say which; this says they were not all skipped). */
  if (g_totals.gemm_narrow && strstr("gemm_narrow", filter) != NULL) {
    EXPECT(g_totals.gemm_narrows >= 8, "%u LINEARs on the narrow GEMM kernel, expected at least 8",
           g_totals.gemm_narrows);
  }

  /* On a GPU that has PDL, with graphs: EMBER_CUDA_PDL=1 (cuda.test_cuda_ops_pdl) used it
   * in the graphs, and the checks above held with it; 0 (cuda.test_cuda_ops_nopdl, the
   * control) used it nowhere and timed nothing; auto (the default, cuda.test_cuda_ops)
   * timed every graph it could have used it in and used it only where so chosen. */
  int major = 0;
  g_driver->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  const bool pdl_gpu = major >= 9 && !env_is("EMBER_CUDA_GRAPHS", "0");
  const bool pdl_on = pdl_gpu && env_is("EMBER_CUDA_PDL", "1");
  const bool pdl_auto = pdl_gpu && !env_is("EMBER_CUDA_PDL", "1") && !env_is("EMBER_CUDA_PDL", "0");
  printf("op cases: %u programmatic (PDL) graph edges; %u graphs timed with and without PDL, "
         "%u of them kept it\n", g_totals.programmatic_edges, g_pdl_timed, g_pdl_kept);
  /* Where this GPU takes the halo kernel, the whole list ran every one of its kernels
   * (conv2d_halo_widths takes the widths no other case does). */
  if (filter[0] == '\0' && g_totals.conv_halo) {
    const uint32_t every = ((1u << EMBER_K_CONV_HALO_WIDTH_COUNT) - 1u) |
                           ((1u << 2 * EMBER_K_CONV_HALO_UNITS_WIDTH_COUNT) - 1u) << 8;
    EXPECT(g_totals.conv_halo_kernels == every,
           "the halo kernels that ran: mask %#x, expected %#x (kernel ids' order, "
           "cuda_executor.h conv_halo_kernels)", g_totals.conv_halo_kernels, every);
  }
  if (g_cases_run > 0) {
    if (pdl_auto) {
      /* Some graph timed, unless a filter chose the cases: it may choose only programs of
       * one kernel, where there is nothing to time. */
      EXPECT((filter[0] != '\0' || g_pdl_timed > 0) && g_totals.pdl == (g_pdl_kept > 0),
             "EMBER_CUDA_PDL=auto: %u graphs timed, %u kept PDL, PDL %s in the graphs",
             g_pdl_timed, g_pdl_kept, g_totals.pdl ? "on" : "off");
    } else {
      EXPECT(g_totals.pdl == pdl_on && (g_totals.programmatic_edges > 0) == pdl_on &&
                 g_pdl_timed == 0,
             "PDL %s in the graphs (%u programmatic edges, %u graphs timed), expected %s and "
             "none timed", g_totals.pdl ? "on" : "off", g_totals.programmatic_edges,
             g_pdl_timed, pdl_on ? "on" : "off");
    }
  }

  static const char* binding_cases[] = {"mlp_f32", "outputs_f32", "linear_bias_input_f16",
                                        "attention_bf16", "linear_gelu_tanh_out_f32",
                                        "where_bcast_f16", "cast_to_i64_bf16",
                                        "sdpa_mask_bool_f32", "cat_mid_f16",
                                        "convnet_block_f32", "gemv_chain_f16",
                                        "permute_w16_f16", "permute_inner6_f32",
                                        "permute_bool16_f32", "slice_rows_step2_bf16",
                                        "expand_inner_w_f16", "layer_norm_vec768_f16",
                                        "layer_norm_block_f32", "pool_max_resnet_bf16",
                                        "sdpa_flash_e64_f16", "sdpa_fold_gpt_bf16",
                                        "gemv_rows64_classifier_f16"};
  for (size_t i = 0; i < sizeof binding_cases / sizeof binding_cases[0]; ++i) {
    if (strstr(binding_cases[i], filter) != NULL) run_binding_case(dir, binding_cases[i]);
  }

  run_dynamic_cases(dir, filter, true);

  static const char* embedding_cases[] = {"embedding_i64_f32", "embedding_i32_bf16"};
  for (size_t i = 0; i < sizeof embedding_cases / sizeof embedding_cases[0]; ++i) {
    if (strstr(embedding_cases[i], filter) != NULL) {
      run_embedding_range_case(dir, embedding_cases[i]);
    }
  }

  static const char* every16_cases[] = {"gelu_erf_every16_f16", "gelu_tanh_every16_f16",
                                        "gelu_erf_every16_bf16", "gelu_tanh_every16_bf16"};
  for (size_t i = 0; i < sizeof every16_cases / sizeof every16_cases[0]; ++i) {
    if (strstr(every16_cases[i], filter) != NULL) run_every16_case(dir, every16_cases[i], (int)i);
  }

  if (filter[0] == '\0') {
    time_case(dir, "relu_scalar_f32", 200);
    time_case(dir, "mlp_f16", 200);
    time_case(dir, "sdpa_gpt_f16", 200);
    time_case(dir, "sdpa_flash_encoder_f16", 200); /* [4, 12, 128, 64] */
    time_case(dir, "decoder_block_f16", 200);
    time_case(dir, "convnet_block_f16", 200);
    char* bench_list = test_join(dir, "bench.txt", "");
    size_t bench_count;
    char** bench = test_read_lines(bench_list, &bench_count);
    free(bench_list);
    for (size_t i = 0; i < bench_count; ++i) time_case(dir, bench[i], 200);
    test_free_lines(bench, bench_count);
  } else if (strncmp(filter, "time=", 5) == 0) {
    time_case(dir, filter + 5, 200); /* one plan timed, no case run (no name has '=') */
  }

  CUcontext popped;
  g_driver->cuCtxPopCurrent(&popped);
  g_driver->cuDevicePrimaryCtxRelease(device);
  return test_finish("test_cuda_ops", test_counted_checks());
}
