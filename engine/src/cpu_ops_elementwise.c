/* CPU kernels: elementwise unary ops (RELU GELU SIGMOID TANH SILU NEG EXP LOG SQRT RSQRT
 * ABS RECIPROCAL CLAMP), broadcasting binary ops (ADD SUB MUL DIV POW MAXIMUM MINIMUM),
 * WHERE and CAST. Values follow PyTorch: NaN propagates through RELU, CLAMP, MAXIMUM and
 * MINIMUM; the rest are the IEEE results of the C library's functions in double. */
#include <math.h>

#include "cpu_ops.h"

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct unary_params {
  int64_t gelu_approximate;
  double clamp_min;
  double clamp_max;
} unary_params;

static double apply_unary(ember_opcode opcode, const unary_params* p, double x) {
  switch (opcode) {
    case EMBER_OP_RELU:
      return x < 0.0 ? 0.0 : x; /* NaN passes through, as in PyTorch */
    case EMBER_OP_GELU:
      if (p->gelu_approximate == 0) {
        /* PyTorch's CPU kernels give NaN for the erf form at +inf (and so does this: the
         * oracle follows PyTorch); the tanh form gives +inf. Both give NaN at -inf. */
        if (isinf(x) && x > 0.0) return NAN;
        return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
      }
      return 0.5 * x *
             (1.0 + tanh(0.79788456080286535588 /* sqrt(2/pi) */ * (x + 0.044715 * x * x * x)));
    case EMBER_OP_SIGMOID:
      return sigmoid(x);
    case EMBER_OP_TANH:
      return tanh(x);
    case EMBER_OP_SILU:
      return x * sigmoid(x);
    case EMBER_OP_NEG:
      return -x;
    case EMBER_OP_EXP:
      return exp(x);
    case EMBER_OP_LOG:
      return log(x);
    case EMBER_OP_SQRT:
      return sqrt(x);
    case EMBER_OP_RSQRT:
      return 1.0 / sqrt(x);
    case EMBER_OP_ABS:
      return fabs(x);
    case EMBER_OP_RECIPROCAL:
      return 1.0 / x;
    case EMBER_OP_CLAMP:
      /* torch.clamp: min(max(x, lo), hi), so lo > hi gives hi; NaN stays NaN. */
      if (isnan(x)) return x;
      x = x < p->clamp_min ? p->clamp_min : x;
      return x > p->clamp_max ? p->clamp_max : x;
    default:
      return NAN; /* not reached on a verified plan */
  }
}

void ember_cpu_unary(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const ember_opcode opcode = args->op->opcode;
  unary_params params = {0, -INFINITY, INFINITY};
  if (opcode == EMBER_OP_GELU) params.gelu_approximate = ember_cpu_attr(args, 0);
  if (opcode == EMBER_OP_CLAMP) {
    params.clamp_min = ember_cpu_attr_f64(args, EMBER_ATTR_CLAMP_MIN_F64);
    params.clamp_max = ember_cpu_attr_f64(args, EMBER_ATTR_CLAMP_MAX_F64);
  }
  const size_t count = (size_t)y->numel;
  for (size_t i = 0; i < count; ++i) {
    ember_cpu_store(y_data, y->dtype, i,
                    apply_unary(opcode, &params, ember_cpu_load(x_data, x->dtype, i)));
  }
}

static double apply_binary(ember_opcode opcode, double a, double b) {
  switch (opcode) {
    case EMBER_OP_ADD: return a + b;
    case EMBER_OP_SUB: return a - b;
    case EMBER_OP_MUL: return a * b;
    case EMBER_OP_DIV: return a / b;
    case EMBER_OP_POW: return pow(a, b);
    case EMBER_OP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
    case EMBER_OP_MINIMUM: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
    default: return NAN; /* not reached on a verified plan */
  }
}

/* A walk over the output's dims but the last, with each input's stride along the last
 * dim (0 where it broadcasts): the inner loop runs over the last dim. */
static size_t start_walk(ember_cpu_broadcast_walk* walk, const ember_tensor_desc* y,
                         const ember_tensor_desc* const* inputs, uint32_t count,
                         size_t* inner_strides) {
  const uint32_t outer_rank = y->rank > 0 ? y->rank - 1 : 0;
  memset(walk, 0, sizeof *walk);
  walk->rank = outer_rank;
  for (uint32_t d = 0; d < outer_rank; ++d) walk->dims[d] = (size_t)y->dims[d];
  for (uint32_t k = 0; k < count; ++k) {
    const ember_tensor_desc* t = inputs[k];
    const bool has_last = t->rank > 0 && y->rank > 0;
    inner_strides[k] = has_last && t->dims[t->rank - 1] != 1 ? 1 : 0;
    const size_t unit = t->rank > 0 ? (size_t)t->dims[t->rank - 1] : 1;
    ember_cpu_broadcast_walk_set(walk, k, t->dims, t->rank > 0 ? t->rank - 1 : 0, unit);
  }
  return y->rank == 0 ? 1 : (size_t)y->dims[y->rank - 1];
}

