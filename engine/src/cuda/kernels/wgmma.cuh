/* What Ember's Hopper kernels (conv_wgmma.cu, gemm_wgmma.cu; sm_90a only) share: the
 * shared-memory matrix descriptor of wgmma's operands, its fences and waits, and the
 * mbarrier and tensor-memory-accelerator copies of the GEMM's ring. PTX ISA: "Asynchronous
 * Warpgroup Level Matrix Multiply-Accumulate", "mbarrier", "cp.async.bulk.tensor". */
#ifndef EMBER_SRC_CUDA_KERNELS_WGMMA_CUH_
#define EMBER_SRC_CUDA_KERNELS_WGMMA_CUH_

#include "tensor_core.cuh"

#include <type_traits>

namespace ember {

/* A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format") of a K-major
 * tile with the 128-byte swizzle, starting at `address` (16-byte units): groups of 8 rows
 * are 1024 bytes apart (the stride offset); the leading offset is unused for this layout
 * (1 by convention). A step of 16 along K adds 32 bytes to the start, as the swizzle is a
 * function of the address bits, which the tile's 1024-byte alignment keeps. */
__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t address) {
  return (uint64_t)((address & 0x3ffffu) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
         (uint64_t)1 << 62;
}

/* wgmma_descriptor for a K-major tile of 32-byte rows (K 16) with the 32-byte swizzle:
 * groups of 8 rows 256 bytes apart, layout type 3. Like the 128-byte swizzle, a function
 * of the address bits, so a start on any row of a 256-byte-aligned tile reads it as the
 * tensor copy wrote it. */
__device__ __forceinline__ uint64_t wgmma_descriptor_32b(uint32_t address) {
  return (uint64_t)((address & 0x3ffffu) >> 4) | (uint64_t)1 << 16 | (uint64_t)(256 >> 4) << 32 |
         (uint64_t)3 << 62;
}

/* The block's dynamic shared memory from its first 1024-byte boundary: the 128-byte
 * swizzle and the matrix descriptors want 1024-byte-aligned tiles, and every launch of
 * these kernels asks 1024 bytes more than its tiles take, for this. */
__device__ __forceinline__ uint8_t* swizzle_aligned_shared() {
  extern __shared__ __align__(16) uint8_t dynamic_smem[];
  return dynamic_smem + ((1024u - (shared_address(dynamic_smem) & 1023u)) & 1023u);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
/* All but the newest kPending groups of this warpgroup's wgmma have completed. */
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
__device__ __forceinline__ void wgmma_wait_all() { wgmma_wait<0>(); }
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

/* wgmma.mma_async m64nNk16 (N one of kWgmmaWidth), float32 accumulators d += A·B (N / 2 a
 * thread), A and B K-major in shared memory (descriptors a, b) with the 128-byte swizzle,
 * in T's PTX type (float16 or bfloat16). Inline assembly names every accumulator, so
 * each N has its operand list: 8-register pieces (EMBER_WGMMA_R<first>, and
 * EMBER_WGMMA_Q<first> for a last 4), then a, b and the scale-d predicate. */
#define EMBER_WGMMA_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define EMBER_WGMMA_R8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define EMBER_WGMMA_R16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define EMBER_WGMMA_R24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define EMBER_WGMMA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define EMBER_WGMMA_R40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define EMBER_WGMMA_R48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define EMBER_WGMMA_R56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define EMBER_WGMMA_R64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define EMBER_WGMMA_R72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define EMBER_WGMMA_R80 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define EMBER_WGMMA_R88 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define EMBER_WGMMA_R96 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define EMBER_WGMMA_R104 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define EMBER_WGMMA_R112 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define EMBER_WGMMA_R120 ", %120, %121, %122, %123, %124, %125, %126, %127"
#define EMBER_WGMMA_Q56 ", %56, %57, %58, %59"
#define EMBER_WGMMA_Q104 ", %104, %105, %106, %107"
#define EMBER_WGMMA_Q112 ", %112, %113, %114, %115"
/* The first 32, 64 and 96 of them. */
#define EMBER_WGMMA_U32 EMBER_WGMMA_R0 EMBER_WGMMA_R8 EMBER_WGMMA_R16 EMBER_WGMMA_R24
#define EMBER_WGMMA_U64 EMBER_WGMMA_U32 EMBER_WGMMA_R32 EMBER_WGMMA_R40 EMBER_WGMMA_R48 EMBER_WGMMA_R56
#define EMBER_WGMMA_U96 EMBER_WGMMA_U64 EMBER_WGMMA_R64 EMBER_WGMMA_R72 EMBER_WGMMA_R80 EMBER_WGMMA_R88
#define EMBER_WGMMA_ACC4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define EMBER_WGMMA_ACC8(i) EMBER_WGMMA_ACC4(i), EMBER_WGMMA_ACC4(i + 4)
#define EMBER_WGMMA_ACC32(i) \
  EMBER_WGMMA_ACC8(i), EMBER_WGMMA_ACC8(i + 8), EMBER_WGMMA_ACC8(i + 16), EMBER_WGMMA_ACC8(i + 24)
#define EMBER_WGMMA_ACC96 EMBER_WGMMA_ACC32(0), EMBER_WGMMA_ACC32(32), EMBER_WGMMA_ACC32(64)
/* n: N; regs: the accumulators' operand numbers; a, b and the scale-d predicate follow. */
#define EMBER_WGMMA(n, ty, regs, a_index, b_index, p_index, ...)                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #p_index ", 0;\n"                        \
               "wgmma.mma_async.sync.aligned.m64n" #n "k16.f32." ty "." ty " {" regs "}, "      \
               "%" #a_index ", %" #b_index ", p, 1, 1, 0, 0;\n}\n"                              \
               : __VA_ARGS__                                                                 \
               : "l"(a), "l"(b), "r"(1))
/* EMBER_WGMMA in T's type (kHalf: float16). */
#define EMBER_WGMMA_T(n, regs, a_index, b_index, p_index, ...)                     \
  if constexpr (kHalf) {                                                         \
    EMBER_WGMMA(n, "f16", regs, a_index, b_index, p_index, __VA_ARGS__);         \
  } else {                                                                       \
    EMBER_WGMMA(n, "bf16", regs, a_index, b_index, p_index, __VA_ARGS__);        \
  }

/* The N that wgmma_mma takes: the strips of Ember's kernels, the narrow GEMM's rows of x,
 * gemm_wgmma's column tiles. */
template <int N>
constexpr bool kWgmmaWidth = N == 16 || N == 32 || N == 64 || N == 120 || N == 128 || N == 144 ||
                             N == 192 || N == 208 || N == 216 || N == 224 || N == 232 ||
                             N == 256;

template <typename T, int N>
__device__ __forceinline__ void wgmma_mma(float (&d)[N / 2], uint64_t a, uint64_t b) {
  constexpr bool kHalf = std::is_same<T, __half>::value;
  static_assert(kHalf || std::is_same<T, __nv_bfloat16>::value, "float16 or bfloat16");
  static_assert(kWgmmaWidth<N>, "the strips Ember's kernels use");
  if constexpr (N == 16) {
    EMBER_WGMMA_T(16, EMBER_WGMMA_R0, 8, 9, 10, EMBER_WGMMA_ACC8(0))
  } else if constexpr (N == 32) {
    EMBER_WGMMA_T(32, EMBER_WGMMA_R0 EMBER_WGMMA_R8, 16, 17, 18, EMBER_WGMMA_ACC8(0),
                  EMBER_WGMMA_ACC8(8))
  } else if constexpr (N == 64) {
    EMBER_WGMMA_T(64, EMBER_WGMMA_U32, 32, 33, 34, EMBER_WGMMA_ACC32(0))
  } else if constexpr (N == 120) {
    EMBER_WGMMA_T(120, EMBER_WGMMA_U32 EMBER_WGMMA_R32 EMBER_WGMMA_R40 EMBER_WGMMA_R48 EMBER_WGMMA_Q56,
                  60, 61, 62, EMBER_WGMMA_ACC32(0), EMBER_WGMMA_ACC8(32), EMBER_WGMMA_ACC8(40),
                  EMBER_WGMMA_ACC8(48), EMBER_WGMMA_ACC4(56))
  } else if constexpr (N == 128) {
    EMBER_WGMMA_T(128, EMBER_WGMMA_U64, 64, 65, 66, EMBER_WGMMA_ACC32(0), EMBER_WGMMA_ACC32(32))
  } else if constexpr (N == 144) {
    EMBER_WGMMA_T(144, EMBER_WGMMA_U64 EMBER_WGMMA_R64, 72, 73, 74, EMBER_WGMMA_ACC32(0),
                  EMBER_WGMMA_ACC32(32), EMBER_WGMMA_ACC8(64))
  } else if constexpr (N == 192) {
    EMBER_WGMMA_T(192, EMBER_WGMMA_U96, 96, 97, 98, EMBER_WGMMA_ACC96)
  } else if constexpr (N == 208) {
    EMBER_WGMMA_T(208, EMBER_WGMMA_U96 EMBER_WGMMA_R96, 104, 105, 106, EMBER_WGMMA_ACC96,
                  EMBER_WGMMA_ACC8(96))
  } else if constexpr (N == 216) {
    EMBER_WGMMA_T(216, EMBER_WGMMA_U96 EMBER_WGMMA_R96 EMBER_WGMMA_Q104, 108, 109, 110,
                  EMBER_WGMMA_ACC96, EMBER_WGMMA_ACC8(96), EMBER_WGMMA_ACC4(104))
  } else if constexpr (N == 224) {
    EMBER_WGMMA_T(224, EMBER_WGMMA_U96 EMBER_WGMMA_R96 EMBER_WGMMA_R104, 112, 113, 114,
                  EMBER_WGMMA_ACC96, EMBER_WGMMA_ACC8(96), EMBER_WGMMA_ACC8(104))
  } else if constexpr (N == 232) {
    EMBER_WGMMA_T(232, EMBER_WGMMA_U96 EMBER_WGMMA_R96 EMBER_WGMMA_R104 EMBER_WGMMA_Q112, 116, 117,
                  118, EMBER_WGMMA_ACC96, EMBER_WGMMA_ACC8(96), EMBER_WGMMA_ACC8(104),
                  EMBER_WGMMA_ACC4(112))
  } else {
    EMBER_WGMMA_T(256, EMBER_WGMMA_U96 EMBER_WGMMA_R96 EMBER_WGMMA_R104 EMBER_WGMMA_R112 EMBER_WGMMA_R120,
                  128, 129, 130, EMBER_WGMMA_ACC96, EMBER_WGMMA_ACC32(96))
  }
}
#undef EMBER_WGMMA
#undef EMBER_WGMMA_T
#undef EMBER_WGMMA_ACC4
#undef EMBER_WGMMA_ACC8
#undef EMBER_WGMMA_ACC32
#undef EMBER_WGMMA_ACC96
#undef EMBER_WGMMA_U32
#undef EMBER_WGMMA_U64
#undef EMBER_WGMMA_U96
#undef EMBER_WGMMA_R0
#undef EMBER_WGMMA_R8
#undef EMBER_WGMMA_R16
#undef EMBER_WGMMA_R24
#undef EMBER_WGMMA_R32
#undef EMBER_WGMMA_R40
#undef EMBER_WGMMA_R48
#undef EMBER_WGMMA_R56
#undef EMBER_WGMMA_R64
#undef EMBER_WGMMA_R72
#undef EMBER_WGMMA_R80
#undef EMBER_WGMMA_R88
#undef EMBER_WGMMA_R96
#undef EMBER_WGMMA_R104
#undef EMBER_WGMMA_R112
#undef EMBER_WGMMA_R120
#undef EMBER_WGMMA_Q56
#undef EMBER_WGMMA_Q104
#undef EMBER_WGMMA_Q112

/* Four 8 x 8 matrices of 16-bit elements to shared memory, each from the registers
 * r[i] of a warp in mma's fragment layout (lane holds row lane / 4, columns 2·(lane % 4)
 * and + 1); lanes 8i to 8i + 7 give the addresses of matrix i's rows (16-byte aligned). */
__device__ __forceinline__ void stmatrix_x4(uint32_t address, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(address),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

/* An mbarrier in shared memory (its 8 bytes at `bar`): init with the arrivals a phase
 * takes; expect_tx arrives and adds the bytes the phase also waits for (what the tensor
 * copies that name it will deliver); wait spins until the phase of the given parity has
 * completed (a fresh barrier counts parity 1 as completed: its "previous" phase). */
__device__ __forceinline__ void mbarrier_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(bar)
               : "memory");
}
__device__ __forceinline__ void mbarrier_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile(
      "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(bar),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (done == 0);
}
/* Makes barrier initialization visible to the async proxy (the tensor copies). */
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

