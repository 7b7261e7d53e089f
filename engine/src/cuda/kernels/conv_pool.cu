/* CONV2D, direct (a thread per output position and block of up to 4 output channels of
 * one group: groups and depthwise need nothing special), and the 2-d pools (MAX, AVG, ADAPTIVE_AVG), NCHW, with the windows of the
 * CPU reference executor (cpu_ops_matmul.c, cpu_ops_normalization.c). */
#include "kernel_common.cuh"

namespace ember {

/* Output channels a thread computes together (within one group), so that each input
 * value it loads serves that many outputs. */
constexpr int kConvChannels = 4;

template <typename T>
__device__ void conv2d(const ember_k_conv2d_params& p) {
  const int64_t c_per_group = p.c / p.groups, o_per_group = p.o / p.groups;
  const int64_t blocks_per_group = (o_per_group + kConvChannels - 1) / kConvChannels;
  const int64_t channel_blocks = p.groups * blocks_per_group;
  /* Threads walk (image, channel block, row, col) with col fastest: neighbouring threads
   * read neighbouring inputs and the same weights. */
  const int64_t total = p.n * channel_blocks * p.oh * p.ow;
  for (int64_t i = global_thread(); i < total; i += global_stride()) {
    const int64_t col = i % p.ow;
    int64_t rest = i / p.ow;
    const int64_t r = rest % p.oh;
    rest /= p.oh;
    const int64_t block = rest % channel_blocks, image = rest / channel_blocks;
    const int64_t group = block / blocks_per_group;
    const int64_t oc0 = group * o_per_group + (block % blocks_per_group) * kConvChannels;
    const int64_t group_end = (group + 1) * o_per_group;
    const int channels = group_end - oc0 < kConvChannels ? (int)(group_end - oc0) : kConvChannels;
    const int64_t first_channel = group * c_per_group;
    float acc[kConvChannels];
    for (int k = 0; k < kConvChannels; ++k) {
      acc[k] = p.has_bias && k < channels ? load<T>(p.b, oc0 + k) : 0.0f;
    }
    for (int64_t ic = 0; ic < c_per_group; ++ic) {
      const int64_t x_plane = (image * p.c + first_channel + ic) * p.h * p.w_in;
      for (int64_t ki = 0; ki < p.kh; ++ki) {
        const int64_t h = r * p.stride_h - p.pad_h + ki * p.dilation_h;
        if (h < 0 || h >= p.h) continue;
        for (int64_t kj = 0; kj < p.kw; ++kj) {
          const int64_t w = col * p.stride_w - p.pad_w + kj * p.dilation_w;
          if (w < 0 || w >= p.w_in) continue;
          const float xv = load<T>(p.x, x_plane + h * p.w_in + w);
          const int64_t tap = (ic * p.kh + ki) * p.kw + kj;
          for (int k = 0; k < kConvChannels; ++k) {
            if (k < channels) acc[k] += load<T>(p.w, (oc0 + k) * c_per_group * p.kh * p.kw + tap) * xv;
          }
        }
      }
    }
    for (int k = 0; k < channels; ++k) {
      store<T>(p.y, ((image * p.o + oc0 + k) * p.oh + r) * p.ow + col, acc[k]);
    }
  }
}

/* One element at a time with int64 index math: the fallback for sizes past int32 (and a
 * col buffer that is not 16-byte aligned, which cuMemAlloc never gives). Kept apart from
 * the 32-bit path, whose registers (and so occupancy) 64-bit math would cost. */
template <typename T>
__device__ void im2col_elements(const ember_k_im2col_params& p) {
  const int64_t positions = p.oh * p.ow, taps = p.c * p.kh * p.kw;
  const int64_t total = p.n * p.rows * positions;
  for (int64_t i = global_thread(); i < total; i += global_stride()) {
    const int64_t position = i % positions, outer = i / positions;
    const int64_t tap = p.image_major ? outer % p.rows : outer / p.n;
    const int64_t image = p.image_major ? outer / p.rows : outer % p.n;
    float value = tap == taps ? 1.0f : 0.0f; /* the bias row, or a padding row */
    if (tap < taps) {
      const int64_t channel = tap / (p.kh * p.kw), ki = (tap / p.kw) % p.kh, kj = tap % p.kw;
      const int64_t h = position / p.ow * p.stride_h - p.pad_h + ki * p.dilation_h;
      const int64_t w = position % p.ow * p.stride_w - p.pad_w + kj * p.dilation_w;
      value = h >= 0 && h < p.h && w >= 0 && w < p.w
                  ? load<T>(p.x, ((image * p.c + channel) * p.h + h) * p.w + w)
                  : 0.0f;
    }
    store<T>(p.col, i, value);
  }
}

/* Division of n < 2^31 by a constant the host prepared (kernel_params.h): a multiply and
 * a shift instead of a division sequence (umulhi(n, mul) + n cannot wrap for such n). */
struct FastDivider {
  uint32_t mul, shift;
  __device__ __forceinline__ FastDivider(const ember_k_im2col_params& p, int k)
      : mul(p.div_mul[k]), shift(p.div_shift[k]) {}
  __device__ __forceinline__ int32_t operator()(int32_t n) const {
    return (int32_t)((__umulhi((uint32_t)n, mul) + (uint32_t)n) >> shift);
  }
};

/* Where one row of col (an image and a tap, or a constant row) reads from, in 32-bit
 * math: x's plane for (image, channel) and the kernel offsets, or, for the bias and
 * padding rows, the constant they hold. */
template <typename B>
struct Im2colRow {
  int32_t plane, ki, kj;
  bool data;
  B outside; /* what the row holds where it does not read x: 0, or 1 in the bias row */

