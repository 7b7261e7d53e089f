/* CONV2D as an implicit GEMM on Hopper's warpgroup MMA (wgmma), float16 and bfloat16:
 * the same conv, parameters, packed channels-last input, augmented weights and tap table
 * as ember_conv_igemm (conv_igemm.cu, whose comment describes them), at about twice the
 * mma.sync kernel's rate on the H200. Built for sm_90a only (wgmma exists on no other
 * target): a GPU other than compute capability 9.0 does not load this module and keeps
 * the mma.sync kernel (cuda_kernels.c).
 *
 * A block of 256 threads is two warpgroups; it computes D[p, o] for 128 output positions
 * (warpgroup g takes positions 64g..64g+63, wgmma's M) by BM channels (64 or 128, wgmma's
 * N), K = BK = 64 at a time. Both operands are read by wgmma from shared memory, stored
 * K-major in rows of 128 bytes (64 elements) with the 128-byte swizzle (16-byte chunk c of
 * row r at c ^ (r % 8)), which is the layout the matrix descriptors below name: the
 * tensor cores read it without bank conflicts, and a thread's 16-byte cp.async lands a
 * chunk whole. All 256 threads fill a ring of stages with cp.async (as the mma.sync
 * kernel does: a gather through the tap table, which the tensor memory accelerator's
 * tiled copies cannot express), and every thread makes its copies visible to the async
 * proxy that wgmma reads through (fence.proxy.async) before the barrier that hands a
 * stage over. Two or three blocks fit an SM (97 KB for 128 channels, 73 KB for 64), so
 * one block's copies, barriers, prologue and epilogue overlap another's MMAs.
 *
 * The epilogue turns the accumulators (wgmma's D fragments: rows are positions) into the
 * channel-major tile store_conv_tile writes out.
 *
 * A conv of too few output tiles to fill the GPU (resnet18 at batch 1: layer4 has 4)
 * splits its K tiles over k_splits blocks per tile (kernel_params.h): each writes its
 * float32 sums to a slice of its own, and ember_conv_split_sum adds the slices in order,
 * so the result does not depend on which block finished first, then applies the bias,
 * residual and ReLU as the epilogue does. */
#include "conv_igemm_tile.cuh"
#include "wgmma.cuh"

#include <type_traits>

namespace ember {

/* 128-byte rows of a stage's tiles: 64 elements of K, one swizzle row. */
constexpr int kWgmmaRowBytes = kIgemmBK * 2;
static_assert(kWgmmaRowBytes == 128, "one K tile is one 128-byte swizzle row");
constexpr int kWgmmaStages = EMBER_K_CONV_WGMMA_STAGES;


/* The rows of a split's sums (kernel_params.h). */
__device__ __forceinline__ int split_row(const ember_k_conv_igemm_params& p) {
  return EMBER_K_CONV_SPLIT_ROW(p.o);
}

/* A split's sums of the block's tile to its slice of p.partial: this thread's pairs of
 * channels (channel, channel + 1 for accumulators 4j, 4j + 1 at `position`; 4j + 2, 4j + 3
 * at position + 8; channel + 8j for j), 8 bytes a pair. Rows past the positions and
 * channels past o8 are left out. */
template <int BM>
__device__ __forceinline__ void store_split_sums(const ember_k_conv_igemm_params& p,
                                                 const float* acc, uint32_t split, int position,
                                                 int channel) {
  const int o8 = split_row(p);
  float* out = reinterpret_cast<float*>(p.partial) + (int64_t)split * p.positions * o8;
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
    const int c = channel + 8 * j;
    if (c >= o8) continue;
    if (position < p.positions) {
      *reinterpret_cast<float2*>(out + (int64_t)position * o8 + c) = make_float2(acc[4 * j], acc[4 * j + 1]);
    }
    if (position + 8 < p.positions) {
      *reinterpret_cast<float2*>(out + (int64_t)(position + 8) * o8 + c) =
          make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
  }
}

template <typename T, int BM>
__device__ __forceinline__ void conv_wgmma(const ember_k_conv_igemm_params& p, uint8_t* smem) {
  constexpr int kPositions = kIgemmBN / kIgemmRowsPerPass; /* X rows a thread copies */
  constexpr int kChannels = BM / kIgemmRowsPerPass;        /* W rows a thread copies */
  constexpr int kStageBytes = (kIgemmBN + BM) * kWgmmaRowBytes;
  constexpr int kStages = kWgmmaStages;
  static_assert(kStageBytes % 1024 == 0, "stages keep the swizzle's alignment");
  static_assert(kStages * kStageBytes + 1024 == EMBER_K_CONV_WGMMA_SMEM_BYTES(BM), "the host's size");
  static_assert(BM * kIgemmOutStride * 2 <= kStages * kStageBytes &&
                    kIgemmBN * (BM + 8) * 2 <= kStages * kStageBytes,
                "the epilogue tile fits, in either layout");
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, group = warp >> 2;
  /* Split over K: the grid is the tiles k_splits times, and this block's K tiles are
   * [kt0, kt0 + count). */
  const uint32_t splits = p.k_splits > 1 ? (uint32_t)p.k_splits : 1u;
  const uint32_t tiles = gridDim.x / splits;
  const uint32_t tile = blockIdx.x % tiles, split = blockIdx.x / tiles;
  const int kt0 = splits > 1 ? (int)split * p.split_k_tiles : 0;
  const int count = splits > 1 ? min(p.split_k_tiles, p.k_tiles - kt0) : p.k_tiles;
  const int o0 = (int)(tile % (uint32_t)p.o_tiles) * BM;
  const int p0 = (int)(tile / (uint32_t)p.o_tiles) * kIgemmBN;
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.x);
  const uint16_t* w = reinterpret_cast<const uint16_t*>(p.w);
  const int2* table = reinterpret_cast<const int2*>(p.table);
  const uint32_t ring = shared_address(smem);

