/* CPU kernels built on sums of products: LINEAR, MATMUL, CONV2D and SDPA. Products
 * accumulate in double. Where the right operand is [K, N], a block of one output row
 * accumulates on the stack so that the inner loop reads both operands contiguously; the
 * block has a fixed size, so no allocation depends on the plan. SDPA keeps one row of
 * scores and one output row in the executor's scratch (sized at prepare). */
#include <math.h>

#include "cpu_ops.h"

enum { kRowBlock = 256 };

/* y[y_offset + j] = sum over k of a[a_offset + k] * b[b_offset + k * n + j] (+ bias[j]),
 * for j in [0, n): one output row of a row-major [k_count, n] right operand. */
static void matmul_row(void* y, size_t y_offset, const void* a, size_t a_offset, const void* b,
                       size_t b_offset, const void* bias, ember_dtype dtype, size_t k_count,
                       size_t n) {
  double block[kRowBlock];
  for (size_t j0 = 0; j0 < n; j0 += kRowBlock) {
    const size_t width = n - j0 < kRowBlock ? n - j0 : kRowBlock;
    for (size_t j = 0; j < width; ++j) {
      block[j] = bias != NULL ? ember_cpu_load(bias, dtype, j0 + j) : 0.0;
    }
    for (size_t k = 0; k < k_count; ++k) {
      const double av = ember_cpu_load(a, dtype, a_offset + k);
      const size_t b_row = b_offset + k * n + j0;
      for (size_t j = 0; j < width; ++j) block[j] += av * ember_cpu_load(b, dtype, b_row + j);
    }
    for (size_t j = 0; j < width; ++j) ember_cpu_store(y, dtype, y_offset + j0 + j, block[j]);
  }
}

void ember_cpu_linear(const ember_cpu_op_args* args) {
  const ember_op_desc* op = args->op;
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const ember_dtype dtype = y->dtype;
  const void* x_data = ember_cpu_input_data(args, 0);
  const void* w_data = ember_cpu_input_data(args, 1);
  const void* b_data = op->num_inputs == 3 ? ember_cpu_input_data(args, 2) : NULL;
  void* y_data = ember_cpu_output_data(args, 0);
  const int64_t layout = ember_cpu_attr(args, EMBER_ATTR_LINEAR_WEIGHT_LAYOUT);
  const size_t k_count = (size_t)x->dims[x->rank - 1];
  const size_t n = (size_t)y->dims[y->rank - 1];
  const size_t m = (size_t)y->numel / n;
  for (size_t i = 0; i < m; ++i) {
    if (layout == 1) {
      matmul_row(y_data, i * n, x_data, i * k_count, w_data, 0, b_data, dtype, k_count, n);
      continue;
    }
    /* w is [N, K]: each output is a dot product of two contiguous rows. */
    for (size_t j = 0; j < n; ++j) {
      double sum = b_data != NULL ? ember_cpu_load(b_data, dtype, j) : 0.0;
      for (size_t k = 0; k < k_count; ++k) {
        sum += ember_cpu_load(x_data, dtype, i * k_count + k) *
               ember_cpu_load(w_data, dtype, j * k_count + k);
      }
      ember_cpu_store(y_data, dtype, i * n + j, sum);
    }
  }
}

void ember_cpu_matmul(const ember_cpu_op_args* args) {
  const ember_tensor_desc* a = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* b = ember_cpu_input_tensor(args, 1);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const ember_dtype dtype = y->dtype;
  const void* a_data = ember_cpu_input_data(args, 0);
  const void* b_data = ember_cpu_input_data(args, 1);
  void* y_data = ember_cpu_output_data(args, 0);
  const size_t m = (size_t)a->dims[a->rank - 2];
  const size_t k_count = (size_t)a->dims[a->rank - 1];
  const size_t n = (size_t)b->dims[b->rank - 1];
  const uint32_t batch_rank = y->rank - 2;
  const size_t batches = ember_cpu_dims_product(y->dims, 0, batch_rank);
  ember_cpu_broadcast_walk walk;
  ember_cpu_broadcast_walk_init(&walk, y->dims, batch_rank, a->dims, a->rank - 2, m * k_count,
                                b->dims, b->rank - 2, k_count * n);
  for (size_t batch = 0; batch < batches; ++batch) {
    for (size_t i = 0; i < m; ++i) {
      matmul_row(y_data, (batch * m + i) * n, a_data, walk.offset[0] + i * k_count, b_data,
                 walk.offset[1], NULL, dtype, k_count, n);
    }
    ember_cpu_broadcast_walk_next(&walk);
  }
}