  __device__ __forceinline__ void locate(const ember_k_im2col_params& p, int32_t outer,
                                         const FastDivider& by_outer, const FastDivider& by_kw,
                                         const FastDivider& by_kh, B one) {
    const int32_t taps = (int32_t)(p.c * p.kh * p.kw);
    int32_t image, tap;
    if (p.image_major) {
      image = by_outer(outer);
      tap = outer - image * (int32_t)p.rows;
    } else {
      tap = by_outer(outer);
      image = outer - tap * (int32_t)p.n;
    }
    data = tap < taps;
    ki = kj = plane = 0;
    outside = tap == taps ? one : (B)0;
    if (data) {
      const int32_t q = by_kw(tap);
      kj = tap - q * (int32_t)p.kw;
      const int32_t channel = by_kh(q);
      ki = q - channel * (int32_t)p.kh;
      plane = (image * (int32_t)p.c + channel) * (int32_t)(p.h * p.w);
    }
  }
};

/* col as a flat array of 16-byte vectors, one a thread: the divisions that place a vector
 * (its row of col, output row and column) happen once per vector, then its 8 (or 4)
 * consecutive positions step through the output columns, carrying into the next output
 * row and, rarely, the next row of col (located again). Neighbouring threads take
 * neighbouring positions, so their reads of x run along w and their stores are one
 * contiguous run. Elements are moved as bits (x's value, 0 in the padding, 1 in the bias
 * row), as the scalar path's widen-and-round does. 32-bit math throughout: the host set
 * index32. */
template <typename T>
__device__ void im2col_vectors(const ember_k_im2col_params& p) {
  typedef int32_t I;
  typedef typename Bits<T>::type B;
  constexpr int kCount = Vec16<T>::kCount;
  const B* x = reinterpret_cast<const B*>(p.x);
  const B one = Bits<T>::from_float(1.0f);
  const I in_h = (I)p.h, in_w = (I)p.w, oh = (I)p.oh, ow = (I)p.ow;
  const I stride_h = (I)p.stride_h, stride_w = (I)p.stride_w;
  const I pad_h = (I)p.pad_h, pad_w = (I)p.pad_w;
  const I dilation_h = (I)p.dilation_h, dilation_w = (I)p.dilation_w;
  const I positions = oh * ow;
  const I total = (I)p.n * (I)p.rows * positions;
  const I vectors = (total + (kCount - 1)) / kCount;
  const FastDivider by_positions(p, EMBER_K_IM2COL_DIV_POSITIONS);
  const FastDivider by_outer(p, EMBER_K_IM2COL_DIV_OUTER);
  const FastDivider by_ow(p, EMBER_K_IM2COL_DIV_OW);
  const FastDivider by_kw(p, EMBER_K_IM2COL_DIV_KW);
  const FastDivider by_kh(p, EMBER_K_IM2COL_DIV_KH);
  for (I v = (I)global_thread32(); v < vectors; v += (I)global_stride32()) {
    const I first = v * kCount;
    const I valid = total - first < kCount ? total - first : kCount;
    I outer = by_positions(first);
    const I position = first - outer * positions;
    I r = by_ow(position), c = position - r * ow;
    Im2colRow<B> row;
    row.locate(p, outer, by_outer, by_kw, by_kh, one);
    /* What depends on the output row: whether the input row is inside. */
    I h = r * stride_h - pad_h + row.ki * dilation_h;
    bool h_inside = row.data && h >= 0 && h < in_h;
    I x_row = h_inside ? row.plane + h * in_w : 0;
    I w = c * stride_w - pad_w + row.kj * dilation_w;
    Vec16<T> out;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      B value = row.outside;
      if (k < valid) {
        if (h_inside && w >= 0 && w < in_w) value = x[x_row + w];
        /* Step to the next position: next column, wrapping to the next output row and
         * then the next row of col (the last valid element may locate one past the end:
         * nothing is read there). */
        w += stride_w;
        if (++c == ow) {
          c = 0;
          if (++r == oh) {
            r = 0;
            row.locate(p, ++outer, by_outer, by_kw, by_kh, one);
          }
          h = r * stride_h - pad_h + row.ki * dilation_h;
          h_inside = row.data && h >= 0 && h < in_h;
          x_row = h_inside ? row.plane + h * in_w : 0;
          w = row.kj * dilation_w - pad_w;
        }
      }
      out.bits[k] = value;
    }
    if (valid == kCount) {
      out.store(p.col, (uint32_t)v);
    } else {
      B* col = reinterpret_cast<B*>(p.col) + first;
#pragma unroll
      for (int k = 0; k < kCount; ++k) {
        if (k < valid) col[k] = out.bits[k];
      }
    }
  }
}

