/* Elementwise kernels: unary ops (RELU GELU SIGMOID TANH SILU, and NEG EXP LOG SQRT RSQRT
 * ABS RECIPROCAL CLAMP) and the GEMM epilogue that cuBLASLt did not fuse (bias add, then
 * an activation). */
#include "kernel_common.cuh"

namespace ember {

/* The ops past the activations, with the formulas of cpu_ops_elementwise.c in float32
 * (IEEE sqrt and division, so RSQRT is 1 / sqrt(x), not the approximate rsqrtf). */
template <typename T>
__device__ __forceinline__ float apply_unary(int op, const ember_k_unary_params& p, float x) {
  switch (op) {
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
    default: return activate_as<T>(op, x);
  }
}

/* y = op(x), 16 bytes a thread. kOp is the op as a constant, so the op's switch folds
 * away out of the per-element loop (-1: read p.op). */
template <typename T, int kOp>
__device__ void unary_vectors(const ember_k_unary_params& p, uint32_t vectors) {
  const int op = kOp >= 0 ? kOp : p.op;
  for (uint32_t v = global_thread32(); v < vectors; v += global_stride32()) {
    Vec16<T> in, out;
    in.load(p.x, v);
#pragma unroll
    for (int k = 0; k < Vec16<T>::kCount; ++k) out.set(k, apply_unary<T>(op, p, in.get(k)));
    out.store(p.y, v);
  }
}

template <typename T>
__device__ void unary(const ember_k_unary_params& p) {
  const int64_t count = (int64_t)p.count;
  int64_t done = 0; /* elements the vector path wrote */
  if (p.count <= INT32_MAX && aligned16(p.x | p.y)) {
    const uint32_t vectors = (uint32_t)p.count / Vec16<T>::kCount;
    switch (p.op) {
      case EMBER_K_UNARY_RELU: unary_vectors<T, EMBER_K_UNARY_RELU>(p, vectors); break;
      case EMBER_K_UNARY_GELU_ERF: unary_vectors<T, EMBER_K_UNARY_GELU_ERF>(p, vectors); break;
      case EMBER_K_UNARY_GELU_TANH: unary_vectors<T, EMBER_K_UNARY_GELU_TANH>(p, vectors); break;
      case EMBER_K_UNARY_SIGMOID: unary_vectors<T, EMBER_K_UNARY_SIGMOID>(p, vectors); break;
      case EMBER_K_UNARY_SILU: unary_vectors<T, EMBER_K_UNARY_SILU>(p, vectors); break;
      default: unary_vectors<T, -1>(p, vectors); break;
    }
    done = (int64_t)vectors * Vec16<T>::kCount;
  }
  /* The tail past the last whole vector, or everything when unaligned or huge. */
  for (int64_t i = done + global_thread(); i < count; i += global_stride()) {
    store<T>(p.y, i, apply_unary<T>(p.op, p, load<T>(p.x, i)));
  }
}

/* y = act(y + bias[col]) in place, 16 bytes of y a thread; the bias is read per element
 * (a vector of y may straddle two rows). */
template <typename T>
__device__ void bias_act_vectors(const ember_k_bias_act_params& p, uint32_t vectors) {
  const uint32_t cols = (uint32_t)p.cols;
  for (uint32_t v = global_thread32(); v < vectors; v += global_stride32()) {
    Vec16<T> val;
    if (!p.zero_input) val.load(p.y, v);
    uint32_t col = v * Vec16<T>::kCount % cols;
#pragma unroll
    for (int k = 0; k < Vec16<T>::kCount; ++k) {
      float x = p.zero_input ? 0.0f : val.get(k);
      if (p.has_bias) {
        x += load<T>(p.bias, col);
        if (++col == cols) col = 0;
      }
      val.set(k, activate_as<T>(p.act, x));
    }
    val.store(p.y, v);
  }
}

template <typename T>
__device__ void bias_act(const ember_k_bias_act_params& p) {
  const int64_t count = p.rows * p.cols;
  int64_t done = 0; /* elements the vector path wrote */
  if (count <= INT32_MAX && aligned16(p.y)) {
    const uint32_t vectors = (uint32_t)count / Vec16<T>::kCount;
    bias_act_vectors<T>(p, vectors);
    done = (int64_t)vectors * Vec16<T>::kCount;
  }
  for (int64_t i = done + global_thread(); i < count; i += global_stride()) {
    float v = p.zero_input ? 0.0f : load<T>(p.y, i);
    if (p.has_bias) v += load<T>(p.bias, i % p.cols);
    store<T>(p.y, i, activate_as<T>(p.act, v));
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_unary, ember::unary, ember_k_unary_params)
EMBER_K_FOR_EACH_DTYPE(ember_bias_act, ember::bias_act, ember_k_bias_act_params)
