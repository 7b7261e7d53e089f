/* REDUCE_SUM, REDUCE_MEAN and REDUCE_MAX over any set of dims, in float32. The host has
 * split x's dims into kept ones (walked by the output index) and reduced ones (walked by
 * each output's reduction), merging neighbours that are contiguous. A long reduction
 * runs a block per output; a short one a thread per output. MAX propagates NaN, as
 * torch.amax and the CPU reference. */
#include "kernel_common.cuh"

namespace ember {

__device__ __forceinline__ float nan_max(float a, float b) {
  return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
}

__device__ __forceinline__ int64_t walk_offset(int64_t index, uint32_t rank, const int64_t* dims,
                                               const int64_t* strides) {
  if (rank == 0) return 0;
  int64_t offset = 0;
  for (int d = (int)rank - 1; d > 0; --d) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  /* index < dims[0] by now: no division for the outermost dim, so a walk over one merged
   * dim (resnet's global average pool: both walks) divides nothing. 64-bit divisions per
   * element made that pool 17 us at batch 64. */
  return offset + index * strides[0];
}

__device__ __forceinline__ float combine(int op, float acc, float v) {
  return op == EMBER_K_REDUCE_MAX ? nan_max(acc, v) : acc + v;
}

__device__ __forceinline__ float finish(const ember_k_reduce_params& p, float acc) {
  return p.op == EMBER_K_REDUCE_MEAN ? acc / (float)p.red_count : acc; /* 0/0: NaN */
}

template <typename T>
__device__ void reduce_thread(const ember_k_reduce_params& p) {
  const float start = p.op == EMBER_K_REDUCE_MAX ? __int_as_float(0xff800000u) : 0.0f;
  for (int64_t out = global_thread(); out < p.out_count; out += global_stride()) {
    const int64_t base = walk_offset(out, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc = start;
    for (int64_t r = 0; r < p.red_count; ++r) {
      acc = combine(p.op, acc, load<T>(p.x, base + walk_offset(r, p.red_rank, p.red_dims,
                                                                p.red_strides)));
    }
    store<T>(p.y, out, finish(p, acc));
  }
}

/* A warp per output (p.per_warp): resnet's global average pool, 49 elements an output,
 * ran 12x slower as a block per output. */
template <typename T>
__device__ void reduce_warp(const ember_k_reduce_params& p) {
  const float start = p.op == EMBER_K_REDUCE_MAX ? __int_as_float(0xff800000u) : 0.0f;
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  for (int64_t out = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); out < p.out_count;
       out += (int64_t)gridDim.x * warps) {
    const int64_t base = walk_offset(out, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc = start;
    for (int64_t r = lane; r < p.red_count; r += 32) {
      acc = combine(p.op, acc, load<T>(p.x, base + walk_offset(r, p.red_rank, p.red_dims,
                                                                p.red_strides)));
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      acc = combine(p.op, acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    }
    if (lane == 0) store<T>(p.y, out, finish(p, acc));
  }
}

template <typename T>
__device__ void reduce_block(const ember_k_reduce_params& p) {
  if (p.per_warp) {
    reduce_warp<T>(p);
    return;
  }
  __shared__ float scratch[32];
  const float start = p.op == EMBER_K_REDUCE_MAX ? __int_as_float(0xff800000u) : 0.0f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  for (int64_t out = blockIdx.x; out < p.out_count; out += gridDim.x) {
    const int64_t base = walk_offset(out, p.kept_rank, p.kept_dims, p.kept_strides);
    float acc = start;
    for (int64_t r = threadIdx.x; r < p.red_count; r += blockDim.x) {
      acc = combine(p.op, acc, load<T>(p.x, base + walk_offset(r, p.red_rank, p.red_dims,
                                                                p.red_strides)));
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
      acc = combine(p.op, acc, __shfl_xor_sync(0xffffffffu, acc, offset));
    }
    __syncthreads(); /* scratch is free again (the previous output has read it) */
    if (lane == 0) scratch[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < warps ? scratch[lane] : start;
      for (int offset = 16; offset > 0; offset >>= 1) {
        acc = combine(p.op, acc, __shfl_xor_sync(0xffffffffu, acc, offset));
      }
      if (lane == 0) store<T>(p.y, out, finish(p, acc));
    }
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_reduce_thread, ember::reduce_thread, ember_k_reduce_params)
EMBER_K_FOR_EACH_DTYPE(ember_reduce_block, ember::reduce_block, ember_k_reduce_params)