template <typename T>
__device__ void im2col(const ember_k_im2col_params& p) {
  if (p.index32 && aligned16(p.col)) {
    im2col_vectors<T>(p);
  } else {
    im2col_elements<T>(p);
  }
}

__device__ __forceinline__ int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

/* MAX_POOL2D in 32-bit math (the host set index32), a thread per output element. The
 * window's taps are (h0 + a * dilation_h, w0 + b * dilation_w) for a < kh, b < kw, those
 * inside the input, row by row: the same values in the same order as the int64 path below
 * and the CPU reference walk, with their rule (a NaN wins, and the first NaN stays). A tap
 * outside reads as -inf, which that rule never takes. K > 0: K x K windows of dilation 1,
 * unrolled; K == 0: any window. */
template <typename T, int K>
__device__ void max_pool2d_32(const ember_k_pool2d_params& p) {
  typedef int32_t I;
  const T* x = reinterpret_cast<const T*>(p.x);
  T* y = reinterpret_cast<T*>(p.y);
  const float neg_inf = __int_as_float(0xff800000u);
  const I in_h = (I)p.h, in_w = (I)p.w, oh = (I)p.oh, ow = (I)p.ow;
  const I kh = K != 0 ? K : (I)p.kh, kw = K != 0 ? K : (I)p.kw;
  const I dilation_h = K != 0 ? 1 : (I)p.dilation_h, dilation_w = K != 0 ? 1 : (I)p.dilation_w;
  const I stride_h = (I)p.stride_h, stride_w = (I)p.stride_w, pad_h = (I)p.pad_h, pad_w = (I)p.pad_w;
  const I total = (I)p.planes * oh * ow;
  for (I i = (I)global_thread32(); i < total; i += (I)global_stride32()) {
    const I q = (I)fast_div((uint32_t)i, p.div_mul[0], p.div_shift[0]);
    const I plane = (I)fast_div((uint32_t)q, p.div_mul[1], p.div_shift[1]);
    const I c = i - q * ow, r = q - plane * oh;
    const I h0 = r * stride_h - pad_h, w0 = c * stride_w - pad_w;
    /* Where tap (0, 0) would be; the host checked every tap's index fits. */
    const I corner = (plane * in_h + h0) * in_w + w0;
    float value = neg_inf;
#pragma unroll
    for (I a = 0; a < kh; ++a) {
      const bool row_inside = (uint32_t)(h0 + a * dilation_h) < (uint32_t)in_h;
#pragma unroll
      for (I b = 0; b < kw; ++b) {
        const bool inside = row_inside && (uint32_t)(w0 + b * dilation_w) < (uint32_t)in_w;
        const I index = corner + a * dilation_h * in_w + b * dilation_w;
        const float v = inside ? Element<T>::load(x + index) : neg_inf;
        value = v <= value || isnan(value) ? value : v;
      }
    }
    Element<T>::store(y + i, value);
  }
}

