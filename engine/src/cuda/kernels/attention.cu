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
#include "tensor_core.cuh"

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

/* ---- SDPA on tensor cores: FlashAttention-2 ----------------------------------------------
 *
 * ember_sdpa_flash_<f16, bf16> (cuda_executor.c build_sdpa_flash; kernel_params.h has the
 * parameters): softmax(q kᵀ · scale) v without a mask tensor (is_causal is fine), e == ev
 * of 64 or 128, as in FlashAttention-2 (Dao, 2023). A block of 4 warps takes 64 query rows
 * of one (batch, head), each warp 16 of them; the keys and values go through shared
 * memory 64 at a time. Per chunk a warp computes its scores S [16, 64] = Q·Kᵀ with
 * mma.m16n8k16 (float32 accumulation), updates each row's running maximum m and sum l
 * (the online softmax: what was accumulated is rescaled by exp(m_old - m_new)), and adds
 * P·V into its output accumulator O [16, e], P taken straight from the registers that
 * hold S (the mma's accumulator layout of S is the A operand layout of P, below). At the
 * end O / l is written through shared memory as 16-byte rows.
 *
 * Loads: cp.async of 16 bytes (every row starts 16-byte aligned: the host checks the
 * addresses and strides), rows past L or S filled with zeros, so a tail key's value row is
 * 0 (its probability is 0, and 0 · garbage could be NaN). Q and the first K chunk are
 * loaded up front; then per chunk: wait for K, start V, compute S, wait for V, start the
 * next K, softmax and P·V, so each load runs under the other half's math. Shared memory
 * holds one Q, one K and one V tile of [64, e] (24 KiB at e 64, 48 KiB at e 128), each row
 * of e / 8 16-byte pieces stored at piece (c XOR row % 8): the 8 rows one ldmatrix phase
 * reads (8 consecutive rows, one piece each) then fall in 8 different bank groups, where
 * unswizzled rows of 128 or 256 bytes would all hit the same 4 banks.
 *
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type", and
 * "ldmatrix"): lane = 4 g + t (g = groupID 0..7, t = threadID_in_group 0..3).
 *   A [16 x 16] row-major, 4 registers of 2 elements (lower column in the low half):
 *     a0 = (g, 2t..2t+1), a1 = (g + 8, 2t..), a2 = (g, 2t + 8..), a3 = (g + 8, 2t + 8..).
 *   B [16 (k) x 8 (n)], "col": b0 = (k 2t..2t+1, n g), b1 = (k 2t + 8.., n g).
 *   C/D [16 x 8] float: c0 = (g, 2t), c1 = (g, 2t + 1), c2 = (g + 8, 2t), c3 = (g + 8, 2t + 1).
 *   ldmatrix .x4: lanes 8i..8i + 7 give the row addresses of 8x8 matrix i; register i of
 *     every lane gets matrix i's (row g, columns 2t..2t+1); with .trans, (rows 2t..2t+1,
 *     column g), i.e. of the transposed matrix.
 * So: Q's A fragment is ldmatrix of Q rows 0..15 (lanes 0..15) at columns k0 and k0 + 8
 * (lanes 16..31). For S = Q·Kᵀ, B (k = e, n = key) holds K[key][e], which is K's rows as
 * stored: ldmatrix (no .trans) of 8 keys x 8 e gives b0, the next 8 e b1. For O = P·V,
 * B (k = key, n = e) holds V[key][e] with k running down V's rows: ldmatrix.trans of
 * 8 keys x 8 e gives b0, keys 8..15 b1. And the C fragments of S for keys 16kk..16kk + 7
 * (c0 c1 | c2 c3) and 16kk + 8..16kk + 15 are exactly a0 a1 and a2 a3 of P for the k-step
 * of keys 16kk..16kk + 15, so P never leaves the registers.
 *
 * Softmax in base 2: x = s · scale · log2(e), p = exp2(x - m). Special values as
 * ember_sdpa: a NaN or +inf x among a row's keys (NaN or inf scores, or a scale of 0 times
 * an infinite score) makes the row NaN; a row whose every score is -inf is zeros. Causal:
 * key j of query row i is masked when j > i (top-left, as the CPU: a row i >= S sees every
 * key). A masked or tail score is set to -inf, not computed on. */
