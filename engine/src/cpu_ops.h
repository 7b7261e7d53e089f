/* CPU reference kernels, one function per op family, and what they share: element loads
 * and stores that convert every dtype to and from double, and a walker over broadcast
 * dims.
 *
 * Kernels run on a verified plan (plan.h). They compute in double and round once on
 * store, so the CPU executor can serve as the numerics oracle. A kernel whose output has
 * no elements returns at once; every product of dims it computes is then bounded by a
 * real tensor's element count. Only EMBEDDING can fail (an index out of range, which the
 * plan cannot rule out); every other kernel returns nothing.
 *
 * Shapes come from `args->tensors`, this run's tensor table: the plan's own for a plan
 * whose shapes are static, else a copy with the dynamic dims of this run filled in. Every
 * tensor is dense and row-major in its actual shape. */
#ifndef EMBER_SRC_CPU_OPS_H_
#define EMBER_SRC_CPU_OPS_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "float_formats.h"
#include "plan.h"

typedef struct ember_cpu_op_args {
  const ember_plan* plan;
  const ember_op_desc* op;
  uint32_t op_index;
  /* This run's tensor descriptors and memory, by tensor index. */
  const ember_tensor_desc* tensors;
  void* const* tensor_data;
  /* Scratch the executor sized at prepare for the ops that need it (SDPA: one row of
   * scores and one output row). */
  double* scratch;
} ember_cpu_op_args;

/* cpu_ops_matmul.c */
void ember_cpu_linear(const ember_cpu_op_args* args);  /* LINEAR */
void ember_cpu_matmul(const ember_cpu_op_args* args);  /* MATMUL */
void ember_cpu_conv2d(const ember_cpu_op_args* args);  /* CONV2D */
void ember_cpu_sdpa(const ember_cpu_op_args* args);    /* SDPA */
/* cpu_ops_elementwise.c */
void ember_cpu_unary(const ember_cpu_op_args* args);   /* RELU GELU SIGMOID TANH SILU NEG EXP
                                                          LOG SQRT RSQRT ABS RECIPROCAL CLAMP */
void ember_cpu_binary(const ember_cpu_op_args* args);  /* ADD SUB MUL DIV POW MAXIMUM MINIMUM */
void ember_cpu_where(const ember_cpu_op_args* args);   /* WHERE */
void ember_cpu_cast(const ember_cpu_op_args* args);    /* CAST */
/* cpu_ops_layout.c */
void ember_cpu_copy(const ember_cpu_op_args* args);    /* RESHAPE COPY */
void ember_cpu_permute(const ember_cpu_op_args* args); /* PERMUTE */
void ember_cpu_expand(const ember_cpu_op_args* args);  /* EXPAND */
void ember_cpu_slice(const ember_cpu_op_args* args);   /* SLICE */
void ember_cpu_cat(const ember_cpu_op_args* args);     /* CAT */
ember_status* ember_cpu_embedding(const ember_cpu_op_args* args); /* EMBEDDING */
/* cpu_ops_normalization.c: normalizations, reductions and pools */
void ember_cpu_softmax(const ember_cpu_op_args* args);    /* SOFTMAX */
void ember_cpu_layer_norm(const ember_cpu_op_args* args); /* LAYER_NORM */
void ember_cpu_reduce(const ember_cpu_op_args* args);     /* REDUCE_SUM REDUCE_MEAN REDUCE_MAX */
void ember_cpu_pool2d(const ember_cpu_op_args* args);     /* MAX_POOL2D AVG_POOL2D */
void ember_cpu_adaptive_avg_pool2d(const ember_cpu_op_args* args); /* ADAPTIVE_AVG_POOL2D */

