/* What the two implicit-GEMM conv kernels share (conv_igemm.cu on mma.sync, conv_wgmma.cu
 * on Hopper's wgmma): where a thread's output positions read the packed input, and the
 * epilogue that writes a block's tile of y (NCHW) from shared memory. The parameters,
 * packed input and tap table are ember_k_conv_igemm_params's (kernel_params.h). */
#ifndef EMBER_SRC_CUDA_KERNELS_CONV_IGEMM_TILE_CUH_
#define EMBER_SRC_CUDA_KERNELS_CONV_IGEMM_TILE_CUH_

#include "tensor_core.cuh"

namespace ember {

constexpr int kIgemmBK = EMBER_K_CONV_IGEMM_BK;
constexpr int kIgemmBN = EMBER_K_CONV_IGEMM_BN; /* output positions of a block's tile */
constexpr int kIgemmChunks = kIgemmBK / 8;      /* 16-byte chunks of K per tile row */
constexpr int kIgemmRowsPerPass = EMBER_K_BLOCK / kIgemmChunks;
constexpr int kIgemmOutStride = kIgemmBN + 8; /* elements between rows of the epilogue's tile */
static_assert(EMBER_K_BLOCK == 256, "the tile loops assume 256 threads");

/* The windows of one thread's kPositions output positions (p0 + first_row +
 * kIgemmRowsPerPass·j): their first pixel in the packed input and its row and column, so
 * that a tap from the table is an add and a bounds test. */
template <int kPositions>
struct ConvWindows {
  int base[kPositions], ih0[kPositions], iw0[kPositions];

  __device__ __forceinline__ ConvWindows(const ember_k_conv_igemm_params& p, int p0, int first_row) {
    const int plane = p.oh * p.ow;
#pragma unroll
    for (int j = 0; j < kPositions; ++j) {
      const int pos = p0 + first_row + kIgemmRowsPerPass * j;
      if (pos < p.positions) {
        const int n = (int)fast_div((uint32_t)pos, p.div_mul[0], p.div_shift[0]);
        const int r = pos - n * plane;
        const int oh = (int)fast_div((uint32_t)r, p.div_mul[1], p.div_shift[1]);
        const int ow = r - oh * p.ow;
        ih0[j] = oh * p.stride_h - p.pad_h;
        iw0[j] = ow * p.stride_w - p.pad_w;
        base[j] = ((n * p.h + ih0[j]) * p.w_in + iw0[j]) * p.c;
      } else {
        ih0[j] = -(1 << 20); /* below any tap's row offset: always outside x */
        iw0[j] = 0;
        base[j] = 0;
      }
    }
  }

  /* Where position j reads the 8 channels of table entry `tap`, and whether that pixel is
   * inside x (else the copy zero-fills, reading nothing). */
  __device__ __forceinline__ const uint16_t* source(const ember_k_conv_igemm_params& p,
                                                    const uint16_t* x, int j, int2 tap,
                                                    bool* inside) const {
    const int dh = tap.y >> 16, dw = (int)(int16_t)(tap.y & 0xffff);
    const int ih = ih0[j] + dh, iw = iw0[j] + dw;
    *inside = (unsigned)ih < (unsigned)p.h && (unsigned)iw < (unsigned)p.w_in;
    return *inside ? x + base[j] + tap.x : x;
  }
};

/* The epilogue's tile in shared memory: element (channel c, position q) of the block,
 * biased and rounded. Channel-major ([BM][kIgemmOutStride]) when y is NCHW, so that 8
 * positions of a channel are 16 contiguous bytes; position-major ([BN][BM + 8]) when y is
 * channels last, so that 8 channels of a position are. Either pads its rows by 16 bytes,
 * which spreads the 8 rows that one warp's accumulators cover over distinct banks. */
struct ConvOutTile {
  uint16_t* base;
  int channel_stride, position_stride;

  __device__ __forceinline__ ConvOutTile(const ember_k_conv_igemm_params& p, void* smem, int bm)
      : base(reinterpret_cast<uint16_t*>(smem)),
        channel_stride(p.layout & EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST ? 1 : kIgemmOutStride),
        position_stride(p.layout & EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST ? bm + 8 : 1) {}

  template <typename T>
  __device__ __forceinline__ void put(int channel, int position, float value) const {
    base[channel * channel_stride + position * position_stride] = Bits<T>::from_float(value);
  }
};

/* The residual's 8 values at element indices at(0..7) of its layout (p.has_residual): one
 * 16-byte load when they are contiguous there (`contiguous`, at(0) a multiple of 8). */
template <typename T, typename At>
__device__ __forceinline__ Vec16<T> load_residual(const ember_k_conv_igemm_params& p,
                                                  bool contiguous, At at) {
  const uint16_t* residual = reinterpret_cast<const uint16_t*>(p.residual);
  Vec16<T> add;
  if (contiguous) {
    add.raw = *reinterpret_cast<const uint4*>(residual + at(0));
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) add.bits[e] = residual[at(e)];
  }
  return add;
}

/* Adds the residual `add` (when fused) and applies the ReLU (when fused) to v. */
template <typename T>
__device__ __forceinline__ void finish_with(const ember_k_conv_igemm_params& p, Vec16<T>& v,
                                            const Vec16<T>& add) {
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    float value = v.get(e) + (p.has_residual ? add.get(e) : 0.0f);
    if (p.relu) value = value < 0.0f ? 0.0f : value;
    v.set(e, value);
  }
}

