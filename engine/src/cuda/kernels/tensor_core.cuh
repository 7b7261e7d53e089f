/* What Ember's tensor-core kernels (conv_igemm.cu, the flash SDPA in attention.cu) share:
 * asynchronous 16-byte copies into shared memory, ldmatrix, and mma.sync m16n8k16 with
 * float32 accumulation for float16 and bfloat16. Fragment layouts are the PTX ISA's
 * ("Matrix Fragments for mma.m16n8k16 with floating point type"); each kernel's header
 * comment says how its tiles map onto them. */
#ifndef EMBER_SRC_CUDA_KERNELS_TENSOR_CORE_CUH_
#define EMBER_SRC_CUDA_KERNELS_TENSOR_CORE_CUH_

#include "kernel_common.cuh"

namespace ember {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes from global src to shared dst, or 16 zeros (nothing read) when !valid; src
 * must still be a valid address. */
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

/* The same through L1 (cp.async.ca): for gathers whose blocks read the same bytes again
 * soon, as an implicit-GEMM conv's taps read overlapping windows of x. */
__device__ __forceinline__ void cp_async16_l1(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* All but the newest kPending groups of this thread's copies are in shared memory (a
 * barrier then shows everyone's). */
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void cp_async_wait_all() { cp_async_wait<0>(); }

/* Four 8x8 matrices of 16-bit elements: lane i gives the address of row i % 8 of matrix
 * i / 8 and receives, of each matrix, the pair at row i / 4, columns 2·(i % 4) and + 1
 * (.trans: rows 2·(i % 4) and + 1 of column i / 4). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

/* d += a·b for one m16n8k16 tile (b0, b1: the B fragment's two registers); and two floats
 * as the register of two elements that an A fragment or a store takes (lo in the low
 * half: the lower column), rounded to nearest even. */
/* The m16n8k16 MMA with float32 accumulators on A and B of PTX type AB (f16 or bf16). */
#define EMBER_MMA_M16N8K16(AB, d, a, b0, b1)                                             \
  asm("mma.sync.aligned.m16n8k16.row.col.f32." AB "." AB ".f32 {%0, %1, %2, %3}, "       \
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                   \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

template <typename T>
struct Mma {
  static_assert(sizeof(T) == 2, "float16 or bfloat16");
  static constexpr bool kHalf = std::is_same<T, __half>::value;
  static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    if constexpr (kHalf) {
      EMBER_MMA_M16N8K16("f16", d, a, b0, b1);
    } else {
      EMBER_MMA_M16N8K16("bf16", d, a, b0, b1);
    }
  }
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    if constexpr (kHalf) {
      const __half2 h = __floats2half2_rn(lo, hi); /* .x (low half) = lo */
      return (uint32_t)__half_as_ushort(h.x) | (uint32_t)__half_as_ushort(h.y) << 16;
    } else {
      const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
      return (uint32_t)__bfloat16_as_ushort(h.x) | (uint32_t)__bfloat16_as_ushort(h.y) << 16;
    }
  }
};

}  // namespace ember

#endif /* EMBER_SRC_CUDA_KERNELS_TENSOR_CORE_CUH_ */