void ember_cpu_conv2d(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* w = ember_cpu_input_tensor(args, 1);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const ember_dtype dtype = y->dtype;
  const void* x_data = ember_cpu_input_data(args, 0);
  const void* w_data = ember_cpu_input_data(args, 1);
  const void* b_data = args->op->num_inputs == 3 ? ember_cpu_input_data(args, 2) : NULL;
  void* y_data = ember_cpu_output_data(args, 0);
  const int64_t sh = ember_cpu_attr(args, EMBER_ATTR_CONV_STRIDE_H);
  const int64_t sw = ember_cpu_attr(args, EMBER_ATTR_CONV_STRIDE_W);
  const int64_t ph = ember_cpu_attr(args, EMBER_ATTR_CONV_PAD_H);
  const int64_t pw = ember_cpu_attr(args, EMBER_ATTR_CONV_PAD_W);
  const int64_t dh = ember_cpu_attr(args, EMBER_ATTR_CONV_DILATION_H);
  const int64_t dw = ember_cpu_attr(args, EMBER_ATTR_CONV_DILATION_W);
  const int64_t groups = ember_cpu_attr(args, EMBER_ATTR_CONV_GROUPS);
  const int64_t n = x->dims[0], c = x->dims[1], ih = x->dims[2], iw = x->dims[3];
  const int64_t o = w->dims[0], kh = w->dims[2], kw = w->dims[3];
  const int64_t oh = y->dims[2], ow = y->dims[3];
  const int64_t c_per_group = c / groups, o_per_group = o / groups;
  double block[kRowBlock];
  for (int64_t image = 0; image < n; ++image) {
    for (int64_t oc = 0; oc < o; ++oc) {
      const int64_t first_channel = oc / o_per_group * c_per_group;
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t c0 = 0; c0 < ow; c0 += kRowBlock) {
          const int64_t width = ow - c0 < kRowBlock ? ow - c0 : kRowBlock;
          const double bias = b_data != NULL ? ember_cpu_load(b_data, dtype, (size_t)oc) : 0.0;
          for (int64_t j = 0; j < width; ++j) block[j] = bias;
          for (int64_t ic = 0; ic < c_per_group; ++ic) {
            const size_t x_plane = (size_t)((image * c + first_channel + ic) * ih * iw);
            const size_t w_plane = (size_t)((oc * c_per_group + ic) * kh * kw);
            for (int64_t ki = 0; ki < kh; ++ki) {
              const int64_t h = r * sh - ph + ki * dh;
              if (h < 0 || h >= ih) continue;
              for (int64_t kj = 0; kj < kw; ++kj) {
                const double wv = ember_cpu_load(w_data, dtype, w_plane + (size_t)(ki * kw + kj));
                for (int64_t j = 0; j < width; ++j) {
                  const int64_t col = (c0 + j) * sw - pw + kj * dw;
                  if (col < 0 || col >= iw) continue;
                  block[j] += wv * ember_cpu_load(x_data, dtype, x_plane + (size_t)(h * iw + col));
                }
              }
            }
          }
          const size_t y_row = (size_t)(((image * o + oc) * oh + r) * ow + c0);
          for (int64_t j = 0; j < width; ++j) {
            ember_cpu_store(y_data, dtype, y_row + (size_t)j, block[j]);
          }
        }
      }
    }
  }
}

/* softmax(q k^T * scale + mask) v per batch and row, in double. A row whose scores are all
 * -inf (every key masked) gives zeros, as PyTorch's scaled_dot_product_attention. */
