/* Elementwise kernels: unary activations (RELU GELU SIGMOID TANH SILU) and the GEMM
 * epilogue that cuBLASLt did not fuse (bias add, then an activation). */
#include "kernel_common.cuh"

namespace ember {

template <typename T>
__device__ void unary(const ember_k_unary_params& p) {
  const int64_t count = (int64_t)p.count;
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    store<T>(p.y, i, activate(p.op, load<T>(p.x, i)));
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
