/* What every Ember kernel shares: element loads and stores that widen float16 and
 * bfloat16 to float32 and round once on store (round-to-nearest-even, as the CPU
 * reference executor does), the activation functions, and block-wide reductions.
 *
 * Kernels are plain functions of one parameter struct (kernel_params.h) with C linkage,
 * so the host finds them by name with cuModuleGetFunction. EMBER_K_FOR_EACH_DTYPE stamps
 * out the _f32, _f16 and _bf16 entry points from one template. */
#ifndef EMBER_SRC_CUDA_KERNELS_KERNEL_COMMON_CUH_
#define EMBER_SRC_CUDA_KERNELS_KERNEL_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "../kernel_params.h"

namespace ember {

template <typename T>
struct Element;

template <>
struct Element<float> {
  static __device__ __forceinline__ float load(const float* p) { return *p; }
  static __device__ __forceinline__ void store(float* p, float v) { *p = v; }
};

template <>
struct Element<__half> {
  static __device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
  static __device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
};

template <>
struct Element<__nv_bfloat16> {
  static __device__ __forceinline__ float load(const __nv_bfloat16* p) {
    return __bfloat162float(*p);
  }
  static __device__ __forceinline__ void store(__nv_bfloat16* p, float v) {
    *p = __float2bfloat16_rn(v);
  }
};

/* An element's bits as an unsigned integer, converted the same way as Element<T>: the
 * vectorized paths move 16 bytes at a time and widen/round each element like the scalar
 * ones. */
template <typename T>
struct Bits;

template <>
struct Bits<float> {
  typedef uint32_t type;
  static __device__ __forceinline__ float to_float(uint32_t b) { return __uint_as_float(b); }
  static __device__ __forceinline__ uint32_t from_float(float v) { return __float_as_uint(v); }
};

template <>
struct Bits<__half> {
  typedef uint16_t type;
  static __device__ __forceinline__ float to_float(uint16_t b) {
    return __half2float(__ushort_as_half(b));
  }
  static __device__ __forceinline__ uint16_t from_float(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};

template <>
struct Bits<__nv_bfloat16> {
  typedef uint16_t type;
  static __device__ __forceinline__ float to_float(uint16_t b) {
    return __bfloat162float(__ushort_as_bfloat16(b));
  }
  static __device__ __forceinline__ uint16_t from_float(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};

/* 16 bytes of elements (8 float16/bfloat16 or 4 float32): one 128-bit load or store.
 * Index with compile-time k (unrolled loops) so it stays in registers. */
template <typename T>
struct Vec16 {
  static constexpr int kCount = 16 / (int)sizeof(T);
  union {
    uint4 raw;
    typename Bits<T>::type bits[16 / sizeof(T)];
  };
  __device__ __forceinline__ float get(int k) const { return Bits<T>::to_float(bits[k]); }
  __device__ __forceinline__ void set(int k, float v) { bits[k] = Bits<T>::from_float(v); }
  /* Vector `index` of base (16-byte aligned). */
  __device__ __forceinline__ void load(uint64_t base, uint32_t index) {
    raw = reinterpret_cast<const uint4*>(base)[index];
  }
  __device__ __forceinline__ void store(uint64_t base, uint32_t index) const {
    reinterpret_cast<uint4*>(base)[index] = raw;
  }
};

__device__ __forceinline__ bool aligned16(uint64_t address) { return (address & 15u) == 0; }

/* n / d for n < 2^31, with the multiplier and shift the host prepared for d
 * (cuda_executor.c fast_divisor): a multiply-high and a shift instead of a division
 * sequence (umulhi(n, mul) + n cannot wrap for such n). */
__device__ __forceinline__ uint32_t fast_div(uint32_t n, uint32_t mul, uint32_t shift) {
  return (__umulhi(n, mul) + n) >> shift;
}

template <typename T>
__device__ __forceinline__ float load(uint64_t base, int64_t index) {
  return Element<T>::load(reinterpret_cast<const T*>(base) + index);
}

template <typename T>
__device__ __forceinline__ void store(uint64_t base, int64_t index, float value) {
  Element<T>::store(reinterpret_cast<T*>(base) + index, value);
}

/* The same formulas as cpu_ops_elementwise.c, in float32. */
__device__ __forceinline__ float activate(int op, float x) {
  switch (op) {
    case EMBER_K_UNARY_RELU:
      return x < 0.0f ? 0.0f : x; /* NaN passes through, as on the CPU and in PyTorch */
    case EMBER_K_UNARY_GELU_ERF:
      /* NaN at +inf, as PyTorch's CPU kernels and the CPU reference (the tanh form: inf). */
      if (x == __int_as_float(0x7f800000)) return __int_as_float(0x7fc00000);
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    case EMBER_K_UNARY_GELU_TANH:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286535588f * (x + 0.044715f * x * x * x)));
    case EMBER_K_UNARY_SIGMOID:
      return 1.0f / (1.0f + expf(-x));
    case EMBER_K_UNARY_TANH:
      return tanhf(x);
    case EMBER_K_UNARY_SILU:
      return x / (1.0f + expf(-x));
    default:
      return x;
  }
}

/* The approximate reciprocal and base-2 exponential of the special function unit, one
 * instruction each (flushing denormals), for callers whose arguments keep away from where
 * that matters. */
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ float exp2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* GELU's erf form for outputs of 16 bits, 0.5·x·erfc(-x/√2), with erfc(z) for z = |x|/√2
 * from the Chebyshev fit of Numerical Recipes' erfcc, t·exp(-z² + P(t)) for
 * t = 1 / (1 + z/2) (relative error under 1.2e-7 everywhere, so the tail at x < 0 keeps
 * its relative accuracy). P's coefficients carry log2(e), so that the exponential is one
 * ex2. Within 2.5e-6 of the exact GELU, relatively, for |x| < 6, and 1.1e-5 up to 13
 * (checked against double erfc at 2M points of [-14, 14]), far below a float16 or
 * bfloat16 ulp; past x = -13 the result (under 1e-37) flushes to zero. erff takes one of
 * two polynomial branches by |x|, and a warp holding both kinds runs both; this has no
 * branch: about 20 instructions an element, against about 40 with a branch for +inf and
 * the IEEE-careful reciprocal and exponential (the MLP's GELU kernels issue-bound). At
 * x = ±inf, t and the exponential are 0, so both forms are inf·0: NaN, as activate()
 * gives, without a test for it. */
__device__ __forceinline__ float gelu_erf_16bit(float x) {
  const float t = rcp_approx(fmaf(fabsf(x), 0.35355339059327376220f, 1.0f)); /* 1 + z/2 >= 1 */
  float poly = fmaf(t, 2.46517298e-01f, -1.18611495e+00f);
  poly = fmaf(t, poly, 2.14747446e+00f);
  poly = fmaf(t, poly, -1.63775315e+00f);
  poly = fmaf(t, poly, 4.02321582e-01f);
  poly = fmaf(t, poly, -2.68756860e-01f);
  poly = fmaf(t, poly, 1.39630057e-01f);
  poly = fmaf(t, poly, 5.39700616e-01f);
  poly = fmaf(t, poly, 1.44272920e+00f);
  poly = fmaf(t, poly, -1.82574822e+00f);
  /* log2(e)·(-z² + P(t)) = x²·(-log2(e)/2) + log2(e)·P(t) */
  const float erfc_z = t * exp2_approx(fmaf(x * x, -0.72134752044448170368f, poly));
  const float half_x = 0.5f * x;
  return x < 0.0f ? half_x * erfc_z : fmaf(-half_x, erfc_z, x); /* 0.5·x·(2 - erfc) */
}

/* activate() for outputs of type T: GELU's erf form by gelu_erf_16bit for 16-bit types. */
template <typename T>
__device__ __forceinline__ float activate_as(int op, float x) {
  if constexpr (sizeof(T) == 2) {
    if (op == EMBER_K_UNARY_GELU_ERF) return gelu_erf_16bit(x);
  }
  return activate(op, x);
}

/* A grid-stride loop index: kernels are launched with a bounded grid and loop. */
__device__ __forceinline__ int64_t global_thread() {
  return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_stride() { return (int64_t)gridDim.x * blockDim.x; }
/* The same in 32 bits, for paths that checked their counts fit (grids are bounded by the
 * SM count, so index + stride cannot wrap). */
__device__ __forceinline__ uint32_t global_thread32() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ uint32_t global_stride32() { return gridDim.x * blockDim.x; }

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

/* Block-wide sum / max; every thread gets the result. `scratch` holds 32 floats. The
 * leading barrier lets a block call these back to back with the same scratch. */
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : __int_as_float(0xff800000u); /* -inf */
  return warp_max(v);
}

/* The two halves of begin_after_previous_grid (below), for a kernel that reads the
 * plan's constants between them (gemm_wgmma.cu; check_kernel_entries.py lists it). */
__device__ __forceinline__ void wait_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
/* The first statement of every kernel entry point but gemm_wgmma's. Under programmatic
 * dependent launch (EMBER_CUDA_PDL, the graph's kernel-to-kernel edges) a kernel may be
 * scheduled before the kernel it follows has finished: wait here until that one's writes
 * are visible, before this one reads its inputs or writes over memory the planner
 * reused, and then let the kernel after this one be scheduled as this one's blocks
 * drain. Without such an edge (eager launches, a GEMM's neighbours, other settings) both
 * are no-ops. Each kernel waits on the one before, so a kernel's predecessors have all
 * finished once its wait returns. Before sm_90 there is no such launch. */
__device__ __forceinline__ void begin_after_previous_grid() {
  wait_previous_grid();
  allow_next_grid();
}

}  // namespace ember

/* Defines NAME_f32, NAME_f16 and NAME_bf16 as kernels calling TEMPLATE<T>(p). */
#define EMBER_K_FOR_EACH_DTYPE(NAME, TEMPLATE, PARAMS)                                    \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) NAME##_f32(const PARAMS p) { \
    ember::begin_after_previous_grid();                                                   \
    TEMPLATE<float>(p);                                                                   \
  }                                                                                       \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) NAME##_f16(const PARAMS p) { \
    ember::begin_after_previous_grid();                                                   \
    TEMPLATE<__half>(p);                                                                  \
  }                                                                                       \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) NAME##_bf16(const PARAMS p) { \
    ember::begin_after_previous_grid();                                                   \
    TEMPLATE<__nv_bfloat16>(p);                                                           \
  }

#endif /* EMBER_SRC_CUDA_KERNELS_KERNEL_COMMON_CUH_ */