void ember_cpu_binary(const ember_cpu_op_args* args) {
  const ember_tensor_desc* a = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* b = ember_cpu_input_tensor(args, 1);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const void* a_data = ember_cpu_input_data(args, 0);
  const void* b_data = ember_cpu_input_data(args, 1);
  void* y_data = ember_cpu_output_data(args, 0);
  const ember_opcode opcode = args->op->opcode;
  const ember_tensor_desc* inputs[2] = {a, b};
  size_t inner_strides[2];
  ember_cpu_broadcast_walk walk;
  const size_t inner = start_walk(&walk, y, inputs, 2, inner_strides);
  const size_t outer = (size_t)y->numel / inner;
  for (size_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < inner; ++i) {
      const double va = ember_cpu_load(a_data, a->dtype, walk.offset[0] + i * inner_strides[0]);
      const double vb = ember_cpu_load(b_data, b->dtype, walk.offset[1] + i * inner_strides[1]);
      ember_cpu_store(y_data, y->dtype, o * inner + i, apply_binary(opcode, va, vb));
    }
    ember_cpu_broadcast_walk_next(&walk);
  }
}

/* y = cond ? a : b, broadcasting all three; a copy of element bytes (any dtype). */
void ember_cpu_where(const ember_cpu_op_args* args) {
  const ember_tensor_desc* cond = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* a = ember_cpu_input_tensor(args, 1);
  const ember_tensor_desc* b = ember_cpu_input_tensor(args, 2);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const uint8_t* cond_data = ember_cpu_input_data(args, 0);
  const uint8_t* a_data = ember_cpu_input_data(args, 1);
  const uint8_t* b_data = ember_cpu_input_data(args, 2);
  uint8_t* y_data = ember_cpu_output_data(args, 0);
  const size_t size = ember_dtype_size(y->dtype);
  const ember_tensor_desc* inputs[3] = {cond, a, b};
  size_t inner_strides[3];
  ember_cpu_broadcast_walk walk;
  const size_t inner = start_walk(&walk, y, inputs, 3, inner_strides);
  const size_t outer = (size_t)y->numel / inner;
  for (size_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < inner; ++i) {
      const bool take_a = cond_data[walk.offset[0] + i * inner_strides[0]] != 0;
      const uint8_t* source = take_a ? a_data + (walk.offset[1] + i * inner_strides[1]) * size
                                     : b_data + (walk.offset[2] + i * inner_strides[2]) * size;
      memcpy(y_data + (o * inner + i) * size, source, size);
    }
    ember_cpu_broadcast_walk_next(&walk);
  }
}

static bool is_float(ember_dtype dtype) {
  return dtype == EMBER_DTYPE_FLOAT32 || dtype == EMBER_DTYPE_FLOAT16 ||
         dtype == EMBER_DTYPE_BFLOAT16;
}

/* A float to an integer: toward zero; NaN gives 0 and values out of range saturate
 * (PyTorch leaves both undefined; C would too). */
static int64_t float_to_int(double value, ember_dtype dtype) {
  const double low = dtype == EMBER_DTYPE_INT32 ? -2147483648.0 : -9223372036854775808.0;
  const double high = dtype == EMBER_DTYPE_INT32 ? 2147483647.0 : 9223372036854775807.0;
  if (isnan(value)) return 0;
  if (value <= low) return (int64_t)low;
  if (value >= high) return dtype == EMBER_DTYPE_INT32 ? INT32_MAX : INT64_MAX;
  return (int64_t)value;
}

void ember_cpu_cast(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const size_t count = (size_t)y->numel;
  if (count == 0) return;
  if (x->dtype == y->dtype) {
    memcpy(y_data, x_data, y->nbytes);
  } else if (is_float(y->dtype) && is_float(x->dtype)) {
    for (size_t i = 0; i < count; ++i) {
      ember_cpu_store(y_data, y->dtype, i, ember_cpu_load(x_data, x->dtype, i));
    }
  } else if (is_float(y->dtype)) {
    /* An integer to float32 rounded once, as PyTorch converts it (and a 16-bit float from
     * that float32, as PyTorch does too): through double, an int64 past 2^53 was rounded
     * twice, one ulp off. */
    for (size_t i = 0; i < count; ++i) {
      ember_cpu_store(y_data, y->dtype, i, (double)(float)ember_cpu_load_int(x_data, x->dtype, i));
    }
  } else if (y->dtype == EMBER_DTYPE_BOOL && is_float(x->dtype)) {
    for (size_t i = 0; i < count; ++i) {
      ((uint8_t*)y_data)[i] = ember_cpu_load(x_data, x->dtype, i) != 0.0; /* NaN: true */
    }
  } else if (is_float(x->dtype)) {
    for (size_t i = 0; i < count; ++i) {
      ember_cpu_store_int(y_data, y->dtype, i,
                          float_to_int(ember_cpu_load(x_data, x->dtype, i), y->dtype));
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      ember_cpu_store_int(y_data, y->dtype, i, ember_cpu_load_int(x_data, x->dtype, i));
    }
  }
}
