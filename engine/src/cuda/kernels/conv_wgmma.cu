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

#include <type_traits>

namespace ember {

/* 128-byte rows of a stage's tiles: 64 elements of K, one swizzle row. */
constexpr int kWgmmaRowBytes = kIgemmBK * 2;
static_assert(kWgmmaRowBytes == 128, "one K tile is one 128-byte swizzle row");
constexpr int kWgmmaStages = EMBER_K_CONV_WGMMA_STAGES;

/* A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format") of a K-major
 * tile with the 128-byte swizzle, starting at `address` (16-byte units): groups of 8 rows
 * are 1024 bytes apart (the stride offset); the leading offset is unused for this layout
 * (1 by convention). A step of 16 along K adds 32 bytes to the start, as the swizzle is a
 * function of the address bits, which the tile's 1024-byte alignment keeps. */
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t address) {
  return (uint64_t)((address & 0x3ffffu) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
         (uint64_t)1 << 62;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* Generic-proxy writes of this thread (its landed cp.async copies) made visible to the
 * async proxy (wgmma's operand reads). */
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* Tells the compiler every accumulator may have changed here, so none is read or moved
 * while a wgmma that writes it is in flight. */
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/* The operand lists, shared by the float16 and bfloat16 forms (ty: the PTX type). */
#define EMBER_WGMMA_M64N64K16(ty)                                                       \
  asm volatile(                                                                      \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                        \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." ty "." ty " {"              \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"  \
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"                              \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
      : "l"(a), "l"(b), "r"(1))
#define EMBER_WGMMA_M64N128K16(ty)                                                       \
  asm volatile(                                                                      \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                        \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." ty "." ty " {"              \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"  \
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"                              \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(a), "l"(b), "r"(1))

/* wgmma.mma_async m64nBMk16 (BM 64 or 128), float32 accumulators d += A·B, A and B
 * K-major in shared memory (descriptors a, b), in T's PTX type. */
template <typename T, int BM>
__device__ __forceinline__ void wgmma_tile(float (&d)[BM / 2], uint64_t a, uint64_t b) {
  constexpr bool kHalf = std::is_same<T, __half>::value;
  static_assert(kHalf || std::is_same<T, __nv_bfloat16>::value, "float16 or bfloat16");
  static_assert(BM == 64 || BM == 128, "the two channel tiles");
  if constexpr (BM == 64) {
    if constexpr (kHalf) {
      EMBER_WGMMA_M64N64K16("f16");
    } else {
      EMBER_WGMMA_M64N64K16("bf16");
    }
  } else if constexpr (kHalf) {
    EMBER_WGMMA_M64N128K16("f16");
  } else {
    EMBER_WGMMA_M64N128K16("bf16");
  }
}
#undef EMBER_WGMMA_M64N64K16
#undef EMBER_WGMMA_M64N128K16

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
      cp_async16(x_tile + row_offset + (uint32_t)(j * kIgemmRowsPerPass * kWgmmaRowBytes), src, inside);
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
     * into the stage tile kt - 1 left. */
    const uint32_t x_tile = ring + (uint32_t)((kt % kStages) * kStageBytes);
    const uint32_t a = x_tile + (uint32_t)(group * 64 * kWgmmaRowBytes);
    const uint32_t b = x_tile + kIgemmBN * kWgmmaRowBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kIgemmBK / 16; ++kk) {
      wgmma_tile<T, BM>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
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
  extern __shared__ __align__(16) uint8_t dynamic_smem[]; /* EMBER_K_CONV_WGMMA_SMEM_BYTES */
  /* The swizzle and the descriptors want 1024-byte-aligned tiles; the launch asks 1024
   * bytes more than the ring for this. */
  conv_wgmma<T, BM>(p, dynamic_smem + ((1024u - (shared_address(dynamic_smem) & 1023u)) & 1023u));
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
    ember::conv_wgmma_entry<type, bm>(p);                                                    \
  }
EMBER_CONV_WGMMA_KERNEL(64, 3, f16, __half)
EMBER_CONV_WGMMA_KERNEL(64, 3, bf16, __nv_bfloat16)
EMBER_CONV_WGMMA_KERNEL(128, 2, f16, __half)
EMBER_CONV_WGMMA_KERNEL(128, 2, bf16, __nv_bfloat16)
