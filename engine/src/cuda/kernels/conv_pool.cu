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
  const int64_t total = p.n * (taps + 1) * positions;
  for (int64_t i = global_thread(); i < total; i += global_stride()) {
    const int64_t position = i % positions, rest = i / positions;
    const int64_t tap = rest % (taps + 1), image = rest / (taps + 1);
    float value = 1.0f; /* the bias row */
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

/* col as a flat array of 16-byte vectors, one a thread: the divisions that place a vector
 * (image, tap, output row and column) happen once per vector, then its 8 (or 4)
 * consecutive positions step through the output columns, carrying into the next output
 * row, tap and image as they wrap. Neighbouring threads take neighbouring positions, so
 * their reads of x run along w and their stores are one contiguous run. Elements are
 * moved as bits (x's value, 0 in the padding, 1 in the bias row), as the scalar path's
 * widen-and-round does. 32-bit math throughout: the host set index32. */
template <typename T>
__device__ void im2col_vectors(const ember_k_im2col_params& p) {
  typedef int32_t I;
  typedef typename Bits<T>::type B;
  constexpr int kCount = Vec16<T>::kCount;
  const B* x = reinterpret_cast<const B*>(p.x);
  const B one = Bits<T>::from_float(1.0f);
  const I channels = (I)p.c, in_h = (I)p.h, in_w = (I)p.w, kh = (I)p.kh, kw = (I)p.kw;
  const I oh = (I)p.oh, ow = (I)p.ow, stride_h = (I)p.stride_h, stride_w = (I)p.stride_w;
  const I pad_h = (I)p.pad_h, pad_w = (I)p.pad_w;
  const I dilation_h = (I)p.dilation_h, dilation_w = (I)p.dilation_w;
  const I positions = oh * ow, rows = channels * kh * kw + 1, plane_size = in_h * in_w;
  const I total = (I)p.n * rows * positions;
  const I vectors = (total + (kCount - 1)) / kCount;
  const FastDivider by_positions(p, EMBER_K_IM2COL_DIV_POSITIONS);
  const FastDivider by_rows(p, EMBER_K_IM2COL_DIV_ROWS);
  const FastDivider by_ow(p, EMBER_K_IM2COL_DIV_OW);
  const FastDivider by_kw(p, EMBER_K_IM2COL_DIV_KW);
  const FastDivider by_kh(p, EMBER_K_IM2COL_DIV_KH);
  for (I v = (I)global_thread32(); v < vectors; v += (I)global_stride32()) {
    const I first = v * kCount;
    const I valid = total - first < kCount ? total - first : kCount;
    const I row = by_positions(first), position = first - row * positions;
    const I image = by_rows(row), tap = row - image * rows;
    I r = by_ow(position), c = position - r * ow;
    I channel = channels, ki = 0, kj = 0; /* channel == channels: the bias row */
    if (tap < rows - 1) {
      const I q = by_kw(tap);
      kj = tap - q * kw;
      channel = by_kh(q);
      ki = q - channel * kh;
    }
    /* x's plane for (image, channel); for the bias row, the next image's first plane. */
    I plane = (image * channels + channel) * plane_size;
    /* What depends on the output row: whether the input row is inside, and the value
     * outside (0 padding, 1 for the bias row). */
    I h = r * stride_h - pad_h + ki * dilation_h;
    bool h_inside = channel < channels && h >= 0 && h < in_h;
    I x_row = h_inside ? plane + h * in_w : 0;
    B outside = channel < channels ? (B)0 : one;
    I w = c * stride_w - pad_w + kj * dilation_w;
    Vec16<T> out;
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      B value = outside;
      if (k < valid) {
        if (h_inside && w >= 0 && w < in_w) value = x[x_row + w];
        /* Step to the next position: next column, wrapping to the next output row, tap
         * (kj, ki, channel, then the bias row) and image. */
        w += stride_w;
        if (++c == ow) {
          c = 0;
          if (++r == oh) {
            r = 0;
            if (channel == channels) {
              channel = 0; /* past the bias row: the next image, whose plane is `plane` */
            } else if (++kj == kw) {
              kj = 0;
              if (++ki == kh) {
                ki = 0;
                ++channel;
                plane += plane_size;
              }
            }
          }
          h = r * stride_h - pad_h + ki * dilation_h;
          h_inside = channel < channels && h >= 0 && h < in_h;
          x_row = h_inside ? plane + h * in_w : 0;
          outside = channel < channels ? (B)0 : one;
          w = kj * dilation_w - pad_w;
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

template <typename T>
__device__ void pool2d(const ember_k_pool2d_params& p) {
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
