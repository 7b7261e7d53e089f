/* CONV2D, direct (a thread per output position and block of up to 4 output channels of
 * one group: groups and depthwise need nothing special), and the 2-d pools (MAX, AVG, ADAPTIVE_AVG), NCHW, with the windows of the
 * CPU reference executor (cpu_ops_matmul.c, cpu_ops_normalization.c); MAX_POOL2D also
 * channels last. */
#include "kernel_common.cuh"
#include "pool_max.cuh"
#include "tensor_core.cuh" /* cp_async16 */

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

/* One 16-byte vector of col (index v) by the general walk: its 8 (or 4) consecutive
 * positions step through the output columns, carrying into the next output row and the
 * next row of col (located again) as often as they need to. The divisions that place the
 * vector happen once. im2col_vectors' fallback for output rows shorter than a vector less
 * one and for a last vector that runs past the end of col. */
template <typename T>
__device__ __forceinline__ void im2col_vector_walk(const ember_k_im2col_params& p, int32_t v) {
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
  const FastDivider by_positions(p, EMBER_K_IM2COL_DIV_POSITIONS);
  const FastDivider by_outer(p, EMBER_K_IM2COL_DIV_OUTER);
  const FastDivider by_ow(p, EMBER_K_IM2COL_DIV_OW);
  const FastDivider by_kw(p, EMBER_K_IM2COL_DIV_KW);
  const FastDivider by_kh(p, EMBER_K_IM2COL_DIV_KH);
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

/* The positions of a vector that lie on one output row of one row of col: position k
 * holds x[xrow + w0 + k * stride_w] where (unsigned)(w0 + k * stride_w) < wlim, else
 * `outside`. wlim is 0 where the row of col holds a constant or the input row is in the
 * padding. */
template <typename B>
struct Im2colRun {
  int32_t xrow, w0, wlim;
  B outside;
};

template <typename B>
__device__ __forceinline__ Im2colRun<B> im2col_run(const ember_k_im2col_params& p,
                                                   const Im2colRow<B>& row, int32_t r,
                                                   int32_t c, int32_t stride_w) {
  typedef int32_t I;
  const I in_h = (I)p.h, in_w = (I)p.w;
  const I h = r * (I)p.stride_h - (I)p.pad_h + row.ki * (I)p.dilation_h;
  const bool inside = row.data && h >= 0 && h < in_h;
  Im2colRun<B> run;
  run.xrow = inside ? row.plane + h * in_w : 0;
  run.w0 = c * stride_w - (I)p.pad_w + row.kj * (I)p.dilation_w;
  run.wlim = inside ? in_w : 0;
  run.outside = row.outside;
  return run;
}

/* Every S-th element from word A on (from the high halves when odd) into 4 words. */
template <typename T, int S, int A>
__device__ __forceinline__ void im2col_pick(const uint32_t* t, bool odd, uint32_t* o) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (sizeof(T) == 2) {
      o[j] = S == 2 ? __byte_perm(t[A + 2 * j], t[A + 2 * j + 1], odd ? 0x7632u : 0x5410u)
                    : __funnelshift_r(t[A + j], t[A + j + 1], odd ? 16u : 0u);
    } else {
      o[j] = t[A + S * j];
    }
  }
}

/* The 8 (or 4) elements x[e0 + S * k], e0 = xrow + w0, of the input row [xrow, xrow + in_w)
 * (0 where w0 + S * k falls in the padding) as one 16-byte vector: the 16-byte vectors of
 * x that hold them (at most 2 for S 1, 3 for S 2) are loaded whole and the elements picked
 * from the registers. Element loads strided by S make a warp's load instruction touch 8
 * cache lines for 64 bytes it uses (the stem's 168 us). x must be 16-byte aligned with
 * its element count a multiple of 8 (or 4), so that every vector that meets the row lies
 * inside x; vectors that do not meet it are not read. */
