/* LINEAR with few rows (at most EMBER_K_GEMV_MAX_ROWS, weight [N, K]): bound by reading
 * the weight once, which cuBLASLt's tiles for M = 1 do not get near (15-23 us on an H200
 * for a 1024x1024 float16 weight that HBM delivers in about 1 us). Up to
 * EMBER_K_GEMV_GROUPED_MAX_ROWS rows of a small product too, in groups of
 * EMBER_K_GEMV_GROUP_ROWS, so that a program whose only GEMM is such a LINEAR (resnet18's
 * classifier at batch 64) never loads cuBLASLt (kernel_params.h says why).
 *
 * A warp computes one output column for a group's rows: its lanes stream the weight row
 * with 16-byte loads (four in flight per lane), multiply them by the same slices of the x
 * rows (read through L1, where the block's warps share them), accumulate in float32, sum
 * across the warp, then add the bias and apply the activation the executor fused (any
 * that activate() knows, so GELU's erf form too, which cuBLASLt's epilogue lacks).
 *
 * Past EMBER_K_GEMV_MAX_ROWS rows in float16 and bfloat16 with K even, the tensor cores
 * instead (ember_gemv_mma, gemv_mma): the grouped form holds 106-111 registers a thread,
 * so 2 blocks fit an SM and resnet18's 64-row classifier ran as 4 waves of latency-bound
 * warps, 17.75 us profiled on an H100 against cuBLASLt's 6.9. */
#include "kernel_common.cuh"
#include "tensor_core.cuh"

namespace ember {

/* acc[r] += the dot product of one 16-byte slice of the weight row with the same slice
 * (`chunk`, in 16-byte units) of x row r. */
template <typename T, int ROWS>
__device__ __forceinline__ void dot_pack(const uint4& w_pack, const uint4* x, int64_t chunk,
                                         int64_t chunks_per_row, float (&acc)[ROWS]) {
  Vec16<T> w;
  w.raw = w_pack;
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    Vec16<T> xv;
    xv.raw = __ldg(x + r * chunks_per_row + chunk);
#pragma unroll
    for (int j = 0; j < Vec16<T>::kCount; ++j) acc[r] = fmaf(xv.get(j), w.get(j), acc[r]);
  }
}

/* Units [unit, end), a grid stride of `warps` apart, of ROWS rows each; returns the first
 * unit past `end` on this warp's stride, where the caller's next range resumes. Unit u is
 * output column u % cols of the row group u / cols (rows from EMBER_K_GEMV_GROUP_ROWS
 * times the group on). */
template <typename T, int ROWS>
__device__ __forceinline__ int64_t gemv_rows(const ember_k_gemv_params& p, int64_t unit,
                                             int64_t end, int64_t warps) {
  constexpr int kCount = Vec16<T>::kCount;
  const int lane = threadIdx.x & 31;
  /* 16-byte loads need every row 16-byte aligned: aligned bases and K a whole number of
   * 16-byte slices. Otherwise (a misaligned bound pointer, an odd K) element loads. */
  const bool vectors = ((p.x | p.w) & 15u) == 0 && p.k % kCount == 0;
  for (; unit < end; unit += warps) {
    const int64_t col = unit % p.cols;
    const int64_t row0 = unit / p.cols * EMBER_K_GEMV_GROUP_ROWS;
    const T* x = reinterpret_cast<const T*>(p.x) + row0 * p.k;
    const T* w = reinterpret_cast<const T*>(p.w);
    float acc[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] = 0.0f;
    if (vectors) {
      const int64_t chunks = p.k / kCount;
      const uint4* w_row = reinterpret_cast<const uint4*>(w + col * p.k);
      const uint4* x_rows = reinterpret_cast<const uint4*>(x);
      int64_t c = lane;
      /* Four weight loads issued before their arithmetic keep HBM busy. */
      for (; c + 96 < chunks; c += 128) {
        uint4 w_packs[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) w_packs[u] = __ldg(w_row + c + 32 * u);
#pragma unroll
        for (int u = 0; u < 4; ++u) dot_pack<T, ROWS>(w_packs[u], x_rows, c + 32 * u, chunks, acc);
      }
      for (; c < chunks; c += 32) dot_pack<T, ROWS>(__ldg(w_row + c), x_rows, c, chunks, acc);
    } else {
      for (int64_t k = lane; k < p.k; k += 32) {
        const float wk = Element<T>::load(w + col * p.k + k);
#pragma unroll
        for (int r = 0; r < ROWS; ++r) acc[r] = fmaf(Element<T>::load(x + r * p.k + k), wk, acc[r]);
      }
    }
    const float bias = p.has_bias ? load<T>(p.bias, col) : 0.0f;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
      const float sum = warp_sum(acc[r]);
      if (lane == r) store<T>(p.y, (row0 + r) * p.cols + col, activate_as<T>(p.act, sum + bias));
    }
  }
  return unit;
}

/* Pair i (elements 2i and 2i + 1) of a row of 2-byte elements: one 4-byte load where x
 * and w are 4-byte aligned (so is every row, K being even), else two 2-byte loads. */
template <bool kAligned>
__device__ __forceinline__ uint32_t load_pair(const uint16_t* row, int64_t i) {
  if (kAligned) return reinterpret_cast<const uint32_t*>(row)[i];
  return (uint32_t)row[2 * i] | (uint32_t)row[2 * i + 1] << 16;
}