void ember_cpu_sdpa(const ember_cpu_op_args* args) {
  const ember_tensor_desc* q = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* k = ember_cpu_input_tensor(args, 1);
  const ember_tensor_desc* v = ember_cpu_input_tensor(args, 2);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const ember_dtype dtype = y->dtype;
  const void* q_data = ember_cpu_input_data(args, 0);
  const void* k_data = ember_cpu_input_data(args, 1);
  const void* v_data = ember_cpu_input_data(args, 2);
  void* y_data = ember_cpu_output_data(args, 0);
  const bool has_mask = args->op->num_inputs == 4;
  const ember_tensor_desc* mask = has_mask ? ember_cpu_input_tensor(args, 3) : NULL;
  const void* mask_data = has_mask ? ember_cpu_input_data(args, 3) : NULL;
  const bool is_causal = ember_cpu_attr(args, EMBER_ATTR_SDPA_IS_CAUSAL) != 0;
  const double scale = ember_cpu_attr_f64(args, EMBER_ATTR_SDPA_SCALE_F64);
  const uint32_t rank = q->rank;
  const size_t l = (size_t)q->dims[rank - 2], e = (size_t)q->dims[rank - 1];
  const size_t s = (size_t)k->dims[rank - 2], ev = (size_t)v->dims[rank - 1];
  const size_t batches = ember_cpu_dims_product(q->dims, 0, rank - 2);
  double* scores = args->scratch;
  double* row = args->scratch + s;

  /* The mask's element strides over [batch..., L, S] (0 where it broadcasts). */
  int64_t target[EMBER_MAX_RANK];
  memcpy(target, q->dims, sizeof target);
  target[rank - 1] = (int64_t)s;
  ember_cpu_broadcast_walk walk;
  ember_cpu_broadcast_walk_init(&walk, target, rank - 2, NULL, 0, 1, NULL, 0, 1);
  size_t mask_row_stride = 0, mask_col_stride = 0;
  if (has_mask) {
    const uint32_t mr = mask->rank;
    const size_t cols = mr >= 1 ? (size_t)mask->dims[mr - 1] : 1;
    const size_t rows = mr >= 2 ? (size_t)mask->dims[mr - 2] : 1;
    mask_col_stride = cols != 1 ? 1 : 0;
    mask_row_stride = rows != 1 ? cols : 0;
    ember_cpu_broadcast_walk_set(&walk, 0, mask->dims, mr > 2 ? mr - 2 : 0, rows * cols);
  }
  for (size_t batch = 0; batch < batches; ++batch) {
    const size_t q_base = batch * l * e, k_base = batch * s * e, v_base = batch * s * ev;
    for (size_t i = 0; i < l; ++i) {
      double max = -INFINITY;
      for (size_t j = 0; j < s; ++j) {
        double score = 0.0;
        for (size_t t = 0; t < e; ++t) {
          score += ember_cpu_load(q_data, dtype, q_base + i * e + t) *
                   ember_cpu_load(k_data, dtype, k_base + j * e + t);
        }
        score *= scale;
        if (is_causal && j > i) score = -INFINITY;
        if (has_mask) {
          const size_t at = walk.offset[0] + i * mask_row_stride + j * mask_col_stride;
          if (mask->dtype == EMBER_DTYPE_BOOL) {
            if (((const uint8_t*)mask_data)[at] == 0) score = -INFINITY;
          } else {
            score += ember_cpu_load(mask_data, mask->dtype, at);
          }
        }
        scores[j] = score;
        if (score > max || isnan(score)) max = isnan(max) ? max : score;
      }
      for (size_t t = 0; t < ev; ++t) row[t] = 0.0;
      if (max != -INFINITY) {
        double sum = 0.0;
        for (size_t j = 0; j < s; ++j) {
          const double p = exp(scores[j] - max);
          sum += p;
          for (size_t t = 0; t < ev; ++t) {
            row[t] += p * ember_cpu_load(v_data, dtype, v_base + j * ev + t);
          }
        }
        for (size_t t = 0; t < ev; ++t) row[t] /= sum;
      }
      for (size_t t = 0; t < ev; ++t) {
        ember_cpu_store(y_data, dtype, (batch * l + i) * ev + t, row[t]);
      }
    }
    ember_cpu_broadcast_walk_next(&walk);
  }
}