template <typename T, int S>
__device__ __forceinline__ uint4 im2col_gather(const uint4* x, int32_t xrow, int32_t w0,
                                               int32_t in_w) {
  constexpr int kCount = Vec16<T>::kCount;
  constexpr int kShift = kCount == 8 ? 3 : 2;
  constexpr int kSpan = S * (kCount - 1) + 1;
  constexpr int kVectors = (kSpan + 2 * (kCount - 1)) / kCount;
  constexpr int kWords = 4 * kVectors;
  const int32_t e0 = xrow + w0;
  const int32_t lo = e0 > xrow ? e0 : xrow;
  const int32_t hi = e0 + kSpan < xrow + in_w ? e0 + kSpan : xrow + in_w;
  const int32_t base = e0 >> kShift; /* rounds down: e0 may be below 0 */
  uint32_t w[kWords];
#pragma unroll
  for (int j = 0; j < kVectors; ++j) {
    const int32_t start = (base + j) * kCount;
    uint4 q = make_uint4(0u, 0u, 0u, 0u);
    if (start < hi && start + kCount > lo) q = x[base + j];
    w[4 * j] = q.x, w[4 * j + 1] = q.y, w[4 * j + 2] = q.z, w[4 * j + 3] = q.w;
  }
  /* e0's offset in its vector: 0 to 3 words, and for 2-byte elements which half. */
  const int32_t m = e0 & (kCount - 1);
  const int32_t words = m * (int32_t)sizeof(T) / 4;
  const bool odd = sizeof(T) == 2 && (m & 1) != 0;
  /* A branch per offset, each picking from the loaded words: the offset is the same
   * across a warp in one row of col when rows of x are whole vectors (shifting the words
   * by a variable offset instead costs 19 selects). */
  uint32_t o[4];
  switch (words) {
    case 0: im2col_pick<T, S, 0>(w, odd, o); break;
    case 1: im2col_pick<T, S, 1>(w, odd, o); break;
    case 2: im2col_pick<T, S, 2>(w, odd, o); break;
    default: im2col_pick<T, S, 3>(w, odd, o); break;
  }
  /* At the row's ends: the elements in the padding read 0. */
  if (w0 < 0 || w0 + S * (kCount - 1) >= in_w) {
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      if ((uint32_t)(w0 + S * k) < (uint32_t)in_w) continue;
      if (sizeof(T) == 2) {
        o[k >> 1] &= (k & 1) ? 0x0000ffffu : 0xffff0000u;
      } else {
        o[k] = 0u;
      }
    }
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

/* A run's 8 (or 4) elements as one vector: x's (im2col_gather) where it reads x, else the
 * constant it holds. */
template <typename T, int S, typename B>
__device__ __forceinline__ uint4 im2col_run_vector(const ember_k_im2col_params& p,
                                                   const Im2colRun<B>& run) {
  if (run.wlim == 0) {
    const uint32_t word =
        sizeof(T) == 2 ? (uint32_t)run.outside * 0x10001u : (uint32_t)run.outside;
    return make_uint4(word, word, word, word);
  }
  return im2col_gather<T, S != 0 ? S : 1>(reinterpret_cast<const uint4*>(p.x), run.xrow, run.w0,
                                         (int32_t)p.w);
}

/* What im2col_vectors needs of the sizes, once per thread. */
struct Im2colShape {
  int32_t ow, oh, positions, total;
  FastDivider by_positions, by_outer, by_ow, by_kw, by_kh;
  __device__ __forceinline__ explicit Im2colShape(const ember_k_im2col_params& p)
      : ow((int32_t)p.ow), oh((int32_t)p.oh), positions((int32_t)(p.oh * p.ow)),
        total((int32_t)p.n * (int32_t)p.rows * (int32_t)(p.oh * p.ow)),
        by_positions(p, EMBER_K_IM2COL_DIV_POSITIONS), by_outer(p, EMBER_K_IM2COL_DIV_OUTER),
        by_ow(p, EMBER_K_IM2COL_DIV_OW), by_kw(p, EMBER_K_IM2COL_DIV_KW),
        by_kh(p, EMBER_K_IM2COL_DIV_KH) {}
};

/* Vector v of col, a full one (outer and position place its first element; row is outer
 * located), when output rows hold at least a vector less one (ow >= 7, or 3 for float32):
 * its 8 (or 4) positions lie on at most two output rows, of one row of col or of two (the
 * second located once), each a run (Im2colRun). A vector on one run, with the stride S
 * (1 or 2) known and x fit for whole loads, is one im2col_gather (or its run's constant);
 * otherwise each position selects between the two runs, with no per-position branch.
 * kStraddles false: the caller knows that no vector crosses an output row. */
template <typename T, int S, bool kStraddles, typename B>
__device__ __forceinline__ void im2col_vector_at(const ember_k_im2col_params& p,
                                                 const Im2colShape& shape, int32_t v,
                                                 int32_t outer, int32_t position,
                                                 Im2colRow<B> row) {
  typedef int32_t I;
  constexpr int kCount = Vec16<T>::kCount;
  const B one = Bits<T>::from_float(1.0f);
  const I stride_w = S != 0 ? S : (I)p.stride_w;
  const I r = shape.by_ow(position), c = position - r * shape.ow;
  const Im2colRun<B> a = im2col_run(p, row, r, c, stride_w);
  const I split = shape.ow - c; /* positions k >= split lie on the next output row */
  const bool straddle = kStraddles && split < kCount;
  Im2colRun<B> b = a;
  if (straddle) {
    I next_r = r + 1;
    if (next_r == shape.oh) {
      next_r = 0;
      row.locate(p, outer + 1, shape.by_outer, shape.by_kw, shape.by_kh, one);
    }
    b = im2col_run(p, row, next_r, c - shape.ow, stride_w);
  }
  /* One path per warp: a warp with a vector across rows takes the positions one by one
   * for all its vectors, rather than both paths in turn. */
  const bool elements =
      S == 0 ? straddle || a.wlim != 0 : kStraddles && __any_sync(__activemask(), straddle);
  Vec16<T> out;
  if (!elements) {
    out.raw = im2col_run_vector<T, S>(p, a);
  } else {
    const B* x = reinterpret_cast<const B*>(p.x);
#pragma unroll
    for (int k = 0; k < kCount; ++k) {
      const bool second = k >= split;
      const I xrow = second ? b.xrow : a.xrow;
      const I w = (second ? b.w0 : a.w0) + k * stride_w;
      const I wlim = second ? b.wlim : a.wlim;
      out.bits[k] = (uint32_t)w < (uint32_t)wlim ? x[xrow + w] : (second ? b.outside : a.outside);
    }
  }
  out.store(p.col, (uint32_t)v);
}

template <typename T, int S, bool kStraddles>
__device__ __forceinline__ void im2col_vector(const ember_k_im2col_params& p,
                                              const Im2colShape& shape, int32_t v) {
  typedef typename Bits<T>::type B;
  const int32_t first = v * Vec16<T>::kCount;
  const int32_t outer = shape.by_positions(first);
  Im2colRow<B> row;
  row.locate(p, outer, shape.by_outer, shape.by_kw, shape.by_kh, Bits<T>::from_float(1.0f));
  im2col_vector_at<T, S, kStraddles>(p, shape, v, outer, first - outer * shape.positions, row);
}

/* col as a flat array of 16-byte vectors: neighbouring threads take neighbouring vectors,
 * so a warp's stores are one contiguous run, and the divisions that place a vector happen
 * once per vector (im2col_vector). Shorter output rows and a last vector past the end of
 * col take the general walk (im2col_vector_walk), whose per-position wraps diverge when
 * rows are short (resnet18's layer4, ow 7: 43 us, 20 here). The kernel is bound by the
 * instructions it issues per vector, more than by memory, so whatever a thread can share
 * between its vectors it does. Elements are moved as bits (x's value, 0 in the padding,
 * 1 in the bias row), as the scalar path's widen-and-round does. 32-bit math throughout:
 * the host set index32. */
template <typename T, int S>
__device__ void im2col_vectors(const ember_k_im2col_params& p) {
  typedef int32_t I;
  constexpr int kCount = Vec16<T>::kCount;
  const Im2colShape shape(p);
  const I vectors = (shape.total + (kCount - 1)) / kCount;
  if (shape.ow < kCount - 1) {
    for (I v = (I)global_thread32(); v < vectors; v += (I)global_stride32()) {
      im2col_vector_walk<T>(p, v);
    }
    return;
  }
  if (shape.ow % kCount == 0) {
    /* No vector crosses an output row. kRun vectors a thread, 32 apart (each warp's k-th
     * vectors one contiguous run): the later ones, further along the same row of col,
     * reuse the first's division by positions and its located row. */
    constexpr int kRun = 4;
    typedef typename Bits<T>::type B;
    const I full = shape.total / kCount; /* a vector past it runs past col's end */
    const I units = (vectors + (32 * kRun - 1)) / (32 * kRun) * 32;
    for (I u = (I)global_thread32(); u < units; u += (I)global_stride32()) {
      const I v = (u >> 5) * (32 * kRun) + (u & 31);
      if (v >= full) {
        if (v < vectors) im2col_vector_walk<T>(p, v);
        continue;
      }
      const I outer = shape.by_positions(v * kCount);
      const I position = v * kCount - outer * shape.positions;
      Im2colRow<B> row;
      row.locate(p, outer, shape.by_outer, shape.by_kw, shape.by_kh, Bits<T>::from_float(1.0f));
      im2col_vector_at<T, S, false>(p, shape, v, outer, position, row);
#pragma unroll
      for (int i = 1; i < kRun; ++i) {
        const I next = v + 32 * i, next_position = position + 32 * i * kCount;
        if (next >= full) {
          if (next < vectors) im2col_vector_walk<T>(p, next);
          break;
        }
        if (next_position < shape.positions) {
          im2col_vector_at<T, S, false>(p, shape, next, outer, next_position, row);
        } else {
          im2col_vector<T, S, false>(p, shape, next);
        }
      }
    }
    return;
  }
  for (I v = (I)global_thread32(); v < vectors; v += (I)global_stride32()) {
    if (shape.total - v * kCount < kCount) {
      im2col_vector_walk<T>(p, v);
    } else {
      im2col_vector<T, S, true>(p, shape, v);
    }
  }
}

template <typename T>
__device__ void im2col(const ember_k_im2col_params& p) {
  if (!p.index32 || !aligned16(p.col)) {
    im2col_elements<T>(p);
    return;
  }
  /* Whole 16-byte loads of x (im2col_gather) need every vector of x that meets an input
   * row to lie inside x. */
  const bool loads = aligned16(p.x) && (p.n * p.c * p.h * p.w) % Vec16<T>::kCount == 0;
  if (loads && p.stride_w == 1) {
    im2col_vectors<T, 1>(p);
  } else if (loads && p.stride_w == 2) {
    im2col_vectors<T, 2>(p);
  } else {
    im2col_vectors<T, 0>(p);
  }
}

__device__ __forceinline__ int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

/* One output (index i) of MAX_POOL2D in 32-bit math (the host set index32). The window's
 * taps are (h0 + a * dilation_h, w0 + b * dilation_w) for a < kh, b < kw, those inside the
 * input, row by row: the same values in the same order as the int64 path below and the
 * CPU reference walk, with their rule (a NaN wins, and the first NaN stays). A tap
 * outside reads as -inf, which that rule never takes. K > 0: K x K windows of dilation 1,
 * unrolled; K == 0: any window. */
template <typename T, int K>
__device__ __forceinline__ void max_pool_one(const ember_k_pool2d_params& p, int32_t i) {
  typedef int32_t I;
  const T* x = reinterpret_cast<const T*>(p.x);
  T* y = reinterpret_cast<T*>(p.y);
  const float neg_inf = __int_as_float(0xff800000u);
  const I in_h = (I)p.h, in_w = (I)p.w, oh = (I)p.oh, ow = (I)p.ow;
  const I kh = K != 0 ? K : (I)p.kh, kw = K != 0 ? K : (I)p.kw;
  const I dilation_h = K != 0 ? 1 : (I)p.dilation_h, dilation_w = K != 0 ? 1 : (I)p.dilation_w;
  const I stride_h = (I)p.stride_h, stride_w = (I)p.stride_w, pad_h = (I)p.pad_h, pad_w = (I)p.pad_w;
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

/* MAX_POOL2D in 32-bit math, a thread per output element (max_pool_one). */
template <typename T, int K>
__device__ void max_pool2d_32(const ember_k_pool2d_params& p) {
  typedef int32_t I;
  const I total = (I)p.planes * (I)p.oh * (I)p.ow;
  for (I i = (I)global_thread32(); i < total; i += (I)global_stride32()) {
    max_pool_one<T, K>(p, i);
  }
}

/* Elements a < b of a row window (compile-time after unrolling) as one word, a in the low
 * half. Element e lies in half (e + 2) & 1 of word (e + 2) >> 1: word 0 holds the left
 * halo, words 1 on the block. */
__device__ __forceinline__ uint32_t pick_pair(const uint32_t* words, int a, int b) {
  const int wa = (a + 2) >> 1, wb = (b + 2) >> 1;
  const bool ha = ((a + 2) & 1) != 0, hb = ((b + 2) & 1) != 0;
  if (wa == wb && !ha && hb) return words[wa];
  return __byte_perm(words[wa], words[wb], (ha ? 0x32u : 0x10u) | (hb ? 0x7600u : 0x5400u));
}

/* MAX_POOL2D with K x K windows of dilation 1, stride S and padding P along w (the host
 * set index32; rows of x, x and y 16-byte aligned): a thread per 16 bytes of y, 8 (or 4)
 * adjacent outputs of one output row. For each input row of their windows it loads the
 * S aligned 16-byte vectors under them and the P columns left and K - S - P right as
 * single elements, so each input element is loaded once per output row, not once per
 * tap, and the outputs leave in one 16-byte store. The rule (a NaN wins, the first NaN
 * stays) is, without a NaN, "v > max ? v : max" in tap order, which keeps the first of
 * equal values (+0 or -0) as it does; float16 and bfloat16 compare two outputs at once
 * on their packed bits (the selected bits are the tap's, as widening and rounding back
 * gives). A NaN anywhere in the loaded rows, or outputs that do not fill an aligned
 * vector of one output row (row ends when ow is not a multiple of 8 or 4, the tail of y,
 * a block running past the row's end), take max_pool_one, output by output. */
template <typename T, int K, int S, int P>
__device__ void max_pool2d_rows(const ember_k_pool2d_params& p) {
  typedef int32_t I;
  typedef typename Bits<T>::type B;
  constexpr int kCount = Vec16<T>::kCount;
  constexpr int kShift = kCount == 8 ? 3 : 2;
  constexpr int kRight = K - S - P > 0 ? K - S - P : 0; /* columns past the block */
  constexpr int kBlock = kCount * S;                    /* elements under the outputs */
  static_assert(P <= 2 && kRight <= 2, "a halo of at most 2 elements a side");
  const B* x = reinterpret_cast<const B*>(p.x);
  const uint4* xv = reinterpret_cast<const uint4*>(p.x);
  const float neg_inf = __int_as_float(0xff800000u);
  const B ninf = Bits<T>::from_float(neg_inf);
  const I in_h = (I)p.h, in_w = (I)p.w, oh = (I)p.oh, ow = (I)p.ow;
  const I stride_h = (I)p.stride_h, pad_h = (I)p.pad_h;
  const I total = (I)p.planes * oh * ow;
  const I chunks = (total + (kCount - 1)) / kCount;
  for (I v = (I)global_thread32(); v < chunks; v += (I)global_stride32()) {
    const I first = v * kCount;
    const I q = (I)fast_div((uint32_t)first, p.div_mul[0], p.div_shift[0]);
    const I c0 = first - q * ow, col = c0 * S;
    bool exact = total - first < kCount || c0 + kCount > ow || (col & (kCount - 1)) != 0 ||
                 col + kBlock > in_w;
    Vec16<T> out;
    if (!exact) {
      const I plane = (I)fast_div((uint32_t)q, p.div_mul[1], p.div_shift[1]);
      const I h0 = (q - plane * oh) * stride_h - pad_h;
      bool nan = false;
      if constexpr (sizeof(T) == 2) {
        typedef typename Pair<T>::type H2;
        constexpr int kWords = kBlock / 2 + 2; /* left halo, the block, right halo */
        const uint32_t ninf2 = (uint32_t)ninf * 0x10001u;
        uint32_t acc[kCount / 2];
#pragma unroll
        for (int j = 0; j < kCount / 2; ++j) acc[j] = ninf2;
#pragma unroll
        for (int a = 0; a < K; ++a) {
          const I h = h0 + a;
          if ((uint32_t)h >= (uint32_t)in_h) continue; /* all -inf: never taken */
          const I idx = (plane * in_h + h) * in_w + col;
          uint32_t words[kWords];
          words[0] = ninf2;
          words[kWords - 1] = ninf2;
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const uint4 qv = xv[(idx >> kShift) + s];
            words[1 + 4 * s] = qv.x, words[2 + 4 * s] = qv.y;
            words[3 + 4 * s] = qv.z, words[4 + 4 * s] = qv.w;
          }
#pragma unroll
          for (int j = 0; j < P; ++j) {
            const int e = j - P; /* -2 or -1: half (e + 2) of word 0 */
            const uint32_t bits = col + e >= 0 ? (uint32_t)x[idx + e] : (uint32_t)ninf;
            words[0] = e + 2 == 0 ? (words[0] & 0xffff0000u) | bits
                                  : (words[0] & 0xffffu) | (bits << 16);
          }
#pragma unroll
          for (int j = 0; j < kRight; ++j) {
            const int e = kBlock + j;
            const uint32_t bits = col + e < in_w ? (uint32_t)x[idx + e] : (uint32_t)ninf;
            words[kWords - 1] = j == 0 ? (words[kWords - 1] & 0xffff0000u) | bits
                                       : (words[kWords - 1] & 0xffffu) | (bits << 16);
          }
#pragma unroll
          for (int i = P != 0 ? 0 : 1; i < (kRight != 0 ? kWords : kWords - 1); ++i) {
            const H2 pair = as_pair<T>(words[i]);
            nan = nan || !__hbeq2(pair, pair);
          }
#pragma unroll
          for (int j = 0; j < kCount / 2; ++j) {
#pragma unroll
            for (int b = 0; b < K; ++b) {
              const uint32_t tap = pick_pair(words, 2 * j * S + b - P, (2 * j + 1) * S + b - P);
              acc[j] = max_pair_bits<T>(acc[j], tap);
            }
          }
        }
        out.raw = make_uint4(acc[0], acc[1], acc[2], acc[3]);
      } else {
        constexpr int kValues = kBlock + 4; /* 2 left, the block, 2 right */
        float acc[kCount];
#pragma unroll
        for (int g = 0; g < kCount; ++g) acc[g] = neg_inf;
#pragma unroll
        for (int a = 0; a < K; ++a) {
          const I h = h0 + a;
          if ((uint32_t)h >= (uint32_t)in_h) continue;
          const I idx = (plane * in_h + h) * in_w + col;
          float values[kValues];
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const uint4 qv = xv[(idx >> kShift) + s];
            values[2 + 4 * s] = __uint_as_float(qv.x);
            values[3 + 4 * s] = __uint_as_float(qv.y);
            values[4 + 4 * s] = __uint_as_float(qv.z);
            values[5 + 4 * s] = __uint_as_float(qv.w);
          }
#pragma unroll
          for (int e = -P; e < 0; ++e) {
            values[2 + e] = col + e >= 0 ? __uint_as_float(x[idx + e]) : neg_inf;
          }
#pragma unroll
          for (int e = kBlock; e < kBlock + kRight; ++e) {
            values[2 + e] = col + e < in_w ? __uint_as_float(x[idx + e]) : neg_inf;
          }
#pragma unroll
          for (int e = -P; e < kBlock + kRight; ++e) nan = nan || isnan(values[2 + e]);
#pragma unroll
          for (int g = 0; g < kCount; ++g) {
#pragma unroll
            for (int b = 0; b < K; ++b) {
              const float tap = values[2 + g * S + b - P];
              acc[g] = tap > acc[g] ? tap : acc[g];
            }
          }
        }
#pragma unroll
        for (int g = 0; g < kCount; ++g) out.bits[g] = __float_as_uint(acc[g]);
      }
      exact = nan;
    }
    if (!exact) {
      out.store(p.y, (uint32_t)v);
    } else {
#pragma unroll 1
      for (int k = 0; k < kCount; ++k) {
        if (first + k < total) max_pool_one<T, K>(p, first + k);
      }
    }
  }
}

