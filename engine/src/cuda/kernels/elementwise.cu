/* Elementwise kernels: unary ops (RELU GELU SIGMOID TANH SILU, and NEG EXP LOG SQRT RSQRT
 * ABS RECIPROCAL CLAMP) and the GEMM epilogue that cuBLASLt did not fuse (bias add, then
 * an activation). */
#include "kernel_common.cuh"

namespace ember {

/* The ops past the activations, with the formulas of cpu_ops_elementwise.c in float32
 * (IEEE sqrt and division, so RSQRT is 1 / sqrt(x), not the approximate rsqrtf). */
__device__ __forceinline__ float apply_unary(const ember_k_unary_params& p, float x) {
  switch (p.op) {
    case EMBER_K_UNARY_NEG: return -x;
    case EMBER_K_UNARY_EXP: return expf(x);
    case EMBER_K_UNARY_LOG: return logf(x);
    case EMBER_K_UNARY_SQRT: return sqrtf(x);
    case EMBER_K_UNARY_RSQRT: return 1.0f / sqrtf(x);
    case EMBER_K_UNARY_ABS: return fabsf(x);
    case EMBER_K_UNARY_RECIPROCAL: return 1.0f / x;
    case EMBER_K_UNARY_CLAMP:
      /* torch.clamp: min(max(x, lo), hi); NaN stays NaN. */
      if (isnan(x)) return x;
      x = x < p.clamp_min ? p.clamp_min : x;
      return x > p.clamp_max ? p.clamp_max : x;
    default: return activate(p.op, x);
  }
}

template <typename T>
__device__ void unary(const ember_k_unary_params& p) {
  const int64_t count = (int64_t)p.count;
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    store<T>(p.y, i, apply_unary(p, load<T>(p.x, i)));
  }
}

template <typename T>
__device__ void bias_act(const ember_k_bias_act_params& p) {
  const int64_t count = p.rows * p.cols;
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    float v = p.zero_input ? 0.0f : load<T>(p.y, i);
    if (p.has_bias) v += load<T>(p.bias, i % p.cols);
    store<T>(p.y, i, activate(p.act, v));
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_unary, ember::unary, ember_k_unary_params)
EMBER_K_FOR_EACH_DTYPE(ember_bias_act, ember::bias_act, ember_k_bias_act_params)
