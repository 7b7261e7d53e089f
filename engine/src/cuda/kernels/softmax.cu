/* SOFTMAX, numerically stable (the maximum is subtracted), in float32.
 *
 * x and y are viewed as [outer, dim, inner]. Softmax over the last dim (inner == 1) runs
 * one block per row, reducing across the block; over another dim, one thread per
 * (outer, inner) column walks the dim with stride `inner`, so neighbouring threads read
 * neighbouring elements. */
#include "kernel_common.cuh"

namespace ember {

template <typename T>
__device__ void softmax_rows(const ember_k_softmax_params& p) {
  __shared__ float scratch[32];
  const int64_t cols = p.dim;
  for (int64_t row = blockIdx.x; row < p.outer; row += gridDim.x) {
    const int64_t base = row * cols;
    float m = __int_as_float(0xff800000u); /* -inf */
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, load<T>(p.x, base + c));
    m = block_max(m, scratch);
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += expf(load<T>(p.x, base + c) - m);
    s = block_sum(s, scratch);
    const float inv = 1.0f / s;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      store<T>(p.y, base + c, expf(load<T>(p.x, base + c) - m) * inv);
    }
  }
}

template <typename T>
__device__ void softmax_strided(const ember_k_softmax_params& p) {
  const int64_t columns = p.outer * p.inner;
  for (int64_t col = global_thread(); col < columns; col += global_stride()) {
    const int64_t o = col / p.inner, in = col % p.inner;
    const int64_t base = o * p.dim * p.inner + in;
    float m = __int_as_float(0xff800000u);
    for (int64_t d = 0; d < p.dim; ++d) m = fmaxf(m, load<T>(p.x, base + d * p.inner));
    float s = 0.0f;
    for (int64_t d = 0; d < p.dim; ++d) s += expf(load<T>(p.x, base + d * p.inner) - m);
    const float inv = 1.0f / s;
    for (int64_t d = 0; d < p.dim; ++d) {
      store<T>(p.y, base + d * p.inner, expf(load<T>(p.x, base + d * p.inner) - m) * inv);
    }
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_softmax_rows, ember::softmax_rows, ember_k_softmax_params)
EMBER_K_FOR_EACH_DTYPE(ember_softmax_strided, ember::softmax_strided, ember_k_softmax_params)