namespace ember {
namespace flash {

constexpr int kWarps = EMBER_K_SDPA_FLASH_THREADS / 32;
constexpr int kRows = EMBER_K_SDPA_FLASH_ROWS; /* query rows a block, 16 a warp */
static_assert(kRows == 16 * kWarps, "the tile shapes the code below assumes");

/* Element offset of (row, 16-byte piece `piece`) in a [rows, E] tile, pieces swizzled. */
template <int E>
__device__ __forceinline__ uint32_t tile_offset(int row, int piece) {
  return (uint32_t)(row * E + ((piece ^ (row & 7)) << 3));
}

/* Rows [0, valid) of a [ROWS, E] tile from global rows `row_stride` elements apart (row 0
 * at src, which is always a valid row), rows past `valid` as zeros. Thread x takes piece
 * x % (E / 8) of rows x / (E / 8), + 128 / (E / 8), ...: a phase of 8 lanes writes the 8
 * pieces of one row, 8 bank groups. */
template <int E, int ROWS>
__device__ __forceinline__ void load_tile(uint32_t tile, const uint16_t* src, int64_t row_stride,
                                          int valid) {
  constexpr int kPieces = E / 8;
  constexpr int kRowStep = EMBER_K_SDPA_FLASH_THREADS / kPieces;
  static_assert(ROWS % kRowStep == 0, "every thread copies the same number of pieces");
  const int piece = (int)threadIdx.x % kPieces;
  const int row0 = (int)threadIdx.x / kPieces;
#pragma unroll
  for (int step = 0; step < ROWS / kRowStep; ++step) {
    const int r = row0 + step * kRowStep;
    const bool ok = r < valid;
    const uint16_t* from = ok ? src + r * row_stride + piece * 8 : src;
    cp_async16(tile + 2u * tile_offset<E>(r, piece), from, ok);
  }
}

template <typename T, int E>
__device__ void sdpa_flash(const ember_k_sdpa_flash_params& p, uint16_t* smem) {
  constexpr int kKeys = EMBER_K_SDPA_FLASH_KEYS(E); /* keys (and value rows) a chunk */
  constexpr int kSteps = E / 16;                    /* k-steps of Q·Kᵀ */
  constexpr int kOTiles = E / 8;                    /* n-tiles of O */
  constexpr int kSTiles = kKeys / 8;                /* n-tiles of S */
  const float neg_inf = __int_as_float(0xff800000u), pos_inf = __int_as_float(0x7f800000u);
  const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;

  /* Block -> (batch, head, query tile); the tiles of one (batch, head) are neighbours (they
   * share K and V in L2), the last tile first (with is_causal it has the most keys). */
  const int tiles = (p.l + kRows - 1) / kRows;
  const int tile = tiles - 1 - (int)(blockIdx.x % (unsigned)tiles);
  const int bh = (int)(blockIdx.x / (unsigned)tiles);
  const int64_t head = bh % p.heads, batch = bh / p.heads;
  const int q0 = tile * kRows;
  const uint16_t* q = reinterpret_cast<const uint16_t*>(p.q) + batch * p.q_strides[0] +
                      head * p.q_strides[1] + q0 * p.q_strides[2];
  const uint16_t* k = reinterpret_cast<const uint16_t*>(p.k) + batch * p.k_strides[0] +
                      head * p.k_strides[1];
  const uint16_t* v = reinterpret_cast<const uint16_t*>(p.v) + batch * p.v_strides[0] +
                      head * p.v_strides[1];
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y) + batch * p.y_strides[0] +
                head * p.y_strides[1] + q0 * p.y_strides[2];

  uint16_t* sq = smem;
  const uint32_t sq_addr = shared_address(sq);
  const uint32_t sk_addr = sq_addr + 2u * kRows * E, sv_addr = sk_addr + 2u * kKeys * E;

  const int rows_here = p.l - q0 < kRows ? p.l - q0 : kRows;
  const int last_row = q0 + rows_here - 1;
  const int key_end = p.is_causal && last_row + 1 < p.s ? last_row + 1 : p.s;
  const int chunks = (key_end + kKeys - 1) / kKeys;

  load_tile<E, kRows>(sq_addr, q, p.q_strides[2], rows_here);
  load_tile<E, kKeys>(sk_addr, k, p.k_strides[2], p.s < kKeys ? p.s : kKeys);
  cp_async_commit();