/* finish_with the residual at element indices at(0..7) of its layout (load_residual). */
template <typename T, typename At>
__device__ __forceinline__ void finish_vector(const ember_k_conv_igemm_params& p, Vec16<T>& v,
                                              bool contiguous, At at) {
  if (!p.has_residual && !p.relu) return;
  Vec16<T> add;
  add.raw = make_uint4(0, 0, 0, 0);
  if (p.has_residual) add = load_residual<T>(p, contiguous, at);
  finish_with<T>(p, v, add);
}

/* The element index of channel o of position pos (image n = pos / (oh·ow)) in an NCHW
 * tensor of the conv's output shape. */
__device__ __forceinline__ int conv_nchw_index(const ember_k_conv_igemm_params& p, int pos, int o) {
  const int plane = p.oh * p.ow;
  const int n = (int)fast_div((uint32_t)pos, p.div_mul[0], p.div_shift[0]);
  return (n * p.o + o) * plane + (pos - n * plane);
}

/* v, channels o..o+7 of position pos (o a multiple of 8), into channels-last y with the
 * residual (in either layout) and the ReLU (finish_vector): 16 bytes. */
template <typename T>
__device__ __forceinline__ void store_channels_last_vector(const ember_k_conv_igemm_params& p,
                                                           Vec16<T>& v, int pos, int o) {
  const bool residual_last = (p.layout & EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST) != 0;
  const int index = pos * p.o + o;
  finish_vector<T>(p, v, residual_last && aligned16(p.residual), [&](int e) {
    return residual_last ? index + e : conv_nchw_index(p, pos, o + e);
  });
  *reinterpret_cast<uint4*>(reinterpret_cast<uint16_t*>(p.y) + index) = v.raw;
}

/* One element of NCHW y, channel o of position pos: `value` (biased and rounded) with the
 * residual (in either layout) and the ReLU, where the 8 of a vector do not go together. */
template <typename T>
__device__ __forceinline__ void store_nchw_element(const ember_k_conv_igemm_params& p,
                                                   float value, int pos, int o) {
  const int at = conv_nchw_index(p, pos, o);
  if (p.has_residual) {
    const bool residual_last = (p.layout & EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST) != 0;
    value += Bits<T>::to_float(
        reinterpret_cast<const uint16_t*>(p.residual)[residual_last ? pos * p.o + o : at]);
  }
  if (p.relu) value = value < 0.0f ? 0.0f : value;
  reinterpret_cast<uint16_t*>(p.y)[at] = Bits<T>::from_float(value);
}

/* Writes the block's tile of y, channels o0.. (rows of them) by positions p0..
 * (kIgemmBN), from `tile`, adding the residual and the ReLU on the way (so y rounds twice
 * when a residual is fused, as the unfused CONV2D then ADD). NCHW y: 8 positions of one
 * channel at a time, 16-byte accesses where the 8 are in one image and aligned. Channels
 * last y (o a multiple of 8, 16-byte aligned: the host checks): 8 channels of one
 * position at a time, always 16 bytes. The residual is in either layout (layout bits). */
template <typename T>
__device__ __forceinline__ void store_conv_tile(const ember_k_conv_igemm_params& p,
                                                const ConvOutTile& tile, int rows, int o0, int p0) {
  const int plane = p.oh * p.ow;
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const bool residual_last = (p.layout & EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST) != 0;
  if (p.layout & EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST) {
    const int groups = rows / 8;
    for (int c = threadIdx.x; c < kIgemmBN * groups; c += blockDim.x) {
      const int col = c / groups, channel = (c % groups) * 8;
      const int o = o0 + channel, pos = p0 + col;
      if (o >= p.o || pos >= p.positions) continue;
      Vec16<T> v;
      v.raw = *reinterpret_cast<const uint4*>(tile.base + col * tile.position_stride + channel);
      store_channels_last_vector<T>(p, v, pos, o);
    }
    return;
  }
  for (int c = threadIdx.x; c < rows * (kIgemmBN / 8); c += blockDim.x) {
    const int row = c / (kIgemmBN / 8), col = (c % (kIgemmBN / 8)) * 8;
    const int o = o0 + row, pos = p0 + col;
    if (o >= p.o || pos >= p.positions) continue;
    const int n = (int)fast_div((uint32_t)pos, p.div_mul[0], p.div_shift[0]);
    const int r = pos - n * plane;
    const int index = (n * p.o + o) * plane + r;
    Vec16<T> v;
    v.raw = *reinterpret_cast<const uint4*>(tile.base + row * tile.channel_stride + col);
    const bool whole = r + 8 <= plane && pos + 8 <= p.positions && (index & 7) == 0 && aligned16(p.y);
    if (whole) {
      finish_vector<T>(p, v, !residual_last && aligned16(p.residual), [&](int e) {
        return residual_last ? (pos + e) * p.o + o : index + e;
      });
      *reinterpret_cast<uint4*>(y + index) = v.raw;
      continue;
    }
    /* The 8 positions cross an image or the end, or an address is unaligned. */
    for (int e = 0; e < 8 && pos + e < p.positions; ++e) store_nchw_element<T>(p, v.get(e), pos + e, o);
  }
}

/* Channel o's bias: the augmented weights' column k_taps (0 past the last channel). */
template <typename T>
__device__ __forceinline__ float conv_bias(const ember_k_conv_igemm_params& p, int o) {
  const uint16_t* w = reinterpret_cast<const uint16_t*>(p.w);
  return o < p.o ? Bits<T>::to_float(w[(int64_t)o * p.k_stride + p.k_taps]) : 0.0f;
}

}  // namespace ember

#endif /* EMBER_SRC_CUDA_KERNELS_CONV_IGEMM_TILE_CUH_ */
