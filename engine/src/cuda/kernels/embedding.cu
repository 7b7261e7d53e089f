/* EMBEDDING: a gather of weight rows by int64 or int32 index, by element size. An index
 * outside [0, rows) cannot be refused before the run (it is data), so its row is zeros
 * and the smallest (op, position) is recorded for the host to report as an error. */
#include "kernel_common.cuh"

namespace ember {

template <typename E>
__device__ void embedding(const ember_k_embedding_params& p) {
  const int64_t total = p.count * p.cols;
  const E* w = reinterpret_cast<const E*>(p.w);
  E* y = reinterpret_cast<E*>(p.y);
  for (int64_t i = global_thread(); i < total; i += global_stride()) {
    const int64_t position = i / p.cols, col = i % p.cols;
    const int64_t index = p.index_is_64 ? reinterpret_cast<const int64_t*>(p.indices)[position]
                                        : reinterpret_cast<const int32_t*>(p.indices)[position];
    if (index < 0 || index >= p.rows) {
      y[i] = E(0);
      if (col == 0) {
        atomicMin(reinterpret_cast<unsigned long long*>(p.error),
                  ((unsigned long long)p.op_index << 40) | (unsigned long long)position);
      }
      continue;
    }
    y[i] = w[index * p.cols + col];
  }
}

}  // namespace ember

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_embedding_2(const ember_k_embedding_params p) {
  ember::begin_after_previous_grid();
  ember::embedding<uint16_t>(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_embedding_4(const ember_k_embedding_params p) {
  ember::begin_after_previous_grid();
  ember::embedding<uint32_t>(p);
}