/* MAX_POOL2D with x and y channels last, [N, H, W, C] in memory (p.channels = C, a
 * multiple of 8; both 16-byte aligned; fewer than 2^31 elements each, so 32-bit math): a
 * thread per 16 bytes of y, kCount adjacent channels of one output position, each window
 * tap one 16-byte load of the same channels (a warp reads 512 contiguous bytes of one
 * input pixel row). A tap outside the input reads as -inf, which no rule below takes.
 * K > 0: K x K windows of dilation 1, every tap loaded before any is compared
 * (max_of_taps). Element by element throughout, resnet18
 * b64's pool was issue-bound at 61 us; this form takes 54 (ncu: 47.6 us, 53% of the
 * H200's DRAM throughput, L1 hit rate 27%, occupancy 44%). A form that took 2 x 2 outputs
 * a thread (25 loads for 4 windows, not 36) was slower: 58 us, L1 hit rate 15%. K == 0:
 * any window, tap by tap, max_exact. */
template <typename T, int K>
__device__ void max_pool2d_nhwc_windows(const ember_k_pool2d_params& p) {
  typedef int32_t I;
  constexpr int kCount = Vec16<T>::kCount;
  const uint32_t groups = (uint32_t)p.channels / kCount, ow = (uint32_t)p.ow, oh = (uint32_t)p.oh;
  const uint32_t total = (uint32_t)(p.planes / p.channels) * oh * ow * groups;
  const I in_h = (I)p.h, in_w = (I)p.w;
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  uint4* y = reinterpret_cast<uint4*>(p.y);
  const Vec16<T> neg_inf = all_neg_inf<Vec16<T>>();
  for (uint32_t i = global_thread32(); i < total; i += global_stride32()) {
    uint32_t q = i / groups;
    const uint32_t g = i - q * groups;
    const uint32_t c = q % ow;
    q /= ow;
    const uint32_t r = q % oh, n = q / oh;
    const I h0 = (I)r * (I)p.stride_h - (I)p.pad_h, w0 = (I)c * (I)p.stride_w - (I)p.pad_w;
    /* Vector index of tap (0, 0), inside the input or not. */
    const I corner = (((I)n * in_h + h0) * in_w + w0) * (I)groups + (I)g;
    Vec16<T> best = neg_inf;
    if constexpr (K > 0) {
      uint4 taps[K * K];
#pragma unroll
      for (int a = 0; a < K; ++a) {
        const bool row_inside = (uint32_t)(h0 + a) < (uint32_t)in_h;
#pragma unroll
        for (int b = 0; b < K; ++b) {
          const bool inside = row_inside && (uint32_t)(w0 + b) < (uint32_t)in_w;
          taps[a * K + b] = inside ? x[corner + (a * in_w + b) * (I)groups] : neg_inf.raw;
        }
      }
      best = max_of_taps<T, K * K>(taps, neg_inf);
    } else {
      for (I a = 0; a < (I)p.kh; ++a) {
        const I h = h0 + a * (I)p.dilation_h;
        if ((uint32_t)h >= (uint32_t)in_h) continue;
        for (I b = 0; b < (I)p.kw; ++b) {
          const I w = w0 + b * (I)p.dilation_w;
          if ((uint32_t)w >= (uint32_t)in_w) continue;
          max_exact<T>(best, x[corner + (a * (I)p.dilation_h * in_w + b * (I)p.dilation_w) * (I)groups]);
        }
      }
    }
    y[i] = best.raw;
  }
}

