/* LAYER_NORM over the last `cols` elements of each row, in float32: the mean first, then
 * the variance from the centred values (two passes, the stable form; the CPU reference
 * does the same in double). Biased variance, as PyTorch's layer_norm.
 *
 * A row of at most EMBER_K_LAYER_NORM_BLOCK_COLS elements is read once, into registers
 * (up to EMBER_K_LAYER_NORM_PER_THREAD a thread; kernel_params.h): a warp per row up to
 * EMBER_K_LAYER_NORM_WARP_COLS, else a block. 16-byte moves when every address and the
 * row length allow (bound inputs and outputs may be less aligned, so this is checked per
 * launch), else element by element. Longer rows loop over global memory three times.
 * With a residual (the ADD before it), each element is x + r rounded to the dtype, as the
 * ADD would have stored it. */
#include "kernel_common.cuh"

namespace ember {

/* The rows a thread's group takes and its place in the group. kWarp: a warp per row (the
 * warps of a block take neighbouring rows); else the whole block. */
template <bool kWarp>
struct RowGroup {
  int64_t first, step;
  int32_t size, t;
  __device__ __forceinline__ RowGroup() {
    const int64_t per_block = kWarp ? blockDim.x >> 5 : 1;
    first = (int64_t)blockIdx.x * per_block + (kWarp ? threadIdx.x >> 5 : 0);
    step = (int64_t)gridDim.x * per_block;
    size = kWarp ? 32 : (int32_t)blockDim.x;
    t = (int32_t)(kWarp ? threadIdx.x & 31 : threadIdx.x);
  }
  __device__ __forceinline__ float sum(float v, float* scratch) const {
    return kWarp ? warp_sum(v) : block_sum(v, scratch);
  }
};

/* The row in registers as 16-byte vectors (the dtype's bits, widened in each pass):
 * thread t of the group holds vectors t, t + size, t + 2 size... Needs cols a multiple
 * of the vector and every address 16-byte aligned. */
template <typename T, bool kWarp>
__device__ void layer_norm_vectors(const ember_k_layer_norm_params& p, float* scratch) {
  constexpr int kCount = Vec16<T>::kCount;
  constexpr int kSlots = EMBER_K_LAYER_NORM_PER_THREAD / kCount;
  const RowGroup<kWarp> g;
  const int32_t chunks = (int32_t)(p.cols / kCount); /* at most 32 · EMBER_K_BLOCK */
  const uint64_t row_bytes = (uint64_t)p.cols * sizeof(T);
  for (int64_t row = g.first; row < p.rows; row += g.step) {
    const uint64_t x_row = p.x + (uint64_t)row * row_bytes, y_row = p.y + (uint64_t)row * row_bytes;
    Vec16<T> v[kSlots];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int32_t j = g.t + g.size * k;
      if (j < chunks) {
        v[k].load(x_row, (uint32_t)j);
        if (p.has_residual) {
          Vec16<T> r;
          r.load(p.r + (uint64_t)row * row_bytes, (uint32_t)j);
#pragma unroll
          for (int e = 0; e < kCount; ++e) v[k].set(e, v[k].get(e) + r.get(e));
        }
#pragma unroll
        for (int e = 0; e < kCount; ++e) s += v[k].get(e);
      }
    }
    const float mean = g.sum(s, scratch) / (float)p.cols;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      if (g.t + g.size * k < chunks) {
#pragma unroll
        for (int e = 0; e < kCount; ++e) {
          const float d = v[k].get(e) - mean;
          q += d * d;
        }
      }
    }
    const float variance = g.sum(q, scratch) / (float)p.cols;
    const float inv_std = rsqrtf(variance + p.eps);
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int32_t j = g.t + g.size * k;
      if (j < chunks) {
        float out[kCount];
#pragma unroll
        for (int e = 0; e < kCount; ++e) out[e] = (v[k].get(e) - mean) * inv_std;
        Vec16<T> io;
        if (p.has_weight) {
          io.load(p.w, (uint32_t)j);
#pragma unroll
          for (int e = 0; e < kCount; ++e) out[e] *= io.get(e);
        }
        if (p.has_bias) {
          io.load(p.b, (uint32_t)j);
#pragma unroll
          for (int e = 0; e < kCount; ++e) out[e] += io.get(e);
        }
#pragma unroll
        for (int e = 0; e < kCount; ++e) io.set(e, out[e]);
        io.store(y_row, (uint32_t)j);
      }
    }
  }
}

/* Element i of the rows normalized: x's, or x + r rounded to the dtype. */
template <typename T>
__device__ __forceinline__ float norm_input(const ember_k_layer_norm_params& p, int64_t i) {
  if (!p.has_residual) return load<T>(p.x, i);
  T sum;
  Element<T>::store(&sum, load<T>(p.x, i) + load<T>(p.r, i));
  return Element<T>::load(&sum);
}

/* Element by element, reading the row three times: rows too long for registers, and
 * rows whose length or addresses do not allow 16-byte moves. */
template <typename T, bool kWarp>
__device__ void layer_norm_loop(const ember_k_layer_norm_params& p, float* scratch) {
  const RowGroup<kWarp> g;
  const int64_t cols = p.cols;
  for (int64_t row = g.first; row < p.rows; row += g.step) {
    const int64_t base = row * cols;
    float s = 0.0f;
    for (int64_t c = g.t; c < cols; c += g.size) s += norm_input<T>(p, base + c);
    const float mean = g.sum(s, scratch) / (float)cols;
    float v = 0.0f;
    for (int64_t c = g.t; c < cols; c += g.size) {
      const float d = norm_input<T>(p, base + c) - mean;
      v += d * d;
    }
    const float variance = g.sum(v, scratch) / (float)cols;
    const float inv_std = rsqrtf(variance + p.eps);
    for (int64_t c = g.t; c < cols; c += g.size) {
      float out = (norm_input<T>(p, base + c) - mean) * inv_std;
      if (p.has_weight) out *= load<T>(p.w, c);
      if (p.has_bias) out += load<T>(p.b, c);
      store<T>(p.y, base + c, out);
    }
  }
}

template <typename T>
__device__ void layer_norm(const ember_k_layer_norm_params& p) {
  __shared__ float scratch[32];
  const uint64_t addresses = p.x | p.y | (p.has_residual ? p.r : 0u) |
                             (p.has_weight ? p.w : 0u) | (p.has_bias ? p.b : 0u);
  const bool vector = p.cols % Vec16<T>::kCount == 0 && aligned16(addresses);
  if (p.cols <= EMBER_K_LAYER_NORM_WARP_COLS) {
    if (vector) {
      layer_norm_vectors<T, true>(p, scratch);
    } else {
      layer_norm_loop<T, true>(p, scratch);
    }
  } else if (vector && p.cols <= (int64_t)blockDim.x * EMBER_K_LAYER_NORM_PER_THREAD) {
    layer_norm_vectors<T, false>(p, scratch);
  } else {
    layer_norm_loop<T, false>(p, scratch);
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_layer_norm, ember::layer_norm, ember_k_layer_norm_params)
