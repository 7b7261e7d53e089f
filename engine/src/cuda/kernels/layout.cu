/* Layout kernels, by element size so that one kernel serves every dtype of that size:
 * a strided gather for PERMUTE, EXPAND and SLICE; a copy of rows for CAT (and SLICE with
 * step 1); a byte copy for RESHAPE and COPY. Copies are kernels rather than memcpy nodes
 * so that every step of a graph is a kernel node whose pointers can be updated the same
 * way. */
#include "kernel_common.cuh"

namespace ember {

/* The gather walks y in units of p.vector elements (kernel_params.h). Where unit i of y
 * starts in x, in units: 64-bit math, or 32-bit with the host's divisors (index32). The
 * 32-bit walk is unrolled over every possible dim so that each parameter is read at a
 * fixed offset; dim 0 needs no division (what is left of i is below dims[0]). */
__device__ __forceinline__ int64_t gather_offset(const ember_k_gather_params& p, int64_t i) {
  int64_t offset = p.x_offset;
  for (int d = (int)p.rank - 1; d > 0; --d) {
    const int64_t q = i / p.dims[d];
    offset += (i - q * p.dims[d]) * p.x_strides[d];
    i = q;
  }
  return offset + i * p.x_strides[0];
}

__device__ __forceinline__ uint32_t gather_offset(const ember_k_gather_params& p, uint32_t i) {
  uint32_t offset = (uint32_t)p.x_offset;
#pragma unroll
  for (int d = EMBER_K_MAX_RANK - 1; d > 0; --d) {
    if (d < (int)p.rank) {
      const uint32_t q = fast_div(i, p.div_mul[d], p.div_shift[d]);
      offset += (i - q * (uint32_t)p.dims[d]) * (uint32_t)p.x_strides[d];
      i = q;
    }
  }
  return offset + i * (uint32_t)p.x_strides[0];
}

/* I: uint32_t (index32) or int64_t. */
template <typename I>
__device__ __forceinline__ I gather_first() {
  return sizeof(I) == 4 ? (I)global_thread32() : (I)global_thread();
}
template <typename I>
__device__ __forceinline__ I gather_stride() {
  return sizeof(I) == 4 ? (I)global_stride32() : (I)global_stride();
}

/* A unit per move: U is 4, 8 or 16 bytes and x, y are aligned to it. */
template <typename U, typename I>
__device__ void gather_units(const ember_k_gather_params& p) {
  const I count = (I)p.count;
  const U* x = reinterpret_cast<const U*>(p.x);
  U* y = reinterpret_cast<U*>(p.y);
  for (I i = gather_first<I>(); i < count; i += gather_stride<I>()) y[i] = x[gather_offset(p, i)];
}

/* Element by element: p.vector == 1, or x or y too little aligned for the unit. */
template <typename E, typename I>
__device__ void gather_elements(const ember_k_gather_params& p) {
  const I count = (I)p.count;
  const uint64_t w = p.vector;
  const E* x = reinterpret_cast<const E*>(p.x);
  E* y = reinterpret_cast<E*>(p.y);
  for (I i = gather_first<I>(); i < count; i += gather_stride<I>()) {
    const uint64_t from = (uint64_t)gather_offset(p, i) * w, to = (uint64_t)i * w;
    for (uint64_t k = 0; k < w; ++k) y[to + k] = x[from + k];
  }
}

/* Bound inputs and outputs may be less aligned than the unit the host chose, so the
 * alignment is checked here, per launch. */
template <typename E, typename I>
__device__ void gather_as(const ember_k_gather_params& p) {
  const uint64_t bytes = (uint64_t)p.vector * sizeof(E);
  const bool aligned = p.vector > 1 && ((p.x | p.y) & (bytes - 1)) == 0;
  if (aligned && bytes == 16) {
    gather_units<uint4, I>(p);
  } else if (aligned && bytes == 8 && sizeof(E) < 8) {
    gather_units<uint2, I>(p);
  } else if (aligned && bytes == 4 && sizeof(E) < 4) {
    gather_units<uint32_t, I>(p);
  } else {
    gather_elements<E, I>(p);
  }
}

template <typename E>
__device__ void gather(const ember_k_gather_params& p) {
  if (p.index32) {
    gather_as<E, uint32_t>(p);
  } else {
    gather_as<E, int64_t>(p);
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
    ember::begin_after_previous_grid();                             \
    ember::gather<TYPE>(p);                                         \
  }
EMBER_K_GATHER(1, uint8_t)
EMBER_K_GATHER(2, uint16_t)
EMBER_K_GATHER(4, uint32_t)
EMBER_K_GATHER(8, uint64_t)

/* The widest move that the addresses, pitches and row size all allow. */
extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_copy_rows(const ember_k_copy_rows_params p) {
  ember::begin_after_previous_grid();
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
  ember::begin_after_previous_grid();
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