  /* This thread copies chunk `chunk` of rows first_row + 32j of both tiles; the low 3 bits
   * of those rows are first_row's, so the swizzled chunk is the same for all of them. */
  const int chunk = tid % kIgemmChunks, first_row = tid / kIgemmChunks;
  const uint32_t row_offset = (uint32_t)(first_row * kWgmmaRowBytes + ((chunk ^ (first_row & 7)) * 16));
  const ConvWindows<kPositions> windows(p, p0, first_row);

  /* The table entry of a tile is read a tile ahead of its copies (tap_next), so that the
   * copies never wait on a global load. */
  auto table_entry = [&](int i) {
    return i < count ? __ldg(&table[(kt0 + i) * kIgemmChunks + chunk]) : make_int2(0, 0);
  };
  auto load_tile = [&](int stage, int i, int2 tap) {
    const uint32_t x_tile = ring + (uint32_t)(stage * kStageBytes);
    const uint32_t w_tile = x_tile + kIgemmBN * kWgmmaRowBytes;
#pragma unroll
    for (int j = 0; j < kPositions; ++j) {
      bool inside;
      const uint16_t* src = windows.source(p, x, j, tap, &inside);
      /* Through L1: the next taps' windows overlap this one (resnet18 b64 on the H200:
       * 1148 -> 1108 us, layer1's convs 73-85 -> 66-82 us). */
      cp_async16_l1(x_tile + row_offset + (uint32_t)(j * kIgemmRowsPerPass * kWgmmaRowBytes), src, inside);
    }
    const int k = (kt0 + i) * kIgemmBK + chunk * 8;
#pragma unroll
    for (int j = 0; j < kChannels; ++j) {
      const int o = o0 + first_row + kIgemmRowsPerPass * j;
      const bool valid = o < p.o && k < p.k_stride;
      cp_async16(w_tile + row_offset + (uint32_t)(j * kIgemmRowsPerPass * kWgmmaRowBytes),
                 valid ? w + (int64_t)o * p.k_stride + k : w, valid);
    }
  };

  float acc[BM / 2];
#pragma unroll
  for (int i = 0; i < BM / 2; ++i) acc[i] = 0.0f;

  /* i counts this block's K tiles (K tile kt0 + i). */
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < count) load_tile(s, s, table_entry(s));
    cp_async_commit(); /* empty groups keep the count uniform */
  }
  int2 tap_next = table_entry(kStages - 1);
  for (int i = 0; i < count; ++i) {
    cp_async_wait<kStages - 2>(); /* tile i has landed (this thread's copies) */
    fence_proxy_async();
    __syncthreads(); /* everyone's; and every wgmma of tile i - 1 has completed */
    /* The MMAs of tile i first, then (while they run) the copies of tile i + stages - 1
     * into the stage tile i - 1 left. (Keeping one tile's MMAs in flight across the
     * barrier, wgmma.wait_group 1 and a second barrier, measured the same.) */
    const uint32_t x_tile = ring + (uint32_t)((i % kStages) * kStageBytes);
    const uint32_t a = x_tile + (uint32_t)(group * 64 * kWgmmaRowBytes);
    const uint32_t b = x_tile + kIgemmBN * kWgmmaRowBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kIgemmBK / 16; ++kk) {
      wgmma_mma<T, BM>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
    }
    wgmma_commit();
    const int next = i + kStages - 1;
    if (next < count) {
      const int2 tap = tap_next;
      tap_next = table_entry(next + 1);
      load_tile(next % kStages, next, tap);
    }
    cp_async_commit();
    wgmma_wait_all();
    fence_accumulators(acc);
  }
  cp_async_wait<0>();
  /* Accumulator 4j + e: position 64·group + 16·(warp % 4) + lane / 4 (+8 for e >= 2),
   * channel 8j + 2·(lane % 4) + e % 2. */
  const int position = 64 * group + 16 * (warp & 3) + (lane >> 2);
  if (splits > 1) {
    store_split_sums<BM>(p, acc, split, p0 + position, o0 + 2 * (lane & 3));
    return;
  }
  __syncthreads(); /* the ring is free for the epilogue's tile */
  const ConvOutTile out_tile(p, smem, BM);