static inline const ember_tensor_desc* ember_cpu_input_tensor(const ember_cpu_op_args* args,
                                                              uint32_t i) {
  return &args->tensors[ember_plan_op_input(args->plan, args->op, i)];
}
static inline const ember_tensor_desc* ember_cpu_output_tensor(const ember_cpu_op_args* args,
                                                               uint32_t i) {
  return &args->tensors[ember_plan_op_output(args->plan, args->op, i)];
}
static inline const void* ember_cpu_input_data(const ember_cpu_op_args* args, uint32_t i) {
  return args->tensor_data[ember_plan_op_input(args->plan, args->op, i)];
}
static inline void* ember_cpu_output_data(const ember_cpu_op_args* args, uint32_t i) {
  return args->tensor_data[ember_plan_op_output(args->plan, args->op, i)];
}
static inline int64_t ember_cpu_attr(const ember_cpu_op_args* args, uint32_t i) {
  return ember_plan_op_attr(args->plan, args->op, i);
}
static inline double ember_cpu_attr_f64(const ember_cpu_op_args* args, uint32_t i) {
  const int64_t bits = ember_plan_op_attr(args->plan, args->op, i);
  double value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

/* Element `index` of a tensor of any dtype, as a double (int64 beyond 2^53 rounds). */
static inline double ember_cpu_load(const void* base, ember_dtype dtype, size_t index) {
  const uint8_t* bytes = (const uint8_t*)base;
  switch (dtype) {
    case EMBER_DTYPE_FLOAT32: {
      float value;
      memcpy(&value, bytes + 4u * index, sizeof value);
      return value;
    }
    case EMBER_DTYPE_FLOAT16:
    case EMBER_DTYPE_BFLOAT16: {
      uint16_t bits;
      memcpy(&bits, bytes + 2u * index, sizeof bits);
      return dtype == EMBER_DTYPE_FLOAT16 ? ember_f16_to_f32(bits) : ember_bf16_to_f32(bits);
    }
    case EMBER_DTYPE_INT64: {
      int64_t value;
      memcpy(&value, bytes + 8u * index, sizeof value);
      return (double)value;
    }
    case EMBER_DTYPE_INT32: {
      int32_t value;
      memcpy(&value, bytes + 4u * index, sizeof value);
      return value;
    }
    case EMBER_DTYPE_BOOL:
      return bytes[index] != 0 ? 1.0 : 0.0;
  }
  return 0.0;
}

/* Element `index` of an integer or bool tensor. */
static inline int64_t ember_cpu_load_int(const void* base, ember_dtype dtype, size_t index) {
  const uint8_t* bytes = (const uint8_t*)base;
  if (dtype == EMBER_DTYPE_INT64) {
    int64_t value;
    memcpy(&value, bytes + 8u * index, sizeof value);
    return value;
  }
  if (dtype == EMBER_DTYPE_INT32) {
    int32_t value;
    memcpy(&value, bytes + 4u * index, sizeof value);
    return value;
  }
  return bytes[index] != 0;
}

/* Stores `value` in a float tensor, rounded to its dtype (via float32, round-to-nearest-
 * even). */
static inline void ember_cpu_store(void* base, ember_dtype dtype, size_t index, double value) {
  uint8_t* bytes = (uint8_t*)base;
  const float narrowed = (float)value;
  if (dtype == EMBER_DTYPE_FLOAT32) {
    memcpy(bytes + 4u * index, &narrowed, sizeof narrowed);
    return;
  }
  const uint16_t bits =
      dtype == EMBER_DTYPE_FLOAT16 ? ember_f32_to_f16(narrowed) : ember_f32_to_bf16(narrowed);
  memcpy(bytes + 2u * index, &bits, sizeof bits);
}

/* Stores an integer in an integer or bool tensor (int32 wraps; bool is value != 0). */
static inline void ember_cpu_store_int(void* base, ember_dtype dtype, size_t index,
                                       int64_t value) {
  uint8_t* bytes = (uint8_t*)base;
  if (dtype == EMBER_DTYPE_INT64) {
    memcpy(bytes + 8u * index, &value, sizeof value);
  } else if (dtype == EMBER_DTYPE_INT32) {
    const int32_t narrowed = (int32_t)(uint32_t)(uint64_t)value;
    memcpy(bytes + 4u * index, &narrowed, sizeof narrowed);
  } else {
    bytes[index] = value != 0;
  }
}

/* Walks the positions of an output shape `dims[0..rank)` in row-major order, tracking
 * the matching element offsets of up to three inputs broadcast to it (NumPy rules,
 * aligned at the last dim). A step along an input dim of size 1 moves that input by 0. */
#define EMBER_CPU_WALK_INPUTS 3
typedef struct ember_cpu_broadcast_walk {
  uint32_t rank;
  size_t dims[EMBER_MAX_RANK];
  size_t strides[EMBER_CPU_WALK_INPUTS][EMBER_MAX_RANK];
  size_t index[EMBER_MAX_RANK];
  size_t offset[EMBER_CPU_WALK_INPUTS];
} ember_cpu_broadcast_walk;

/* `unit[k]` is the element stride of one step in input k's last walked dim (1 for a
 * plain elementwise op, M*K for a matmul batch, ...). Input 2 is absent (stride 0). */
void ember_cpu_broadcast_walk_init(ember_cpu_broadcast_walk* walk, const int64_t* out_dims,
                                   uint32_t out_rank, const int64_t* a_dims, uint32_t a_rank,
                                   size_t a_unit, const int64_t* b_dims, uint32_t b_rank,
                                   size_t b_unit);
/* Adds input `k` (0..2) to a walk. */
void ember_cpu_broadcast_walk_set(ember_cpu_broadcast_walk* walk, uint32_t k,
                                  const int64_t* dims, uint32_t rank, size_t unit);

/* Advances to the next position (wrapping to all zeros after the last one). */
static inline void ember_cpu_broadcast_walk_next(ember_cpu_broadcast_walk* walk) {
  for (uint32_t d = walk->rank; d-- > 0;) {
    ++walk->index[d];
    for (uint32_t k = 0; k < EMBER_CPU_WALK_INPUTS; ++k) walk->offset[k] += walk->strides[k][d];
    if (walk->index[d] < walk->dims[d]) return;
    for (uint32_t k = 0; k < EMBER_CPU_WALK_INPUTS; ++k) {
      walk->offset[k] -= walk->strides[k][d] * walk->dims[d];
    }
    walk->index[d] = 0;
  }
}

/* Product of dims[begin..end), as a size. */
static inline size_t ember_cpu_dims_product(const int64_t* dims, uint32_t begin, uint32_t end) {
  size_t product = 1;
  for (uint32_t i = begin; i < end; ++i) product *= (size_t)dims[i];
  return product;
}

#endif /* EMBER_SRC_CPU_OPS_H_ */
