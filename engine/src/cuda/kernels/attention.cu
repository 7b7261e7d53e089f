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

/* The vector path of sdpa_softmax: each lane takes 4 consecutive scores at a time (one
 * float4 load; one 16-byte store of float32 or 8-byte store of float16/bfloat16, so a
 * warp writes 32 contiguous pieces even for rows of 128 keys), per score the same
 * formulas as the scalar path. These take the 4 scores of keys j0..j0 + 3. */
__device__ __forceinline__ void softmax4_max(float4 raw, float scale, int64_t j0, int64_t keys,
                                             float& m, bool& bad) {
  const float pos_inf = __int_as_float(0x7f800000u);
  const float v[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if (j0 + t < keys) {
      const float score = v[t] * scale;
      bad = bad || isnan(score) || score == pos_inf;
      m = fmaxf(m, score);
    }
  }
}

__device__ __forceinline__ float softmax4_sum(float4 raw, float scale, int64_t j0, int64_t keys,
                                              float m) {
  const float neg_inf = __int_as_float(0xff800000u);
  const float v[4] = {raw.x, raw.y, raw.z, raw.w};
  float sum = 0.0f;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if (j0 + t < keys) {
      const float score = v[t] * scale;
      sum += score == neg_inf ? 0.0f : expf(score - m);
    }
  }
  return sum;
}

/* Writes the 4 probabilities of keys j0..j0 + 3 as piece j0 / 4 of row_base. */
template <typename T>
__device__ __forceinline__ void softmax4_store(float4 raw, float scale, int64_t j0, int64_t keys,
                                               float m, float inv, bool bad, uint64_t row_base) {
  typedef typename Bits<T>::type B;
  const float neg_inf = __int_as_float(0xff800000u), nan = __int_as_float(0x7fc00000);
  const float v[4] = {raw.x, raw.y, raw.z, raw.w};
  B bits[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    float out = 0.0f;
    if (j0 + t < keys) {
      const float score = v[t] * scale;
      out = bad ? nan : (m == neg_inf || score == neg_inf) ? 0.0f : expf(score - m) * inv;
    }
    bits[t] = Bits<T>::from_float(out);
  }
  if (sizeof(B) == 4) {
    reinterpret_cast<uint4*>(row_base)[j0 / 4] = make_uint4(bits[0], bits[1], bits[2], bits[3]);
  } else {
    reinterpret_cast<uint2*>(row_base)[j0 / 4] =
        make_uint2((uint32_t)bits[0] | (uint32_t)bits[1] << 16,
                   (uint32_t)bits[2] | (uint32_t)bits[3] << 16);
  }
}

/* s a multiple of 4, scores 16-byte aligned, p aligned to 4 elements. The first
 * kSoftmaxCached pieces of each lane stay in registers between the three passes; the
 * rest of a long row is read again (from L1/L2). Pieces wholly past the keys are not
 * read. */
constexpr int kSoftmaxCached = 4;

template <typename T>
__device__ void sdpa_softmax_vectors(const ember_k_sdpa_softmax_params& p) {
  const unsigned full = 0xffffffffu;
  const float neg_inf = __int_as_float(0xff800000u);
  const int lane = threadIdx.x & 31;
  const int64_t warps = blockDim.x >> 5;
  const int64_t pieces = p.s / 4;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int64_t row = (int64_t)blockIdx.x * warps + (threadIdx.x >> 5); row < p.rows;
       row += (int64_t)gridDim.x * warps) {
    const int64_t i = row % p.l;
    const int64_t keys = p.is_causal ? (i + 1 < p.s ? i + 1 : p.s) : p.s;
    const int64_t key_pieces = (keys + 3) / 4;
    const float4* scores = reinterpret_cast<const float4*>(p.scores) + row * pieces;
    float4 cached[kSoftmaxCached];
    float m = neg_inf;
    bool bad = false;
#pragma unroll
    for (int k = 0; k < kSoftmaxCached; ++k) {
      const int64_t c = lane + 32 * k;
      cached[k] = c < key_pieces ? scores[c] : zero;
      if (c < key_pieces) softmax4_max(cached[k], p.scale, 4 * c, keys, m, bad);
    }
    for (int64_t c = lane + 32 * kSoftmaxCached; c < key_pieces; c += 32) {
      softmax4_max(scores[c], p.scale, 4 * c, keys, m, bad);
    }
    m = warp_max(m);
    bad = __any_sync(full, bad);
    float sum = 0.0f;
    if (m != neg_inf) {
#pragma unroll
      for (int k = 0; k < kSoftmaxCached; ++k) {
        const int64_t c = lane + 32 * k;
        if (c < key_pieces) sum += softmax4_sum(cached[k], p.scale, 4 * c, keys, m);
      }
      for (int64_t c = lane + 32 * kSoftmaxCached; c < key_pieces; c += 32) {
        sum += softmax4_sum(scores[c], p.scale, 4 * c, keys, m);
      }
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    const uint64_t row_base = p.p + (uint64_t)(row * p.s) * sizeof(T);
#pragma unroll
    for (int k = 0; k < kSoftmaxCached; ++k) {
      const int64_t c = lane + 32 * k;
      if (c < pieces) softmax4_store<T>(cached[k], p.scale, 4 * c, keys, m, inv, bad, row_base);
    }
    for (int64_t c = lane + 32 * kSoftmaxCached; c < pieces; c += 32) {
      softmax4_store<T>(c < key_pieces ? scores[c] : zero, p.scale, 4 * c, keys, m, inv, bad,
                        row_base);
    }
  }
}

/* The softmax of SDPA as two GEMMs (cuda_executor.c build_sdpa_gemm): one warp per
 * score row, three passes over it (maximum, sum, write), the same special values as the
 * fused kernel: a NaN or +inf score makes the row NaN, a row with no key past the masks
 * (or S = 0) is zeros. Rows that allow it take the vector path above; the rest one score
 * a lane at a time. */
template <typename T>
__device__ void sdpa_softmax(const ember_k_sdpa_softmax_params& p) {
  if (p.s % 4 == 0 && aligned16(p.scores) && (p.p & (4 * sizeof(T) - 1)) == 0) {
    sdpa_softmax_vectors<T>(p);
    return;
  }
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
