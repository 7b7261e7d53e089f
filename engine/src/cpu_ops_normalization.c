/* CPU kernels: normalizations and reductions. SOFTMAX (max subtracted for stability),
 * LAYER_NORM (biased variance), REDUCE_SUM/MEAN/MAX over a set of dims, and the 2-D
 * window reductions MAX_POOL2D, AVG_POOL2D and ADAPTIVE_AVG_POOL2D, each following
 * PyTorch's CPU kernels for window bounds, padding and divisors. */
#include <math.h>

#include "cpu_ops.h"

void ember_cpu_softmax(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const ember_dtype dtype = y->dtype;
  const uint32_t dim = (uint32_t)ember_cpu_attr(args, EMBER_ATTR_SOFTMAX_DIM);
  const size_t outer = ember_cpu_dims_product(x->dims, 0, dim);
  const size_t n = (size_t)x->dims[dim];
  const size_t inner = ember_cpu_dims_product(x->dims, dim + 1, x->rank);
  for (size_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < inner; ++i) {
      const size_t base = o * n * inner + i;
      double max = -INFINITY;
      for (size_t j = 0; j < n; ++j) {
        const double v = ember_cpu_load(x_data, dtype, base + j * inner);
        if (v > max || isnan(v)) max = v;
      }
      /* As PyTorch: a row holding +inf, or only -inf, gives NaN (inf - inf). */
      double sum = 0.0;
      for (size_t j = 0; j < n; ++j) {
        sum += exp(ember_cpu_load(x_data, dtype, base + j * inner) - max);
      }
      for (size_t j = 0; j < n; ++j) {
        const double e = exp(ember_cpu_load(x_data, dtype, base + j * inner) - max);
        ember_cpu_store(y_data, dtype, base + j * inner, e / sum);
      }
    }
  }
}

void ember_cpu_layer_norm(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const ember_dtype dtype = y->dtype;
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const uint32_t nd = (uint32_t)ember_cpu_attr(args, EMBER_ATTR_LAYER_NORM_NORMALIZED_NDIM);
  const double eps = ember_cpu_attr_f64(args, EMBER_ATTR_LAYER_NORM_EPS_F64);
  const bool has_weight = ember_cpu_attr(args, EMBER_ATTR_LAYER_NORM_HAS_WEIGHT) != 0;
  const bool has_bias = ember_cpu_attr(args, EMBER_ATTR_LAYER_NORM_HAS_BIAS) != 0;
  /* Inputs present follow the flags, in order: x, [w], [b]. */
  const void* w_data = has_weight ? ember_cpu_input_data(args, 1) : NULL;
  const void* b_data = has_bias ? ember_cpu_input_data(args, has_weight ? 2u : 1u) : NULL;
  const size_t n = ember_cpu_dims_product(x->dims, x->rank - nd, x->rank);
  if (n == 0) return; /* y has no elements either */
  const size_t rows = (size_t)x->numel / n;
  for (size_t r = 0; r < rows; ++r) {
    const size_t base = r * n;
    double mean = 0.0;
    for (size_t j = 0; j < n; ++j) mean += ember_cpu_load(x_data, dtype, base + j);
    mean /= (double)n;
    double variance = 0.0;
    for (size_t j = 0; j < n; ++j) {
      const double d = ember_cpu_load(x_data, dtype, base + j) - mean;
      variance += d * d;
    }
    variance /= (double)n; /* biased, as torch.nn.functional.layer_norm */
    const double inv_std = 1.0 / sqrt(variance + eps);
    for (size_t j = 0; j < n; ++j) {
      double v = (ember_cpu_load(x_data, dtype, base + j) - mean) * inv_std;
      if (w_data != NULL) v *= ember_cpu_load(w_data, dtype, j);
      if (b_data != NULL) v += ember_cpu_load(b_data, dtype, j);
      ember_cpu_store(y_data, dtype, base + j, v);
    }
  }
}

/* An odometer over up to EMBER_MAX_RANK dims, tracking one element offset. */
typedef struct odometer {
  uint32_t rank;
  size_t dims[EMBER_MAX_RANK];
  size_t strides[EMBER_MAX_RANK];
  size_t index[EMBER_MAX_RANK];
  size_t offset;
} odometer;

static void odometer_next(odometer* o) {
  for (uint32_t d = o->rank; d-- > 0;) {
    ++o->index[d];
    o->offset += o->strides[d];
    if (o->index[d] < o->dims[d]) return;
    o->offset -= o->strides[d] * o->dims[d];
    o->index[d] = 0;
  }
}

void ember_cpu_reduce(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const int64_t mask = ember_cpu_attr(args, EMBER_ATTR_REDUCE_DIM_MASK);
  const ember_opcode opcode = args->op->opcode;
  /* Kept dims walk the output in order; reduced dims are summed over for each. */
  odometer kept, reduced;
  memset(&kept, 0, sizeof kept);
  memset(&reduced, 0, sizeof reduced);
  size_t stride = 1, count = 1;
  for (uint32_t d = x->rank; d-- > 0;) {
    odometer* o = ((mask >> d) & 1) != 0 ? &reduced : &kept;
    o->dims[o->rank] = (size_t)x->dims[d];
    o->strides[o->rank] = stride;
    ++o->rank;
    if (o == &reduced) count *= (size_t)x->dims[d];
    stride *= (size_t)x->dims[d];
  }
  /* Collected from the last dim backwards; the odometers want the first dim first. */
  for (uint32_t k = 0; k < 2; ++k) {
    odometer* o = k == 0 ? &kept : &reduced;
    for (uint32_t i = 0; i < o->rank / 2; ++i) {
      const size_t dim = o->dims[i], s = o->strides[i];
      o->dims[i] = o->dims[o->rank - 1 - i], o->strides[i] = o->strides[o->rank - 1 - i];
      o->dims[o->rank - 1 - i] = dim, o->strides[o->rank - 1 - i] = s;
    }
  }
  for (size_t out = 0; out < (size_t)y->numel; ++out) {
    double acc = opcode == EMBER_OP_REDUCE_MAX ? -INFINITY : 0.0;
    reduced.offset = 0;
    for (size_t r = 0; r < count; ++r) {
      const double v = ember_cpu_load(x_data, x->dtype, kept.offset + reduced.offset);
      if (opcode != EMBER_OP_REDUCE_MAX) {
        acc += v;
      } else if (v > acc || isnan(v)) {
        acc = isnan(acc) ? acc : v; /* NaN propagates, as torch.amax */
      }
      odometer_next(&reduced);
    }
    if (opcode == EMBER_OP_REDUCE_MEAN) acc /= (double)count; /* 0 / 0: NaN, as PyTorch */
    ember_cpu_store(y_data, y->dtype, out, acc);
    odometer_next(&kept);
  }
}

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

