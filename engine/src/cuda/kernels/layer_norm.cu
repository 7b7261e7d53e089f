/* LAYER_NORM over the last `cols` elements of each row, in float32: the mean first, then
 * the variance from the centred values (two passes, the stable form; the CPU reference
 * does the same in double). Biased variance, as PyTorch's layer_norm. */
#include "kernel_common.cuh"

namespace ember {

template <typename T>
__device__ void layer_norm(const ember_k_layer_norm_params& p) {
  __shared__ float scratch[32];
  const int64_t cols = p.cols;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t base = row * cols;
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += load<T>(p.x, base + c);
    const float mean = block_sum(s, scratch) / (float)cols;
    float v = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float d = load<T>(p.x, base + c) - mean;
      v += d * d;
    }
    const float variance = block_sum(v, scratch) / (float)cols;
    const float inv_std = rsqrtf(variance + p.eps);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float out = (load<T>(p.x, base + c) - mean) * inv_std;
      if (p.has_weight) out *= load<T>(p.w, c);
      if (p.has_bias) out += load<T>(p.b, c);
      store<T>(p.y, base + c, out);
    }
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_layer_norm, ember::layer_norm, ember_k_layer_norm_params)
