/* Layout kernels: PERMUTE (by element size, so one kernel serves the dtypes of that
 * size) and a byte copy for RESHAPE and COPY. The copy is a kernel rather than a memcpy
 * node so that every step of a graph is a kernel node whose pointers can be updated the
 * same way. */
#include "kernel_common.cuh"

namespace ember {

template <typename E>
__device__ void permute(const ember_k_permute_params& p) {
  const int64_t count = (int64_t)p.count;
  const int rank = (int)p.rank;
  const E* x = reinterpret_cast<const E*>(p.x);
  E* y = reinterpret_cast<E*>(p.y);
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    int64_t rest = i, offset = 0;
    for (int d = rank - 1; d >= 0; --d) {
      offset += (rest % p.dims[d]) * p.x_strides[d];
      rest /= p.dims[d];
    }
    y[i] = x[offset];
  }
}

}  // namespace ember

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_permute_2(const ember_k_permute_params p) {
  ember::permute<uint16_t>(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_permute_4(const ember_k_permute_params p) {
  ember::permute<uint32_t>(p);
}

/* 16-byte moves when both ends and the size allow, else 4-byte, else bytes. */
extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_copy_bytes(const ember_k_copy_params p) {
  const uint64_t all = p.x | p.y | p.nbytes;
  if ((all & 15u) == 0) {
    const int64_t count = (int64_t)(p.nbytes / 16u);
    const uint4* x = reinterpret_cast<const uint4*>(p.x);
    uint4* y = reinterpret_cast<uint4*>(p.y);
    for (int64_t i = ember::global_thread(); i < count; i += ember::global_stride()) y[i] = x[i];
  } else if ((all & 3u) == 0) {
    const int64_t count = (int64_t)(p.nbytes / 4u);
    const uint32_t* x = reinterpret_cast<const uint32_t*>(p.x);
    uint32_t* y = reinterpret_cast<uint32_t*>(p.y);
    for (int64_t i = ember::global_thread(); i < count; i += ember::global_stride()) y[i] = x[i];
  } else {
    const int64_t count = (int64_t)p.nbytes;
    const uint8_t* x = reinterpret_cast<const uint8_t*>(p.x);
    uint8_t* y = reinterpret_cast<uint8_t*>(p.y);
    for (int64_t i = ember::global_thread(); i < count; i += ember::global_stride()) y[i] = x[i];
  }
}