  /* This lane's two query rows: i0 (fragment rows g) and i1 (g + 8). */
  const int wr0 = q0 + 16 * warp;
  const int i0 = wr0 + g, i1 = i0 + 8;
  float o[kOTiles][4];
#pragma unroll
  for (int n = 0; n < kOTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = neg_inf, m1 = neg_inf, l0 = 0.0f, l1 = 0.0f;
  bool bad0 = false, bad1 = false;

  for (int c = 0; c < chunks; ++c) {
    const int k0 = c * kKeys;
    cp_async_wait_all();
    __syncthreads(); /* K[c] is in; every warp is done with V[c - 1] */
    load_tile<E, kKeys>(sv_addr, v + k0 * p.v_strides[2], p.v_strides[2],
                        p.s - k0 < kKeys ? p.s - k0 : kKeys);
    cp_async_commit();
    /* A warp whose rows are all past L, or (causal) before every key of the chunk, has
     * nothing to add (warp-uniform, so the .sync.aligned instructions stay whole-warp). */
    const bool active = wr0 < p.l && !(p.is_causal && k0 > wr0 + 15);
    float s[kSTiles][4];
    if (active) {
#pragma unroll
      for (int n = 0; n < kSTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        uint32_t a[4];
        ldmatrix_x4(a,
                    sq_addr + 2u * tile_offset<E>(16 * warp + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
        for (int n2 = 0; n2 < kSTiles / 2; ++n2) {
          /* Matrices: keys 16 n2 + 0..7 at e 16 kk + 0..7 (b0 of n-tile 2 n2) and
           * + 8..15 (b1), keys 16 n2 + 8..15 likewise (n-tile 2 n2 + 1). */
          uint32_t b[4];
          ldmatrix_x4(b, sk_addr + 2u * tile_offset<E>(16 * n2 + (lane & 7) + ((lane >> 4) << 3),
                                                       2 * kk + ((lane >> 3) & 1)));
          Mma<T>::run(s[2 * n2], a, b[0], b[1]);
          Mma<T>::run(s[2 * n2 + 1], a, b[2], b[3]);
        }
      }
    }
    cp_async_wait_all();
    __syncthreads(); /* V[c] is in; every warp is done with K[c] */
    if (c + 1 < chunks) {
      const int next = k0 + kKeys;
      load_tile<E, kKeys>(sk_addr, k + next * p.k_strides[2], p.k_strides[2],
                          p.s - next < kKeys ? p.s - next : kKeys);
      cp_async_commit();
    }
    if (!active) continue;

    /* Scores in base 2, masked; each row's maximum over the chunk (a row's scores are
     * spread over the 4 lanes of a quad: g is shared, t differs). */
    const bool masking = k0 + kKeys > p.s || (p.is_causal && k0 + kKeys - 1 > wr0);
    float mx0 = neg_inf, mx1 = neg_inf;
#pragma unroll
    for (int n = 0; n < kSTiles; ++n) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int j = k0 + 8 * n + 2 * t + (r & 1);
        const int i = r < 2 ? i0 : i1;
        float x = s[n][r] * p.scale_log2;
        if (masking && (j >= p.s || (p.is_causal && j > i))) {
          x = neg_inf;
        } else if (isnan(x) || x == pos_inf) {
          (r < 2 ? bad0 : bad1) = true;
        }
        s[n][r] = x;
        float& mx = r < 2 ? mx0 : mx1;
        mx = fmaxf(mx, x);
      }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float new0 = fmaxf(m0, mx0), new1 = fmaxf(m1, mx1);
    /* While every score so far is -inf, subtract 0: exp2(-inf - 0) = 0, not NaN. */
    const float use0 = new0 == neg_inf ? 0.0f : new0, use1 = new1 == neg_inf ? 0.0f : new1;
    const float alpha0 = exp2f(m0 - use0), alpha1 = exp2f(m1 - use1);
    m0 = new0;
    m1 = new1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int n = 0; n < kSTiles; ++n) {
      s[n][0] = exp2f(s[n][0] - use0);
      s[n][1] = exp2f(s[n][1] - use0);
      s[n][2] = exp2f(s[n][2] - use1);
      s[n][3] = exp2f(s[n][3] - use1);
      sum0 += s[n][0] + s[n][1];
      sum1 += s[n][2] + s[n][3];
    }
    l0 = l0 * alpha0 + sum0; /* this lane's part of the row sum; the quad adds up at the end */
    l1 = l1 * alpha1 + sum1;
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) {
      o[n][0] *= alpha0;
      o[n][1] *= alpha0;
      o[n][2] *= alpha1;
      o[n][3] *= alpha1;
    }

    /* O += P·V, one k-step per 16 keys. */
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      const uint32_t a[4] = {Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]),
                             Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]),
                             Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n2 = 0; n2 < E / 16; ++n2) {
        /* Matrices (transposed): keys 16 kk + 0..7 at e 16 n2 + 0..7 (b0 of n-tile 2 n2),
         * keys + 8..15 (b1), then the same at e 16 n2 + 8..15 (n-tile 2 n2 + 1). */
        uint32_t b[4];
        ldmatrix_x4_trans(b, sv_addr + 2u * tile_offset<E>(16 * kk + (lane & 7) + (lane & 8),
                                                           2 * n2 + (lane >> 4)));
        Mma<T>::run(o[2 * n2], a, b[0], b[1]);
        Mma<T>::run(o[2 * n2 + 1], a, b[2], b[3]);
      }
    }
  }
  if (wr0 >= p.l) return; /* no barrier follows */

  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  int bad = (bad0 ? 1 : 0) | (bad1 ? 2 : 0);
  bad |= __shfl_xor_sync(0xffffffffu, bad, 1);
  bad |= __shfl_xor_sync(0xffffffffu, bad, 2);
  const float nan = __int_as_float(0x7fc00000);
  /* A row without a key past the masks (every score -inf) has l = 0 and O = 0: zeros. */
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;

  /* The warp's 16 rows of O, rounded, into its own 16 rows of the Q tile (only this warp
   * read them), then out as 16-byte pieces. */
  __syncwarp();
