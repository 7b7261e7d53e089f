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

/* The approximate base-2 exponential of the special function unit, one instruction
 * (flushing denormals), for callers whose results keep away from where that matters. */
__device__ __forceinline__ float exp2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* GELU's erf form for outputs of 16 bits, x·Φ(x) = max(x, 0) - |x|·Φ(-|x|), with
 * Φ(-a) = exp2(Q(a)) for a = |x|: Q, of degree 7, is a weighted minimax fit of log2(Φ(-a))
 * on [0, 13.2] (tools/fit_gelu_erf.py), weighted by how closely each a's float16 and
 * bfloat16 results need it. Within 4.8e-6 of the exact GELU, relatively, for x >= -4
 * (3.4e-6 for x > 0; float32 against double at 2M points), 3.1e-5 on [-5, -4]; of all
 * finite float16 inputs, 109 round a unit away from the exact value and none further
 * (0.17%), and of bfloat16's from -5 up, 128 (test_cuda_ops checks every 16-bit input).
 * Below -6 the result, under 6e-9 in magnitude, is within a factor of 1.3 of the exact
 * one and flushes to zero past about -13 (the ex2's denormals). No clamp of a: Q's leading
 * coefficient is negative, so it keeps falling past 13.2 and the ex2 is 0 there.
 * One special-function instruction (the ex2) and 9 FMA-pipe ones an element, where the
 * degree-11 form before it (Φ(-a) = exp2(P(min(a, 6)) - a²·log2(e)/2), one float16 input
 * off) took 16: the MLP's epilogues are issue-bound on them, and its four at batch 4096
 * took 70.6-72.3 us against 75.1-75.9 (an H100, same call, alternating). erff takes one
 * of two polynomial branches by |x|, and a warp holding both kinds runs both. At
 * x = ±inf Q is -inf and Φ(-|x|) 0, so the fused multiply-add is inf·0: NaN, as
 * activate() gives, without a test for it. */
__device__ __forceinline__ float gelu_erf_16bit(float x) {
  const float a = fabsf(x);
  float q = fmaf(a, -1.429540362e-06f, 5.457967200e-05f);
  q = fmaf(a, q, -8.829443250e-04f);
  q = fmaf(a, q, 8.347611874e-03f);
  q = fmaf(a, q, -5.367936939e-02f);
  q = fmaf(a, q, -4.587070942e-01f);
  q = fmaf(a, q, -1.151163936e+00f);
  q = fmaf(a, q, -1.000003219e+00f);
  return fmaf(-a, exp2_approx(q), fmaxf(x, 0.0f));
}

/* The approximate reciprocal of the special function unit, one instruction (flushing
 * denormals: 0 for |x| past 2^126). */
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

/* GELU's tanh form for outputs of 16 bits: 0.5·x·(1 + tanh(u)) is x·σ(2u), here
 * x / (1 + exp2(-2·log2(e)·u)) with u = √(2/π)·(x + 0.044715·x³), two special-function
 * instructions and no branch, where tanhf takes one of two paths by |u| (a warp holding
 * both kinds runs both; the MLP's epilogues are issue-bound). Within 2.4e-6 of the exact
 * value, relatively, wherever it is over 6e-8 in magnitude (float32 against double at 2M
 * points of [-12, 12]); of all finite float16 inputs, 2 round otherwise than the exact
 * value (±0.001339, ties), against 370 for the float32 formula of activate(). Far below
 * zero the exponential is inf and the result -0; at x = -inf it is -inf·0, NaN, and at
 * +inf it is inf, as activate() gives. */
__device__ __forceinline__ float gelu_tanh_16bit(float x) {
  const float power = x * fmaf(x * x, -0.10294323958002349f, -2.3022081981443252f);
  return x * rcp_approx(1.0f + exp2_approx(power));
}

/* activate() for outputs of type T: GELU's two forms by gelu_erf_16bit and
 * gelu_tanh_16bit for 16-bit types. */
template <typename T>
__device__ __forceinline__ float activate_as(int op, float x) {
  if constexpr (sizeof(T) == 2) {
    if (op == EMBER_K_UNARY_GELU_ERF) return gelu_erf_16bit(x);
    if (op == EMBER_K_UNARY_GELU_TANH) return gelu_tanh_16bit(x);
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

/* Defines NAME_f16 and NAME_bf16 as kernels calling TEMPLATE<T>(p). */
#define EMBER_K_FOR_EACH_HALF(NAME, TEMPLATE, PARAMS)                                      \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) NAME##_f16(const PARAMS p) { \
    ember::begin_after_previous_grid();                                                   \
    TEMPLATE<__half>(p);                                                                  \
  }                                                                                       \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) NAME##_bf16(const PARAMS p) { \
    ember::begin_after_previous_grid();                                                   \
    TEMPLATE<__nv_bfloat16>(p);                                                           \
  }

/* Defines NAME_f32, NAME_f16 and NAME_bf16 as kernels calling TEMPLATE<T>(p). */
#define EMBER_K_FOR_EACH_DTYPE(NAME, TEMPLATE, PARAMS)                                    \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) NAME##_f32(const PARAMS p) { \
    ember::begin_after_previous_grid();                                                   \
    TEMPLATE<float>(p);                                                                   \
  }                                                                                       \
  EMBER_K_FOR_EACH_HALF(NAME, TEMPLATE, PARAMS)

#endif /* EMBER_SRC_CUDA_KERNELS_KERNEL_COMMON_CUH_ */