/* MAX_POOL2D 3 x 3 of dilation 1 with x and y channels last (p.shared_rows; the layout of
 * max_pool2d_nhwc_windows): a block per output row, whose three input rows (contiguous in
 * x) are copied into shared memory once, consecutive threads along them, and every window
 * is read from there, kCount channels of a tap a 16-byte load. Why: the windows of
 * stride 2 read each input pixel 2.25 times on average, which max_pool2d_nhwc_windows
 * leaves to L1 (27% hits on resnet18 b64's pool, 53% of the H200's DRAM throughput); this
 * form took that pool from 53.7 to 49.4 us. */
template <typename T>
__device__ void max_pool2d_nhwc_shared_rows(const ember_k_pool2d_params& p) {
  extern __shared__ uint4 pool_rows[]; /* at most 3 rows of in_w·groups vectors */
  typedef int32_t I;
  const I groups = (I)p.channels / Vec16<T>::kCount, in_h = (I)p.h, in_w = (I)p.w;
  const I oh = (I)p.oh, ow = (I)p.ow, row_vectors = in_w * groups;
  const I rows = (I)(p.planes / p.channels) * oh;
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  uint4* y = reinterpret_cast<uint4*>(p.y);
  const Vec16<T> neg_inf = all_neg_inf<Vec16<T>>();
  for (I row = (I)blockIdx.x; row < rows; row += (I)gridDim.x) {
    const I n = row / oh, h0 = (row - n * oh) * (I)p.stride_h - (I)p.pad_h;
    const I first = max(h0, 0), last = min(h0 + 3, in_h); /* the input rows inside x */
    const uint4* from = x + (n * in_h + first) * row_vectors;
    __syncthreads(); /* the last row's windows are read */
    /* cp.async: a thread's copies all in flight at once (a load and a store each, one
     * after the other, made the pool 73 us on the H200, against 54 without shared memory). */
    const uint32_t rows_at = shared_address(pool_rows);
    for (I v = (I)threadIdx.x; v < (last - first) * row_vectors; v += (I)blockDim.x) {
      cp_async16(rows_at + (uint32_t)v * 16u, from + v, true);
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    for (I v = (I)threadIdx.x; v < ow * groups; v += (I)blockDim.x) {
      const I c = v / groups, g = v - c * groups, w0 = c * (I)p.stride_w - (I)p.pad_w;
      uint4 taps[9];
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        const bool row_inside = h0 + a >= first && h0 + a < last;
#pragma unroll
        for (int b = 0; b < 3; ++b) {
          const bool inside = row_inside && (uint32_t)(w0 + b) < (uint32_t)in_w;
          taps[a * 3 + b] =
              inside ? pool_rows[((h0 + a - first) * in_w + w0 + b) * groups + g] : neg_inf.raw;
        }
      }
      y[(row * ow + c) * groups + g] = max_of_taps<T, 9>(taps, neg_inf).raw;
    }
  }
}