template <typename T>
__device__ void pool2d(const ember_k_pool2d_params& p) {
  if (p.index32 && p.kind == EMBER_K_POOL_MAX) {
    const bool unit_dilation = p.dilation_h == 1 && p.dilation_w == 1;
    if (unit_dilation && p.kh == 3 && p.kw == 3) {
      max_pool2d_32<T, 3>(p);
    } else if (unit_dilation && p.kh == 2 && p.kw == 2) {
      max_pool2d_32<T, 2>(p);
    } else {
      max_pool2d_32<T, 0>(p);
    }
    return;
  }
  const int64_t total = p.planes * p.oh * p.ow;
  for (int64_t i = global_thread(); i < total; i += global_stride()) {
    const int64_t c = i % p.ow, r = (i / p.ow) % p.oh, plane = i / (p.ow * p.oh);
    const int64_t base = plane * p.h * p.w;
    float value;
    if (p.kind == EMBER_K_POOL_MAX) {
      int64_t h0 = r * p.stride_h - p.pad_h, w0 = c * p.stride_w - p.pad_w;
      const int64_t h1 = min_i64(h0 + (p.kh - 1) * p.dilation_h + 1, p.h);
      const int64_t w1 = min_i64(w0 + (p.kw - 1) * p.dilation_w + 1, p.w);
      while (h0 < 0) h0 += p.dilation_h;
      while (w0 < 0) w0 += p.dilation_w;
      value = __int_as_float(0xff800000u);
      for (int64_t h = h0; h < h1; h += p.dilation_h) {
        for (int64_t w = w0; w < w1; w += p.dilation_w) {
          const float v = load<T>(p.x, base + h * p.w + w);
          if (v > value || isnan(v)) value = isnan(value) ? value : v;
        }
      }
    } else if (p.kind == EMBER_K_POOL_AVG) {
      int64_t h0 = r * p.stride_h - p.pad_h, w0 = c * p.stride_w - p.pad_w;
      int64_t h1 = min_i64(h0 + p.kh, p.h + p.pad_h), w1 = min_i64(w0 + p.kw, p.w + p.pad_w);
      const int64_t pool_size = (h1 - h0) * (w1 - w0);
      h0 = max_i64(h0, 0), w0 = max_i64(w0, 0);
      h1 = min_i64(h1, p.h), w1 = min_i64(w1, p.w);
      if (h0 >= h1 || w0 >= w1) {
        store<T>(p.y, i, 0.0f);
        continue;
      }
      float sum = 0.0f;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) sum += load<T>(p.x, base + h * p.w + w);
      }
      const int64_t divisor = p.divisor_override != 0 ? p.divisor_override
                              : p.count_include_pad   ? pool_size
                                                      : (h1 - h0) * (w1 - w0);
      value = sum / (float)divisor;
    } else {
      /* Window [floor(r * h / oh), ceil((r + 1) * h / oh)), as PyTorch. */
      const int64_t h0 = r * p.h / p.oh, h1 = ((r + 1) * p.h + p.oh - 1) / p.oh;
      const int64_t w0 = c * p.w / p.ow, w1 = ((c + 1) * p.w + p.ow - 1) / p.ow;
      float sum = 0.0f;
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) sum += load<T>(p.x, base + h * p.w + w);
      }
      value = sum / (float)((h1 - h0) * (w1 - w0));
    }
    store<T>(p.y, i, value);
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_conv2d, ember::conv2d, ember_k_conv2d_params)
EMBER_K_FOR_EACH_DTYPE(ember_pool2d, ember::pool2d, ember_k_pool2d_params)
EMBER_K_FOR_EACH_DTYPE(ember_im2col, ember::im2col, ember_k_im2col_params)