#pragma unroll
  for (int n = 0; n < kOTiles; ++n) {
    const uint32_t top = (bad & 1) ? Mma<T>::pack(nan, nan)
                                   : Mma<T>::pack(o[n][0] * inv0, o[n][1] * inv0);
    const uint32_t bottom = (bad & 2) ? Mma<T>::pack(nan, nan)
                                      : Mma<T>::pack(o[n][2] * inv1, o[n][3] * inv1);
    *reinterpret_cast<uint32_t*>(sq + tile_offset<E>(16 * warp + g, n) + 2 * t) = top;
    *reinterpret_cast<uint32_t*>(sq + tile_offset<E>(16 * warp + g + 8, n) + 2 * t) = bottom;
  }
  __syncwarp();
  constexpr int kPieces = E / 8;
#pragma unroll
  for (int step = 0; step < 16 * kPieces / 32; ++step) {
    const int r = (lane + 32 * step) / kPieces, piece = lane % kPieces;
    if (wr0 + r < p.l) {
      const uint4 value =
          *reinterpret_cast<const uint4*>(sq + tile_offset<E>(16 * warp + r, piece));
      *reinterpret_cast<uint4*>(y + (16 * warp + r) * p.y_strides[2] + piece * 8) = value;
    }
  }
}

}  // namespace flash
}  // namespace ember

/* Dynamic shared memory of the flash kernels: EMBER_K_SDPA_FLASH_SMEM_BYTES(e). */
extern __shared__ uint4 ember_sdpa_flash_smem[];

/* 4 blocks an SM: the registers of e 128 (64 accumulators of O, 16 of S) then fit in
 * 128 a thread without spilling (ptxas -v), and 4 x 24 KiB of shared memory at e 64. */
#define EMBER_SDPA_FLASH_BOUNDS __launch_bounds__(EMBER_K_SDPA_FLASH_THREADS, 4)

namespace ember {
namespace flash {
/* The entry points' body: the head dim picks the instantiation. */
template <typename T>
__device__ __forceinline__ void sdpa_flash_entry(const ember_k_sdpa_flash_params& p) {
  uint16_t* smem = reinterpret_cast<uint16_t*>(ember_sdpa_flash_smem);
  if (p.e == 128) {
    sdpa_flash<T, 128>(p, smem);
  } else {
    sdpa_flash<T, 64>(p, smem);
  }
}
}  // namespace flash
}  // namespace ember

extern "C" __global__ void EMBER_SDPA_FLASH_BOUNDS
    ember_sdpa_flash_f16(const ember_k_sdpa_flash_params p) {
  ember::begin_after_previous_grid();
  ember::flash::sdpa_flash_entry<__half>(p);
}

extern "C" __global__ void EMBER_SDPA_FLASH_BOUNDS
    ember_sdpa_flash_bf16(const ember_k_sdpa_flash_params p) {
  ember::begin_after_previous_grid();
  ember::flash::sdpa_flash_entry<__nv_bfloat16>(p);
}
