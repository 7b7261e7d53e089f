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
 * channel-major tile store_conv_tile writes out. */
#include "conv_igemm_tile.cuh"
#include "wgmma.cuh"

#include <type_traits>

namespace ember {

/* 128-byte rows of a stage's tiles: 64 elements of K, one swizzle row. */
constexpr int kWgmmaRowBytes = kIgemmBK * 2;
static_assert(kWgmmaRowBytes == 128, "one K tile is one 128-byte swizzle row");
constexpr int kWgmmaStages = EMBER_K_CONV_WGMMA_STAGES;


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
  const int o0 = (int)(blockIdx.x % (uint32_t)p.o_tiles) * BM;
  const int p0 = (int)(blockIdx.x / (uint32_t)p.o_tiles) * kIgemmBN;
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
  auto table_entry = [&](int kt) {
    return kt < p.k_tiles ? __ldg(&table[kt * kIgemmChunks + chunk]) : make_int2(0, 0);
  };
  auto load_tile = [&](int stage, int kt, int2 tap) {
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
    const int k = kt * kIgemmBK + chunk * 8;
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

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < p.k_tiles) load_tile(s, s, table_entry(s));
    cp_async_commit(); /* empty groups keep the count uniform */
  }
  int2 tap_next = table_entry(kStages - 1);
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    cp_async_wait<kStages - 2>(); /* tile kt has landed (this thread's copies) */
    fence_proxy_async();
    __syncthreads(); /* everyone's; and every wgmma of tile kt - 1 has completed */
    /* The MMAs of tile kt first, then (while they run) the copies of tile kt + stages - 1
     * into the stage tile kt - 1 left. (Keeping one tile's MMAs in flight across the
     * barrier, wgmma.wait_group 1 and a second barrier, measured the same.) */
    const uint32_t x_tile = ring + (uint32_t)((kt % kStages) * kStageBytes);
    const uint32_t a = x_tile + (uint32_t)(group * 64 * kWgmmaRowBytes);
    const uint32_t b = x_tile + kIgemmBN * kWgmmaRowBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kIgemmBK / 16; ++kk) {
      wgmma_mma<T, BM>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
    }
    wgmma_commit();
    const int next = kt + kStages - 1;
    if (next < p.k_tiles) {
      const int2 tap = tap_next;
      tap_next = table_entry(next + 1);
      load_tile(next % kStages, next, tap);
    }
    cp_async_commit();
    wgmma_wait_all();
    fence_accumulators(acc);
  }
  cp_async_wait<0>();
  __syncthreads(); /* the ring is free for the epilogue's tile */

  /* Accumulator 4j + e: position 64·group + 16·(warp % 4) + lane / 4 (+8 for e >= 2),
   * channel 8j + 2·(lane % 4) + e % 2. */
  const ConvOutTile out_tile(p, smem, BM);
  const int position = 64 * group + 16 * (warp & 3) + (lane >> 2);
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
