/* REDUCE_SUM, REDUCE_MEAN and REDUCE_MAX over any set of dims, in float32. The host has
 * split x's dims into kept ones (walked by the output index) and reduced ones (walked by
 * each output's reduction), merging neighbours that are contiguous. A long reduction
 * runs a block per output; a short one a thread per output; one whose outputs are
 * contiguous columns of x (a channels-last global average pool) a column a thread. MAX
 * propagates NaN, as torch.amax and the CPU reference. */
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

/* A warp per output (EMBER_K_REDUCE_WARPS): resnet's global average pool, 49 elements an
 * output, ran 12x slower as a block per output (NCHW; channels last, reduce_columns). */
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

/* EMBER_K_REDUCE_COLUMNS (kernel_params.h): the innermost kept dim is contiguous in x, so
 * neighbouring outputs are neighbouring columns. A block takes 32·kV columns of one outer
 * index, kV a lane: its warps the reduced elements warp, warp + warps, ..., then the warps'
 * sums meet in shared memory as [warp][k][lane], and thread t adds column lane·kV + k of
 * t = 32k + lane. Consecutive lanes read consecutive elements, and each thread has a few
 * loads where a warp per output had one element per strided load: resnet18's global
 * average pool at batch 64 (49 elements, 512 channels, channels last) took 15.3-15.5 us
 * that way on the H200, 11.2-11.4 this way (profiled, kV 1). EMBER_K_REDUCE_COLUMN_VECTORS:
 * kV = 16 / sizeof(T), one 16-byte load an element of the reduction (a warp's 512
 * contiguous bytes); with a 2-byte load a lane that pool took 11.1 us profiled on the
 * H100. */
template <typename T, int kV>
__device__ void reduce_columns(const ember_k_reduce_params& p) {
  __shared__ float partial[EMBER_K_BLOCK / 32][32 * kV];
  const float start = p.op == EMBER_K_REDUCE_MAX ? __int_as_float(0xff800000u) : 0.0f;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const uint32_t outer_rank = p.kept_rank - 1;
  const int64_t cols = p.kept_dims[outer_rank], col_blocks = (cols + 32 * kV - 1) / (32 * kV);
  const int64_t blocks = p.out_count / cols * col_blocks;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t outer = b / col_blocks, col0 = (b - outer * col_blocks) * 32 * kV;
    float acc[kV];
#pragma unroll
    for (int k = 0; k < kV; ++k) acc[k] = start;
    if (col0 + lane * kV < cols) { /* with kV > 1, cols is a multiple of kV: whole vectors */
      const int64_t base =
          walk_offset(outer, outer_rank, p.kept_dims, p.kept_strides) + col0 + lane * kV;
#pragma unroll 4
      for (int64_t r = warp; r < p.red_count; r += warps) {
        const int64_t at = base + walk_offset(r, p.red_rank, p.red_dims, p.red_strides);
        if constexpr (kV == 1) {
          acc[0] = combine(p.op, acc[0], load<T>(p.x, at));
        } else {
          Vec16<T> v;
          v.raw = *reinterpret_cast<const uint4*>(reinterpret_cast<const T*>(p.x) + at);
#pragma unroll
          for (int k = 0; k < kV; ++k) acc[k] = combine(p.op, acc[k], v.get(k));
        }
      }
    }
    __syncthreads(); /* partial is free again (the previous columns have read it) */
#pragma unroll
    for (int k = 0; k < kV; ++k) partial[warp][32 * k + lane] = acc[k];
    __syncthreads();
    const int t = (int)threadIdx.x;
    const int64_t col = col0 + (t & 31) * kV + t / 32;
    if (t < 32 * kV && col < cols) {
      float sum = partial[0][t];
      for (int w = 1; w < warps; ++w) sum = combine(p.op, sum, partial[w][t]);
      store<T>(p.y, outer * cols + col, finish(p, sum));
    }
  }
}

template <typename T>
__device__ void reduce_block(const ember_k_reduce_params& p) {
  if (p.form == EMBER_K_REDUCE_COLUMN_VECTORS && aligned16(p.x)) {
    reduce_columns<T, Vec16<T>::kCount>(p);
    return;
  }
  if (p.form == EMBER_K_REDUCE_COLUMNS || p.form == EMBER_K_REDUCE_COLUMN_VECTORS) {
    reduce_columns<T, 1>(p);
    return;
  }
  if (p.form == EMBER_K_REDUCE_WARPS) {
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