/* A block per 16 rows by 8 columns of y (EMBER_K_GEMV_MMA_ROWS x EMBER_K_GEMV_MMA_COLS),
 * its warps taking turns over K's steps of 16 with the m16n8k16 MMA and float32
 * accumulators, then adding their sums in shared memory. The fragments come straight
 * from x and w as pairs of elements (a row's pairs along K are 4 bytes apart): lane
 * (g, q) = (lane / 4, lane % 4) holds x rows g and g + 8 and w row (column of y) g, at
 * pairs q and q + 4 of each 16 of K. Rows and columns past the ends read the last one
 * (their sums are never stored), so the loop over whole steps has no branch and its
 * loads, plain ones, go out together; the last partial step reads zeros past K. Why the
 * warps split K: a warp per tile over all of K gave resnet18's classifier (64 x 512 x
 * 1000) 500 warps, 63 blocks, 32 dependent steps each: 12.4 us profiled on an H100. */
template <typename T, bool kAligned>
__device__ __forceinline__ void gemv_mma(const ember_k_gemv_params& p) {
  static_assert(EMBER_K_GEMV_MMA_ROWS == 16 && EMBER_K_GEMV_MMA_COLS == 8, "m16n8k16");
  __shared__ float partial[EMBER_K_BLOCK / 32][4][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t col_tiles = (p.cols + 7) / 8, tiles = (p.rows + 15) / 16 * col_tiles;
  const int64_t pairs = p.k / 2, whole = pairs / 8;
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.x);
  const uint16_t* w = reinterpret_cast<const uint16_t*>(p.w);
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t row0 = tile / col_tiles * 16 + g, col0 = tile % col_tiles * 8;
    const uint16_t* x0 = x + min(row0, p.rows - 1) * p.k;
    const uint16_t* x8 = x + min(row0 + 8, p.rows - 1) * p.k;
    const uint16_t* wc = w + min(col0 + g, p.cols - 1) * p.k;
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    /* The bounds are the warp's, not the lane's: mma.sync takes every lane. */
#pragma unroll 4
    for (int64_t step = warp; step < whole; step += warps) {
      const int64_t i = step * 8 + q;
      const uint32_t a[4] = {load_pair<kAligned>(x0, i), load_pair<kAligned>(x8, i),
                             load_pair<kAligned>(x0, i + 4), load_pair<kAligned>(x8, i + 4)};
      Mma<T>::run(d, a, load_pair<kAligned>(wc, i), load_pair<kAligned>(wc, i + 4));
    }
    if (whole * 8 < pairs && warp == (int)(whole % warps)) {
      const int64_t i = whole * 8 + q;
      const bool lo = i < pairs, hi = i + 4 < pairs;
      const uint32_t a[4] = {lo ? load_pair<kAligned>(x0, i) : 0u,
                             lo ? load_pair<kAligned>(x8, i) : 0u,
                             hi ? load_pair<kAligned>(x0, i + 4) : 0u,
                             hi ? load_pair<kAligned>(x8, i + 4) : 0u};
      Mma<T>::run(d, a, lo ? load_pair<kAligned>(wc, i) : 0u,
                  hi ? load_pair<kAligned>(wc, i + 4) : 0u);
    }
    __syncthreads(); /* partial is free again (warp 0 has read the previous tile's) */
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp][e][lane] = d[e];
    __syncthreads();
    if (warp != 0) continue;
    /* d[e]: row g (+8 for e >= 2), column 2q + e % 2 of the tile. */
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float sum = partial[0][e][lane];
      for (int v = 1; v < warps; ++v) sum += partial[v][e][lane];
      const int64_t r = row0 + (e >= 2 ? 8 : 0), c = col0 + 2 * q + (e & 1);
      if (r >= p.rows || c >= p.cols) continue;
      const float bias = p.has_bias ? load<T>(p.bias, c) : 0.0f;
      store<T>(p.y, r * p.cols + c, activate_as<T>(p.act, sum + bias));
    }
  }
}

template <typename T>
__device__ void gemv_mma_entry(const ember_k_gemv_params& p) {
  if (((p.x | p.w) & 3u) == 0) {
    gemv_mma<T, true>(p);
  } else {
    gemv_mma<T, false>(p);
  }
}

/* Rows as a template argument keep the accumulators in registers: the whole groups first,
 * then the last group's remaining rows, each warp going on along its grid stride. */
template <typename T>
__device__ void gemv(const ember_k_gemv_params& p) {
  static_assert(EMBER_K_GEMV_GROUP_ROWS == 8, "one case per row count");
  /* Blocks are whole warps, so a warp's lanes share their unit and shuffle together. */
  const int64_t warps = global_stride() >> 5;
  const int64_t whole = p.rows / EMBER_K_GEMV_GROUP_ROWS * p.cols;
  const int64_t end = whole + (p.rows % EMBER_K_GEMV_GROUP_ROWS != 0 ? p.cols : 0);
  const int64_t first = global_thread() >> 5;
  const int64_t unit = gemv_rows<T, EMBER_K_GEMV_GROUP_ROWS>(p, first, whole, warps);
  switch (p.rows % EMBER_K_GEMV_GROUP_ROWS) {
    case 1: gemv_rows<T, 1>(p, unit, end, warps); break;
    case 2: gemv_rows<T, 2>(p, unit, end, warps); break;
    case 3: gemv_rows<T, 3>(p, unit, end, warps); break;
    case 4: gemv_rows<T, 4>(p, unit, end, warps); break;
    case 5: gemv_rows<T, 5>(p, unit, end, warps); break;
    case 6: gemv_rows<T, 6>(p, unit, end, warps); break;
    case 7: gemv_rows<T, 7>(p, unit, end, warps); break;
    default: break;
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_gemv, ember::gemv, ember_k_gemv_params)

/* The tensor-core form is its own kernel: in one with the grouped form it held that
 * form's 106-111 registers a thread, 2 blocks an SM. */
EMBER_K_FOR_EACH_HALF(ember_gemv_mma, ember::gemv_mma_entry, ember_k_gemv_params)