template <typename T>
__device__ void max_pool2d_nhwc(const ember_k_pool2d_params& p) {
  if (p.shared_rows) {
    max_pool2d_nhwc_shared_rows<T>(p);
  } else if (p.kh == 3 && p.kw == 3 && p.dilation_h == 1 && p.dilation_w == 1) {
    max_pool2d_nhwc_windows<T, 3>(p); /* resnet's */
  } else {
    max_pool2d_nhwc_windows<T, 0>(p);
  }
}

template <typename T>
__device__ void pool2d(const ember_k_pool2d_params& p) {
  if (p.index32 && p.kind == EMBER_K_POOL_MAX) {
    const bool unit_dilation = p.dilation_h == 1 && p.dilation_w == 1;
    /* max_pool2d_rows: square windows of dilation 1, 16-byte aligned rows of x and both
     * pointers 16-byte aligned. */
    const bool rows = unit_dilation && p.kh == p.kw && aligned16(p.x) && aligned16(p.y) &&
                      p.w % Vec16<T>::kCount == 0;
    if (rows && p.kh == 3 && p.stride_w == 2 && p.pad_w == 1) {
      max_pool2d_rows<T, 3, 2, 1>(p); /* resnet's */
    } else if (rows && p.kh == 3 && p.stride_w == 2 && p.pad_w == 0) {
      max_pool2d_rows<T, 3, 2, 0>(p);
    } else if (rows && p.kh == 2 && p.stride_w == 2 && p.pad_w == 0) {
      max_pool2d_rows<T, 2, 2, 0>(p);
    } else if (rows && p.kh == 3 && p.stride_w == 1 && p.pad_w == 1) {
      max_pool2d_rows<T, 3, 1, 1>(p);
    } else if (unit_dilation && p.kh == 3 && p.kw == 3) {
      max_pool2d_32<T, 3>(p);
    } else if (unit_dilation && p.kh == 2 && p.kw == 2) {
      max_pool2d_32<T, 2>(p);
    } else {
      max_pool2d_32<T, 0>(p);
    }
    return;
  }
  /* One loop nest for the three kinds, each window's bounds and step set first: fewer
   * values live at once, so the kernel fits its 32 registers (launch bounds below). */
  const bool is_max = p.kind == EMBER_K_POOL_MAX;
  const int64_t total = p.planes * p.oh * p.ow;
  for (int64_t i = global_thread(); i < total; i += global_stride()) {
    int64_t c, r, plane;
    if ((uint64_t)total <= 0xffffffffu) { /* 32-bit divisions: the same, far shorter */
      const uint32_t u = (uint32_t)i, ow = (uint32_t)p.ow, oh = (uint32_t)p.oh;
      c = u % ow, r = (u / ow) % oh, plane = u / ow / oh;
    } else {
      c = i % p.ow, r = (i / p.ow) % p.oh, plane = i / (p.ow * p.oh);
    }
    const int64_t base = plane * p.h * p.w;
    int64_t h0, h1, w0, w1, step_h = 1, step_w = 1;
    float count = 1.0f;
    if (is_max) {
      h0 = r * p.stride_h - p.pad_h, w0 = c * p.stride_w - p.pad_w;
      h1 = min_i64(h0 + (p.kh - 1) * p.dilation_h + 1, p.h);
      w1 = min_i64(w0 + (p.kw - 1) * p.dilation_w + 1, p.w);
      while (h0 < 0) h0 += p.dilation_h;
      while (w0 < 0) w0 += p.dilation_w;
      step_h = p.dilation_h, step_w = p.dilation_w;
    } else if (p.kind == EMBER_K_POOL_AVG) {
      h0 = r * p.stride_h - p.pad_h, w0 = c * p.stride_w - p.pad_w;
      h1 = min_i64(h0 + p.kh, p.h + p.pad_h), w1 = min_i64(w0 + p.kw, p.w + p.pad_w);
      const int64_t pool_size = (h1 - h0) * (w1 - w0);
      h0 = max_i64(h0, 0), w0 = max_i64(w0, 0);
      h1 = min_i64(h1, p.h), w1 = min_i64(w1, p.w);
      if (h0 >= h1 || w0 >= w1) {
        store<T>(p.y, i, 0.0f);
        continue;
      }
      count = (float)(p.divisor_override != 0 ? p.divisor_override
                      : p.count_include_pad   ? pool_size
                                              : (h1 - h0) * (w1 - w0));
    } else {
      /* Window [floor(r * h / oh), ceil((r + 1) * h / oh)), as PyTorch. */
      h0 = r * p.h / p.oh, h1 = ((r + 1) * p.h + p.oh - 1) / p.oh;
      w0 = c * p.w / p.ow, w1 = ((c + 1) * p.w + p.ow - 1) / p.ow;
      count = (float)((h1 - h0) * (w1 - w0));
    }
    float value = is_max ? __int_as_float(0xff800000u) : 0.0f;
    for (int64_t h = h0; h < h1; h += step_h) {
      for (int64_t w = w0; w < w1; w += step_w) {
        const float v = load<T>(p.x, base + h * p.w + w);
        if (!is_max) {
          value += v;
        } else if (v > value || isnan(v)) {
          value = isnan(value) ? value : v;
        }
      }
    }
    store<T>(p.y, i, is_max ? value : value / count);
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_conv2d, ember::conv2d, ember_k_conv2d_params)
/* The host's grids hold 8 blocks of EMBER_K_BLOCK threads per SM (grid_for_elements) and
 * these kernels loop over them, so a kernel that fits only 5 or 6 blocks an SM (40 to 48
 * registers) runs the rest as a second, mostly idle wave (MAX_POOL2D on the H200: 41 us at
 * 40 registers, 36.5 at 32). The pools fit 32 registers; im2col (its 16-byte gathers hold
 * 12 words) takes up to 64: 4 blocks, two full waves. */
#define EMBER_K_FOR_EACH_DTYPE_BLOCKS(NAME, TEMPLATE, PARAMS, BLOCKS)                        \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK, BLOCKS)                       \
      NAME##_f32(const PARAMS p) {                                                           \
    ember::begin_after_previous_grid();                                                      \
    TEMPLATE<float>(p);                                                                      \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK, BLOCKS)                       \
      NAME##_f16(const PARAMS p) {                                                           \
    ember::begin_after_previous_grid();                                                      \
    TEMPLATE<__half>(p);                                                                     \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK, BLOCKS)                       \
      NAME##_bf16(const PARAMS p) {                                                          \
    ember::begin_after_previous_grid();                                                      \
    TEMPLATE<__nv_bfloat16>(p);                                                              \
  }

EMBER_K_FOR_EACH_DTYPE_BLOCKS(ember_pool2d, ember::pool2d, ember_k_pool2d_params, 8)
/* The pool over channels-last tensors holds its 9 taps' 16-byte loads at once: 4 blocks. */
EMBER_K_FOR_EACH_DTYPE_BLOCKS(ember_max_pool2d_nhwc, ember::max_pool2d_nhwc, ember_k_pool2d_params, 4)
EMBER_K_FOR_EACH_DTYPE_BLOCKS(ember_im2col, ember::im2col, ember_k_im2col_params, 4)
