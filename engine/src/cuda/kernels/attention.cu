/* SDPA as one fused kernel: softmax(q kᵀ · scale + mask) v with an online softmax
 * (flash-attention style), so the [L, S] scores never exist in memory.
 *
 * One warp per query row; the warps of a block take neighbouring rows of one batch, so
 * they read the same keys and values through L1. The keys go 32 at a time, a lane per
 * key: each lane computes its key's score (the dot product over E), the warp takes the
 * chunk's maximum, rescales what it has accumulated, and adds p_j · v_j for the chunk,
 * each lane owning COLS output columns. Values wider than 32 · COLS columns take more
 * passes over the keys.
 *
 * Special values follow the CPU reference: a NaN or +inf score makes the row NaN (the CPU
 * computes exp(inf - inf)); a row whose keys are all masked (or S = 0) is zeros. */
#include "kernel_common.cuh"

namespace ember {

constexpr int kSdpaCols = 4;

template <typename T>
__device__ void sdpa(const ember_k_sdpa_params& p) {
  const unsigned full = 0xffffffffu;
  const float neg_inf = __int_as_float(0xff800000u), pos_inf = __int_as_float(0x7f800000u);
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t rows = p.batches * p.l;
  const uint8_t* bool_mask = reinterpret_cast<const uint8_t*>(p.mask);
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < rows;
       row += (int64_t)gridDim.x * warps) {
    const int64_t batch = row / p.l, i = row % p.l;
    const int64_t q_base = row * p.e, k_base = batch * p.s * p.e, v_base = batch * p.s * p.ev;
    int64_t mask_base = 0;
    if (p.mask_kind != 0) {
      int64_t rest = batch;
      for (int d = (int)p.batch_rank - 1; d >= 0; --d) {
        mask_base += (rest % p.batch_dims[d]) * p.mask_batch_strides[d];
        rest /= p.batch_dims[d];
      }
      mask_base += i * p.mask_row_stride;
    }
    const int64_t keys = p.is_causal ? (i + 1 < p.s ? i + 1 : p.s) : p.s;
    for (int64_t c0 = 0; c0 < p.ev; c0 += 32 * kSdpaCols) {
      float acc[kSdpaCols];
      for (int c = 0; c < kSdpaCols; ++c) acc[c] = 0.0f;
      float m = neg_inf, sum = 0.0f;
      bool bad = false;
      for (int64_t j0 = 0; j0 < keys; j0 += 32) {
        const int64_t j = j0 + lane;
        float score = neg_inf;
        if (j < keys) {
          float dot = 0.0f;
          for (int64_t t = 0; t < p.e; ++t) {
            dot += load<T>(p.q, q_base + t) * load<T>(p.k, k_base + j * p.e + t);
          }
          score = dot * p.scale;
          if (p.mask_kind == 1) {
            score += load<T>(p.mask, mask_base + j * p.mask_col_stride);
          } else if (p.mask_kind == 2 && bool_mask[mask_base + j * p.mask_col_stride] == 0) {
            score = neg_inf;
          }
        }
        const bool chunk_bad = __any_sync(full, isnan(score) || score == pos_inf);
        bad = bad || chunk_bad;
        const float m_new = fmaxf(m, warp_max(score));
        if (m_new == neg_inf) continue; /* every key so far is masked */
        const float correction = expf(m - m_new);
        const float pj = score == neg_inf || isnan(score) ? 0.0f : expf(score - m_new);
        sum = sum * correction + warp_sum(pj);
        for (int c = 0; c < kSdpaCols; ++c) acc[c] *= correction;
        const int n = keys - j0 < 32 ? (int)(keys - j0) : 32;
        for (int jj = 0; jj < n; ++jj) {
          const float pp = __shfl_sync(full, pj, jj);
          if (pp == 0.0f) continue;
          const int64_t v_row = v_base + (j0 + jj) * p.ev;
          for (int c = 0; c < kSdpaCols; ++c) {
            const int64_t col = c0 + lane + 32 * c;
            if (col < p.ev) acc[c] += pp * load<T>(p.v, v_row + col);
          }
        }
        m = m_new;
      }
      for (int c = 0; c < kSdpaCols; ++c) {
        const int64_t col = c0 + lane + 32 * c;
        if (col >= p.ev) continue;
        const float out = bad ? __int_as_float(0x7fc00000) : sum > 0.0f ? acc[c] / sum : 0.0f;
        store<T>(p.y, row * p.ev + col, out);
      }
    }
  }
}

/* The softmax of SDPA as two GEMMs (cuda_executor.c build_sdpa_gemm): one warp per
 * score row, three passes over it (maximum, sum, write), the same special values as the
 * fused kernel: a NaN or +inf score makes the row NaN, a row with no key past the masks
 * (or S = 0) is zeros. */
template <typename T>
__device__ void sdpa_softmax(const ember_k_sdpa_softmax_params& p) {
  const unsigned full = 0xffffffffu;
  const float neg_inf = __int_as_float(0xff800000u), pos_inf = __int_as_float(0x7f800000u);
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < p.rows;
       row += (int64_t)gridDim.x * warps) {
    const int64_t i = row % p.l;
    const int64_t keys = p.is_causal ? (i + 1 < p.s ? i + 1 : p.s) : p.s;
    const float* scores = reinterpret_cast<const float*>(p.scores) + row * p.s;
    float m = neg_inf;
    bool bad = false;
    for (int64_t j = lane; j < keys; j += 32) {
      const float score = scores[j] * p.scale;
      bad = bad || isnan(score) || score == pos_inf;
      m = fmaxf(m, score);
    }
    m = warp_max(m);
    bad = __any_sync(full, bad);
    float sum = 0.0f;
    if (m != neg_inf) {
      for (int64_t j = lane; j < keys; j += 32) {
        const float score = scores[j] * p.scale;
        sum += score == neg_inf ? 0.0f : expf(score - m);
      }
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float nan = __int_as_float(0x7fc00000);
    for (int64_t j = lane; j < p.s; j += 32) {
      float out = 0.0f;
      if (j < keys) {
        const float score = scores[j] * p.scale;
        out = bad ? nan : (m == neg_inf || score == neg_inf) ? 0.0f : expf(score - m) * inv;
      }
      store<T>(p.p, row * p.s + j, out);
    }
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_sdpa, ember::sdpa, ember_k_sdpa_params)
EMBER_K_FOR_EACH_DTYPE(ember_sdpa_softmax, ember::sdpa_softmax, ember_k_sdpa_softmax_params)