/* The tile at coordinates (c0: innermost, c1) of the tensor map `map` (a CUtensorMap in
 * kernel parameter space) into shared memory at dst; the barrier at bar counts its bytes. */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void* map, int c0, int c1,
                                            uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3}], [%4];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

/* The box at coordinates (c0: innermost, c1, c2, c3) of the 4-D tensor map `map`, as
 * tma_load_2d (coordinates may be negative or past the end: those elements read zeros). */
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2,
                                            int c3, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

/* tma_load_2d into the same offset of shared memory, and the same barrier, in every
 * block of the cluster that `mask` names (bit r: the block of rank r). */
__device__ __forceinline__ void tma_load_2d_multicast(uint32_t dst, const void* map, int c0,
                                                      int c1, uint32_t bar, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
      : "memory");
}

/* An arrival on the barrier at offset `bar` of the cluster's block of rank `rank` (this
 * block's own too), with the default semantics (release at the scope of the CTA): it
 * orders no memory of ours that the other block reads; a release at cluster scope made
 * the consumers' every stage wait for it. */
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}

/* Every thread of every block of the cluster gets here before any goes on. */
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::
                   : "memory");
}

}  // namespace ember

#endif /* EMBER_SRC_CUDA_KERNELS_WGMMA_CUH_ */
