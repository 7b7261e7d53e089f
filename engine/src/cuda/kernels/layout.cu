/* Layout kernels, by element size so that one kernel serves every dtype of that size:
 * a strided gather for PERMUTE, EXPAND and SLICE; a copy of rows for CAT (and SLICE with
 * step 1); a byte copy for RESHAPE and COPY. Copies are kernels rather than memcpy nodes
 * so that every step of a graph is a kernel node whose pointers can be updated the same
 * way. */
#include "kernel_common.cuh"

namespace ember {

template <typename E>
__device__ void gather(const ember_k_gather_params& p) {
  const int64_t count = (int64_t)p.count;
  const int rank = (int)p.rank;
  const E* x = reinterpret_cast<const E*>(p.x) + p.x_offset;
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

template <typename E>
__device__ void copy_rows_as(const ember_k_copy_rows_params& p) {
  const int64_t per_row = p.row_bytes / (int64_t)sizeof(E);
  const int64_t count = p.rows * per_row;
  const uint8_t* x = reinterpret_cast<const uint8_t*>(p.x) + p.x_offset;
  uint8_t* y = reinterpret_cast<uint8_t*>(p.y) + p.y_offset;
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    const int64_t r = i / per_row, c = i % per_row;
    *reinterpret_cast<E*>(y + r * p.y_pitch + c * (int64_t)sizeof(E)) =
        *reinterpret_cast<const E*>(x + r * p.x_pitch + c * (int64_t)sizeof(E));
  }
}

}  // namespace ember

#define EMBER_K_GATHER(SIZE, TYPE)                                  \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)       \
      ember_gather_##SIZE(const ember_k_gather_params p) {          \
    ember::gather<TYPE>(p);                                         \
  }
EMBER_K_GATHER(1, uint8_t)
EMBER_K_GATHER(2, uint16_t)
EMBER_K_GATHER(4, uint32_t)
EMBER_K_GATHER(8, uint64_t)

/* The widest move that the addresses, pitches and row size all allow. */
extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_copy_rows(const ember_k_copy_rows_params p) {
  const uint64_t all = (p.x + (uint64_t)p.x_offset) | (p.y + (uint64_t)p.y_offset) |
                       (uint64_t)p.row_bytes | (uint64_t)p.x_pitch | (uint64_t)p.y_pitch;
  if ((all & 15u) == 0) {
    ember::copy_rows_as<uint4>(p);
  } else if ((all & 7u) == 0) {
    ember::copy_rows_as<uint64_t>(p);
  } else if ((all & 3u) == 0) {
    ember::copy_rows_as<uint32_t>(p);
  } else if ((all & 1u) == 0) {
    ember::copy_rows_as<uint16_t>(p);
  } else {
    ember::copy_rows_as<uint8_t>(p);
  }
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