void ember_cpu_pool2d(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const bool is_max = args->op->opcode == EMBER_OP_MAX_POOL2D;
  const int64_t kh = ember_cpu_attr(args, EMBER_ATTR_POOL_KERNEL_H);
  const int64_t kw = ember_cpu_attr(args, EMBER_ATTR_POOL_KERNEL_W);
  const int64_t sh = ember_cpu_attr(args, EMBER_ATTR_POOL_STRIDE_H);
  const int64_t sw = ember_cpu_attr(args, EMBER_ATTR_POOL_STRIDE_W);
  const int64_t ph = ember_cpu_attr(args, EMBER_ATTR_POOL_PAD_H);
  const int64_t pw = ember_cpu_attr(args, EMBER_ATTR_POOL_PAD_W);
  const int64_t dh = is_max ? ember_cpu_attr(args, EMBER_ATTR_MAX_POOL_DILATION_H) : 1;
  const int64_t dw = is_max ? ember_cpu_attr(args, EMBER_ATTR_MAX_POOL_DILATION_W) : 1;
  const bool include_pad =
      !is_max && ember_cpu_attr(args, EMBER_ATTR_AVG_POOL_COUNT_INCLUDE_PAD) != 0;
  const int64_t divisor_override =
      is_max ? 0 : ember_cpu_attr(args, EMBER_ATTR_AVG_POOL_DIVISOR_OVERRIDE);
  const int64_t ih = x->dims[2], iw = x->dims[3], oh = y->dims[2], ow = y->dims[3];
  const size_t planes = (size_t)(x->dims[0] * x->dims[1]);
  size_t out = 0;
  for (size_t plane = 0; plane < planes; ++plane) {
    const size_t base = plane * (size_t)(ih * iw);
    for (int64_t r = 0; r < oh; ++r) {
      for (int64_t c = 0; c < ow; ++c, ++out) {
        int64_t h0 = r * sh - ph, w0 = c * sw - pw;
        double value;
        if (is_max) {
          const int64_t h1 = min_i64(h0 + (kh - 1) * dh + 1, ih);
          const int64_t w1 = min_i64(w0 + (kw - 1) * dw + 1, iw);
          while (h0 < 0) h0 += dh;
          while (w0 < 0) w0 += dw;
          value = -INFINITY;
          for (int64_t h = h0; h < h1; h += dh) {
            for (int64_t w = w0; w < w1; w += dw) {
              const double v = ember_cpu_load(x_data, x->dtype, base + (size_t)(h * iw + w));
              if (v > value || isnan(v)) value = isnan(value) ? value : v;
            }
          }
        } else {
          int64_t h1 = min_i64(h0 + kh, ih + ph), w1 = min_i64(w0 + kw, iw + pw);
          const int64_t pool_size = (h1 - h0) * (w1 - w0);
          h0 = max_i64(h0, 0), w0 = max_i64(w0, 0);
          h1 = min_i64(h1, ih), w1 = min_i64(w1, iw);
          if (h0 >= h1 || w0 >= w1) {
            ember_cpu_store(y_data, y->dtype, out, 0.0);
            continue;
          }
          double sum = 0.0;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w) {
              sum += ember_cpu_load(x_data, x->dtype, base + (size_t)(h * iw + w));
            }
          }
          const int64_t divisor = divisor_override != 0 ? divisor_override
                                  : include_pad         ? pool_size
                                                        : (h1 - h0) * (w1 - w0);
          value = sum / (double)divisor;
        }
        ember_cpu_store(y_data, y->dtype, out, value);
      }
    }
  }
}

void ember_cpu_adaptive_avg_pool2d(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const void* x_data = ember_cpu_input_data(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const int64_t ih = x->dims[2], iw = x->dims[3], oh = y->dims[2], ow = y->dims[3];
  const size_t planes = (size_t)(x->dims[0] * x->dims[1]);
  size_t out = 0;
  for (size_t plane = 0; plane < planes; ++plane) {
    const size_t base = plane * (size_t)(ih * iw);
    for (int64_t r = 0; r < oh; ++r) {
      /* Window [floor(r * ih / oh), ceil((r + 1) * ih / oh)), as PyTorch. */
      const int64_t h0 = r * ih / oh, h1 = ((r + 1) * ih + oh - 1) / oh;
      for (int64_t c = 0; c < ow; ++c, ++out) {
        const int64_t w0 = c * iw / ow, w1 = ((c + 1) * iw + ow - 1) / ow;
        double sum = 0.0;
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) {
            sum += ember_cpu_load(x_data, x->dtype, base + (size_t)(h * iw + w));
          }
        }
        ember_cpu_store(y_data, y->dtype, out, sum / (double)((h1 - h0) * (w1 - w0)));
      }
    }
  }
}