#pragma unroll
  for (int j = 0; j < BM / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int channel = 8 * j + 2 * (lane & 3) + e;
      const float bias = conv_bias<T>(p, o0 + channel);
      out_tile.put<T>(channel, position, acc[4 * j + e] + bias);
      out_tile.put<T>(channel, position + 8, acc[4 * j + 2 + e] + bias);
    }
  }
  __syncthreads();
  store_conv_tile<T>(p, out_tile, BM, o0, p0);
}

template <typename T, int BM>
__device__ __forceinline__ void conv_wgmma_entry(const ember_k_conv_igemm_params& p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  conv_wgmma<T, BM>(p, swizzle_aligned_shared()); /* EMBER_K_CONV_WGMMA_SMEM_BYTES */
#else
  (void)p;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

/* Threads that add one vector's splits (each every kSumLanes-th split, then combined by
 * shuffles in a fixed order): resnet18 b1's layer4 has 36 splits of 49 x 512 outputs,
 * 392 vectors, whose sums a thread each took 12 us on 13 blocks. */
constexpr int kSumLanes = EMBER_K_CONV_SPLIT_SUM_LANES;

/* y from a split conv's sums (kernel_params.h): per vector of 8 channels of a position,
 * the splits added (in an order fixed by the split count, so every run gives the same
 * bits), then rounded with the bias as the unsplit epilogue's tile, then the residual and
 * the ReLU as store_conv_tile applies them. kSumLanes threads a vector; whole warps go
 * round the loop together, for the shuffles. */
template <typename T>
__device__ __forceinline__ void conv_split_sum(const ember_k_conv_igemm_params& p) {
  const int o8 = split_row(p), groups = o8 / 8;
  const int64_t slice = (int64_t)p.positions * o8;
  const int64_t threads = (int64_t)p.positions * groups * kSumLanes;
  const int64_t rounds = (threads + 31) & ~(int64_t)31;
  const int lane = (int)(threadIdx.x % kSumLanes);
  for (int64_t t = global_thread(); t < rounds; t += global_stride()) {
    const bool live = t < threads;
    const int64_t v = live ? t / kSumLanes : 0;
    const int pos = (int)(v / groups), o = (int)(v % groups) * 8;
    float sum[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const float* from = reinterpret_cast<const float*>(p.partial) + (int64_t)pos * o8 + o;
#pragma unroll 4
    for (int s = live ? lane : p.k_splits; s < p.k_splits; s += kSumLanes) {
      const float4 lo = *reinterpret_cast<const float4*>(from + s * slice);
      const float4 hi = *reinterpret_cast<const float4*>(from + s * slice + 4);
      sum[0] += lo.x, sum[1] += lo.y, sum[2] += lo.z, sum[3] += lo.w;
      sum[4] += hi.x, sum[5] += hi.y, sum[6] += hi.z, sum[7] += hi.w;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sum[e] += __shfl_xor_sync(0xffffffffu, sum[e], 1);
      sum[e] += __shfl_xor_sync(0xffffffffu, sum[e], 2);
    }
    if (!live || lane != 0) continue;
    Vec16<T> out;
#pragma unroll
    for (int e = 0; e < 8; ++e) out.set(e, sum[e] + conv_bias<T>(p, o + e));
    if (p.layout & EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST) { /* o a multiple of 8: the host checks */
      store_channels_last_vector<T>(p, out, pos, o);
      continue;
    }
    /* NCHW y: 8 channels of a position are a plane apart, and the last vector may pass o. */
    for (int e = 0; e < 8 && o + e < p.o; ++e) store_nchw_element<T>(p, out.get(e), pos, o + e);
  }
}

}  // namespace ember

/* One kernel per channel tile, so that each gets its own register bound: 64 channels (32
 * accumulators) fit 3 blocks an SM, 128 channels 2. */
#define EMBER_CONV_WGMMA_KERNEL(bm, blocks, suffix, type)                                   \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK, blocks)                      \
      ember_conv_wgmma##bm##_##suffix(const ember_k_conv_igemm_params p) {                 \
    ember::begin_after_previous_grid();                                                      \
    ember::conv_wgmma_entry<type, bm>(p);                                                    \
  }
EMBER_CONV_WGMMA_KERNEL(64, 3, f16, __half)
EMBER_CONV_WGMMA_KERNEL(64, 3, bf16, __nv_bfloat16)
EMBER_CONV_WGMMA_KERNEL(128, 2, f16, __half)
EMBER_CONV_WGMMA_KERNEL(128, 2, bf16, __nv_bfloat16)

#define EMBER_CONV_SPLIT_SUM_KERNEL(suffix, type)                                           \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)                              \
      ember_conv_split_sum_##suffix(const ember_k_conv_igemm_params p) {                   \
    ember::begin_after_previous_grid();                                                      \
    ember::conv_split_sum<type>(p);                                                          \
  }
EMBER_CONV_SPLIT_SUM_KERNEL(f16, __half)
EMBER_CONV_SPLIT_SUM_KERNEL(bf16, __nv_bfloat16)
