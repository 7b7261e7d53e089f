/* Parameters of Ember's CUDA kernels: one struct per kernel family, shared by the host
 * side (C, cuda_executor.c fills them) and the device side (the .cu files read them).
 *
 * Every kernel takes exactly one parameter, its struct, by value. That keeps a launch
 * uniform (kernelParams = { &struct }) and lets the executor patch the device addresses
 * inside a struct when the caller's bound pointers change, then hand the whole struct to
 * cuGraphExecKernelNodeSetParams. Device addresses are uint64_t (CUdeviceptr) so the
 * layout is the same in both compilers: only fixed-width fields, each naturally aligned,
 * checked by the static assertions at the end.
 *
 * Element types are not fields: each kernel exists once per dtype (name suffix _f32,
 * _f16, _bf16; cuda_kernels.c names them) and computes in float32. */
#ifndef EMBER_SRC_CUDA_KERNEL_PARAMS_H_
#define EMBER_SRC_CUDA_KERNEL_PARAMS_H_

#include <stddef.h>
#include <stdint.h>

#define EMBER_K_MAX_RANK 8

/* Threads per block for every kernel (the reductions assume a multiple of 32, at most
 * 1024). */
#define EMBER_K_BLOCK 256

/* Elementwise unary functions; also the activations of the bias_act kernel. */
typedef enum ember_k_unary_op {
  EMBER_K_UNARY_IDENTITY = 0,
  EMBER_K_UNARY_RELU = 1,
  EMBER_K_UNARY_GELU_ERF = 2,
  EMBER_K_UNARY_GELU_TANH = 3,
  EMBER_K_UNARY_SIGMOID = 4,
  EMBER_K_UNARY_TANH = 5,
  EMBER_K_UNARY_SILU = 6,
} ember_k_unary_op;

typedef enum ember_k_binary_op {
  EMBER_K_BINARY_ADD = 0,
  EMBER_K_BINARY_SUB = 1,
  EMBER_K_BINARY_MUL = 2,
  EMBER_K_BINARY_DIV = 3,
} ember_k_binary_op;

/* ember_unary_<dtype>: y[i] = f(x[i]) for i < count. */
typedef struct ember_k_unary_params {
  uint64_t x;
  uint64_t y;
  uint64_t count;
  int32_t op; /* ember_k_unary_op */
  int32_t reserved;
} ember_k_unary_params;

/* ember_binary_<dtype>: y = a op b, broadcast. The host collapses dims first, so `rank`
 * is usually 1 or 2. dims are y's; a_strides/b_strides are element strides of a and b
 * per y dim (0 where that input is broadcast along the dim). */
typedef struct ember_k_binary_params {
  uint64_t a;
  uint64_t b;
  uint64_t y;
  uint64_t count; /* elements of y */
  int32_t op;     /* ember_k_binary_op */
  uint32_t rank;  /* 1..EMBER_K_MAX_RANK */
  int64_t dims[EMBER_K_MAX_RANK];
  int64_t a_strides[EMBER_K_MAX_RANK];
  int64_t b_strides[EMBER_K_MAX_RANK];
} ember_k_binary_params;

/* ember_permute_<element size>: y[i] = x[offset(i)], where i walks y's dims row-major and
 * offset adds x_strides[d] (x's element stride along the x dim that becomes y dim d). */
typedef struct ember_k_permute_params {
  uint64_t x;
  uint64_t y;
  uint64_t count;
  uint32_t rank; /* 1..EMBER_K_MAX_RANK */
  uint32_t reserved;
  int64_t dims[EMBER_K_MAX_RANK];
  int64_t x_strides[EMBER_K_MAX_RANK];
} ember_k_permute_params;

/* ember_copy_bytes: nbytes bytes from x to y (RESHAPE, COPY); the regions do not overlap. */
typedef struct ember_k_copy_params {
  uint64_t x;
  uint64_t y;
  uint64_t nbytes;
} ember_k_copy_params;

/* ember_softmax_rows_<dtype> (inner == 1: one block per row of `dim` contiguous elements)
 * and ember_softmax_strided_<dtype> (inner > 1: one thread per (outer, inner) column).
 * x and y are viewed as [outer, dim, inner]. */
typedef struct ember_k_softmax_params {
  uint64_t x;
  uint64_t y;
  int64_t outer;
  int64_t dim;
  int64_t inner;
} ember_k_softmax_params;

/* ember_layer_norm_<dtype>: one block per row of `cols` elements; w and b (cols elements)
 * are used when has_weight / has_bias are set. */
typedef struct ember_k_layer_norm_params {
  uint64_t x;
  uint64_t w;
  uint64_t b;
  uint64_t y;
  int64_t rows;
  int64_t cols;
  float eps;
  int32_t has_weight;
  int32_t has_bias;
  int32_t reserved;
} ember_k_layer_norm_params;

/* ember_bias_act_<dtype>: the GEMM epilogue for what cuBLASLt did not fuse, in place on
 * y viewed as [rows, cols]: y = act(y + bias[col]). With `zero_input` set, y is not read
 * (a GEMM with K == 0): y = act(bias[col]), or act(0) without a bias. */
typedef struct ember_k_bias_act_params {
  uint64_t y;
  uint64_t bias;
  int64_t rows;
  int64_t cols;
  int32_t act; /* ember_k_unary_op */
  int32_t has_bias;
  int32_t zero_input;
  int32_t reserved;
} ember_k_bias_act_params;

/* The layouts above must be the same for gcc and nvcc: fixed-width fields, no padding. */
#if defined(__cplusplus)
#define EMBER_K_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define EMBER_K_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
EMBER_K_STATIC_ASSERT(sizeof(ember_k_unary_params) == 32, "unary params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_binary_params) == 40 + 3 * 8 * EMBER_K_MAX_RANK,
                      "binary params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_permute_params) == 32 + 2 * 8 * EMBER_K_MAX_RANK,
                      "permute params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_copy_params) == 24, "copy params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_softmax_params) == 40, "softmax params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_layer_norm_params) == 64, "layer norm params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_bias_act_params) == 48, "bias_act params layout");

#endif /* EMBER_SRC_CUDA_KERNEL_PARAMS_H_ */
