/* CONV2D as an implicit GEMM on tensor cores (float16 and bfloat16), NCHW in and out.
 *
 * Two kernels per conv. ember_nhwc_pack_2 copies x into [N, H, W, Cp] (channels last,
 * padded with zeros to Cp, a multiple of 8), so that 8 channels of one pixel are 16
 * contiguous bytes. Then ember_conv_igemm_<dtype> computes D[o, p] = sum_k W[o, k] · X[k, p]
 * for output channels o, output positions p = (image, oh, ow) and k = (kh, kw, c): X is
 * never written to memory (im2col wrote KH·KW times the input, and was half of resnet18's
 * time at batch 64); each block gathers its tiles of X from the packed input with 16-byte
 * cp.async copies (zero-filled where the window leaves the image) while the tensor cores
 * work on earlier ones. W's layout is written once, at prepare, by
 * ember_conv_igemm_weights_3 from the conv's weights among the uploaded constants. A
 * stride-2 conv of at most 4 channels (resnet's stem) reads its input from
 * ember_space_to_depth_pack instead, as a stride-1 conv of about a quarter of the taps
 * (kernel_params.h ember_k_space_to_depth_params).
 *
 * A block of 256 threads computes a [BM, BN] tile of D (BM 64 or 128 channels, BN 128
 * positions) with mma.sync m16n8k16 and float32 accumulation; its 8 warps are 2
 * (channels) x 4 (positions), each a [BM/2, 32] tile. K goes BK = 64 at a time through a
 * ring of 3 shared-memory stages (dynamic shared memory, EMBER_K_CONV_IGEMM_SMEM_BYTES:
 * with 32 at a time and 2 stages, what 48 KB of static memory holds, the copies' latency
 * was not hidden and the kernel ran at a third of this speed on the H200). Both
 * tiles are stored k-contiguous ([BM][BK] of W, [BN][BK] of X), which is what ldmatrix
 * hands to mma as its row-major A and column-major B; rows are padded by 8 elements
 * (144 bytes apart), so the 8 rows an ldmatrix reads fall in distinct banks.
 *
 * A thread copies, per K tile, the same 8-channel chunk (tid % 8) of four positions
 * (tid / 8 + 32 j) and two or four chunks of W. Where chunk kc of K sits relative to a
 * position's first pixel comes from the host's table (one entry per chunk: element
 * offset, row and column offsets), so the loop does no divisions.
 *
 * The epilogue adds the bias (the augmented weights' column k_taps), rounds to the dtype
 * into shared memory, then writes y 8 positions of one channel at a time: with 16-byte
 * accesses where the 8 are in one image and aligned, adding the residual and the ReLU
 * there (so y rounds twice when a residual is fused, as the unfused CONV2D then ADD).
 *
 * A conv with too few tiles for this kernel may run on cuBLASLt with the same weights and
 * layouts instead: ember_im2col_nhwc_2 writes its col from the channels-last input. */
#include "conv_igemm_tile.cuh"

namespace ember {

constexpr int kIgemmStride = kIgemmBK + 8; /* elements between rows of a W or X tile */
constexpr int kIgemmStages = EMBER_K_CONV_IGEMM_STAGES;
static_assert(EMBER_K_CONV_IGEMM_SMEM_BYTES(128) ==
                  kIgemmStages * (128 + kIgemmBN) * kIgemmStride * 2, "the host's size");
static_assert(128 * kIgemmOutStride * 2 <= EMBER_K_CONV_IGEMM_SMEM_BYTES(64) &&
                  kIgemmBN * (128 + 8) * 2 <= EMBER_K_CONV_IGEMM_SMEM_BYTES(64),
              "the epilogue tile fits, in either layout");

template <typename T, int BM, int STAGES>
__device__ __forceinline__ void conv_igemm(const ember_k_conv_igemm_params& p, uint16_t* smem) {
  constexpr int kPositions = kIgemmBN / kIgemmRowsPerPass; /* of X's tile, per thread */
  constexpr int kMTiles = BM / 32; /* m16 tiles of a warp's BM / 2 channels */
  constexpr int kNTiles = 4;       /* n8 tiles of its 32 positions */
  constexpr int kStageElems = (BM + kIgemmBN) * kIgemmStride;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp >> 2, warp_n = warp & 3;
  const int o0 = (int)(blockIdx.x % (uint32_t)p.o_tiles) * BM;
  const int p0 = (int)(blockIdx.x / (uint32_t)p.o_tiles) * kIgemmBN;
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.x);
  const uint16_t* w = reinterpret_cast<const uint16_t*>(p.w);
  const int2* table = reinterpret_cast<const int2*>(p.table);

  /* This thread's positions of X's tile (rows tid / chunks + rows-per-pass · j) and its
   * chunk. */
  const int chunk = tid % kIgemmChunks, first_row = tid / kIgemmChunks;
  const ConvWindows<kPositions> windows(p, p0, first_row);

  auto load_tile = [&](int stage, int kt) {
    uint16_t* a_tile = smem + stage * kStageElems;
    uint16_t* b_tile = a_tile + BM * kIgemmStride;
#pragma unroll
    for (int c = tid; c < BM * kIgemmChunks; c += EMBER_K_BLOCK) {
      const int row = c / kIgemmChunks, col = (c % kIgemmChunks) * 8;
      const int o = o0 + row, k = kt * kIgemmBK + col;
      const bool valid = o < p.o && k < p.k_stride;
      cp_async16(shared_address(a_tile + row * kIgemmStride + col),
                   valid ? w + (int64_t)o * p.k_stride + k : w, valid);
    }
    const int2 tap = __ldg(&table[kt * kIgemmChunks + chunk]);
#pragma unroll
    for (int j = 0; j < kPositions; ++j) {
      bool inside;
      const uint16_t* src = windows.source(p, x, j, tap, &inside);
      cp_async16(shared_address(b_tile + (first_row + kIgemmRowsPerPass * j) * kIgemmStride + chunk * 8),
                 src, inside);
    }
  };

  float acc[kMTiles][kNTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
    }
  }

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < p.k_tiles) load_tile(s, s);
    cp_async_commit(); /* empty groups keep the count uniform */
  }
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    cp_async_wait<STAGES - 2>(); /* tile kt has landed (this thread's copies) */
    __syncthreads();               /* everyone's, and the stage refilled below is free */
    const int next = kt + STAGES - 1;
    if (next < p.k_tiles) load_tile(next % STAGES, next);
    cp_async_commit();
    const uint16_t* a_tile = smem + (kt % STAGES) * kStageElems;
    const uint16_t* b_tile = a_tile + BM * kIgemmStride;
#pragma unroll
    for (int kk = 0; kk < kIgemmBK; kk += 16) {
      uint32_t a_frag[kMTiles][4], b_frag[kNTiles][2];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        /* Matrices: rows +0 / +8 of the m16 tile (lane bit 3), columns kk + 0 / 8 (bit 4):
         * a0a1, a2a3, a4a5, a6a7. */
        const int row = warp_m * (BM / 2) + mt * 16 + (lane & 15);
        ldmatrix_x4(a_frag[mt], shared_address(a_tile + row * kIgemmStride + kk + (lane >> 4) * 8));
      }
#pragma unroll
      for (int q = 0; q < kNTiles / 2; ++q) {
        /* Matrices: columns kk + 0 / 8 (lane bit 3) of positions +0 / +8 (bit 4): b0b1 and
         * b2b3 of n8 tile 2q, then of 2q + 1. */
        uint32_t r[4];
        const int row = warp_n * 32 + q * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(r, shared_address(b_tile + row * kIgemmStride + kk + ((lane >> 3) & 1) * 8));
        b_frag[2 * q][0] = r[0];
        b_frag[2 * q][1] = r[1];
        b_frag[2 * q + 1][0] = r[2];
        b_frag[2 * q + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) Mma<T>::run(acc[mt][nt], a_frag[mt], b_frag[nt][0], b_frag[nt][1]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads(); /* the ring is free for the epilogue's tile */

  /* Accumulator e of tile (mt, nt): channel row lane / 4 (+8 for e >= 2), position column
   * 2·(lane % 4) + e % 2. */
  const ConvOutTile out_tile(p, smem, BM);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_m * (BM / 2) + mt * 16 + (lane >> 2) + 8 * half;
      const float bias = conv_bias<T>(p, o0 + row);
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const int col = warp_n * 32 + nt * 8 + 2 * (lane & 3);
        out_tile.put<T>(row, col, acc[mt][nt][2 * half] + bias);
        out_tile.put<T>(row, col + 1, acc[mt][nt][2 * half + 1] + bias);
      }
    }
  }
  __syncthreads();
  store_conv_tile<T>(p, out_tile, BM, o0, p0);
}

template <typename T>
__device__ __forceinline__ void conv_igemm_entry(const ember_k_conv_igemm_params& p) {
  extern __shared__ __align__(16) uint16_t smem[]; /* EMBER_K_CONV_IGEMM_SMEM_BYTES(BM) */
  if (p.o <= 64) {
    conv_igemm<T, 64, kIgemmStages>(p, smem);
  } else {
    conv_igemm<T, 128, kIgemmStages>(p, smem);
  }
}

/* x [N, C, H·W] -> y [N, H·W, cp] with channels c..cp-1 zero, through shared memory a
 * tile of 64 pixels x 64 channels of one image at a time: the loads read 64 pixels of one
 * channel (contiguous), the stores write 16 bytes of 8 channels of one pixel, which for
 * a tile that holds all of cp is one contiguous run (16-byte stores to scattered pixels
 * ran at a quarter of the bandwidth on the H200: each left half a sector to merge). */
__device__ __forceinline__ void nhwc_pack(const ember_k_nhwc_pack_params& p) {
  __shared__ uint16_t tile[64][66]; /* [channel][pixel]; 33 words a row, so columns read freely */
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.x);
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const uint32_t hw = (uint32_t)p.hw, c_count = (uint32_t)p.c, cp = (uint32_t)p.cp;
  const uint32_t pixel_tiles = (hw + 63u) / 64u, channel_tiles = (cp + 63u) / 64u;
  const uint32_t tiles = (uint32_t)p.n * pixel_tiles * channel_tiles;
  for (uint32_t b = blockIdx.x; b < tiles; b += gridDim.x) {
    const uint32_t ct = b % channel_tiles, pt = (b / channel_tiles) % pixel_tiles;
    const uint32_t n = b / (channel_tiles * pixel_tiles);
    const uint32_t c0 = ct * 64u, q0 = pt * 64u;
    const uint32_t rows = cp - c0 < 64u ? cp - c0 : 64u; /* channels of this tile */
    __syncthreads(); /* the previous tile is written out */
    for (uint32_t i = threadIdx.x; i < 64u * rows; i += EMBER_K_BLOCK) {
      const uint32_t c = c0 + i / 64u, q = q0 + i % 64u;
      tile[i / 64u][i % 64u] = c < c_count && q < hw ? x[(n * c_count + c) * hw + q] : (uint16_t)0;
    }
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < 8u * rows; i += EMBER_K_BLOCK) {
      const uint32_t px = i / (rows / 8u), g = i % (rows / 8u), q = q0 + px, c = c0 + g * 8u;
      if (q >= hw) continue;
      uint16_t v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = tile[g * 8u + (uint32_t)e][px];
      uint4 out;
      out.x = v[0] | (uint32_t)v[1] << 16;
      out.y = v[2] | (uint32_t)v[3] << 16;
      out.z = v[4] | (uint32_t)v[5] << 16;
      out.w = v[6] | (uint32_t)v[7] << 16;
      *reinterpret_cast<uint4*>(y + (size_t)(n * hw + q) * cp + c) = out;
    }
  }
}

/* The implicit GEMM's weights from the conv's own, once at prepare: a thread per element
 * of out, consecutive threads along a row, so the stores are contiguous; the loads of a
 * row stay within one output channel's weights. */
__device__ __forceinline__ void conv_igemm_weights(const ember_k_conv_igemm_weights_params& p) {
  const uint16_t* w = reinterpret_cast<const uint16_t*>(p.w);
  const uint16_t* bias = reinterpret_cast<const uint16_t*>(p.bias);
  uint16_t* out = reinterpret_cast<uint16_t*>(p.out);
  const uint32_t k_stride = (uint32_t)p.k_stride, cp = (uint32_t)p.cp, fold = (uint32_t)p.fold;
  const uint32_t c_count = (uint32_t)p.c, kh = (uint32_t)p.kh, kw = (uint32_t)p.kw;
  const uint32_t taps_w = (kw + fold - 1u) / fold; /* the folded kernel's columns */
  const uint32_t k_taps = (kh + fold - 1u) / fold * taps_w * cp;
  for (uint32_t i = global_thread32(); i < (uint32_t)p.elements; i += global_stride32()) {
    const uint32_t o = i / k_stride, k = i - o * k_stride;
    uint16_t v = 0;
    if (k < k_taps) {
      const uint32_t t = k / cp, channel = k - t * cp;
      const uint32_t phase = channel / c_count, c = channel - phase * c_count; /* (b, b'), ch */
      const uint32_t r = t / taps_w * fold + phase / fold, s = t % taps_w * fold + phase % fold;
      if (phase < fold * fold && r < kh && s < kw) v = w[((o * c_count + c) * kh + r) * kw + s];
    } else if (k == k_taps && bias != nullptr) {
      v = bias[o];
    }
    out[i] = v;
  }
}

/* y = x folded space-to-depth (kernel_params.h ember_k_space_to_depth_params): a thread
 * per 16 bytes of y, consecutive threads along a pixel's channels, then along a row, so
 * the stores are contiguous and a warp's loads of one (ch, b, b') read neighbouring
 * columns of one row of x. */
__device__ __forceinline__ void space_to_depth_chunks(const ember_k_space_to_depth_params& p) {
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.x);
  uint4* y = reinterpret_cast<uint4*>(p.y);
  const uint32_t per_pixel = (uint32_t)p.cp / 8u, c_count = (uint32_t)p.c;
  const uint32_t hs = (uint32_t)p.hs, ws = (uint32_t)p.ws, h = (uint32_t)p.h, w = (uint32_t)p.w;
  for (uint32_t i = global_thread32(); i < (uint32_t)p.chunks; i += global_stride32()) {
    const uint32_t chunk = i % per_pixel, pixel = i / per_pixel;
    const uint32_t v = pixel % ws, rows = pixel / ws, u = rows % hs, n = rows / hs;
    uint32_t bits[8];
#pragma unroll
    for (uint32_t e = 0; e < 8u; ++e) {
      const uint32_t channel = chunk * 8u + e, phase = channel / c_count;
      const uint32_t c = channel - phase * c_count;
      /* Unsigned: a row or column above or left of x wraps past its end. */
      const uint32_t r = 2u * u + phase / 2u - (uint32_t)p.pad_h;
      const uint32_t s = 2u * v + phase % 2u - (uint32_t)p.pad_w;
      bits[e] = phase < 4u && r < h && s < w ? x[((n * c_count + c) * h + r) * w + s] : 0u;
    }
    y[i] = make_uint4(bits[0] | bits[1] << 16, bits[2] | bits[3] << 16, bits[4] | bits[5] << 16,
                      bits[6] | bits[7] << 16);
  }
}

/* space_to_depth_chunks for C input channels and CP packed ones known at compile time
 * (resnet's stem: 3 and 16), a block per U = p.shared_rows rows (u0 to u0 + U - 1 of image
 * n) of y at a time: the 2·U rows of each channel of x they read (from 2·u0 - pad_h; zeros
 * outside x), consecutive in x, are copied into shared memory (the host gave the block
 * 4·U·C·w bytes of it), 16 bytes a thread where w keeps them aligned, then a thread per 16
 * bytes of y's rows gathers them. Every load and store is coalesced, and each element's
 * phase and channel are constants. Why: a thread per pixel loading its 12 elements 2
 * bytes at a time straight from x moved resnet18's 46 MB at batch 64 in 25.3 us on an
 * H100 (1.8 TB/s); this form took 1.5-2.4 us off the stem's plan there
 * (bench_resnet_stem_b64_f16). */
template <uint32_t C, uint32_t CP>
__device__ __forceinline__ void space_to_depth_rows(const ember_k_space_to_depth_params& p) {
  extern __shared__ __align__(16) uint16_t rows[]; /* [C][2·U][w] */
  const uint16_t* x = reinterpret_cast<const uint16_t*>(p.x);
  uint4* y = reinterpret_cast<uint4*>(p.y);
  const uint32_t hs = (uint32_t)p.hs, ws = (uint32_t)p.ws, h = (uint32_t)p.h, w = (uint32_t)p.w;
  const uint32_t U = (uint32_t)p.shared_rows, lines = 2u * U; /* input rows a channel */
  constexpr uint32_t kPerPixel = CP / 8u;
  const uint32_t row_chunks = ws * kPerPixel, images = (uint32_t)p.chunks / (hs * row_chunks);
  const uint32_t groups = (hs + U - 1u) / U; /* a block's turns an image */
  const bool vectors = (w & 7u) == 0u && (p.x & 15u) == 0u;
  for (uint32_t turn = blockIdx.x; turn < groups * images; turn += gridDim.x) {
    const uint32_t n = turn / groups, u0 = (turn - n * groups) * U;
    /* Unsigned: a row above x wraps past its end. */
    const uint32_t r0 = 2u * u0 - (uint32_t)p.pad_h;
    if (vectors) {
      const uint32_t per_channel = lines * w / 8u, per_line = w / 8u;
      for (uint32_t i = threadIdx.x; i < C * per_channel; i += blockDim.x) {
        const uint32_t c = i / per_channel, k = i - c * per_channel;
        const uint32_t r = r0 + k / per_line;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r < h) {
          v = reinterpret_cast<const uint4*>(x + ((n * C + c) * h + r) * w)[k % per_line];
        }
        reinterpret_cast<uint4*>(rows)[i] = v;
      }
    } else {
      const uint32_t per_channel = lines * w;
      for (uint32_t i = threadIdx.x; i < C * per_channel; i += blockDim.x) {
        const uint32_t c = i / per_channel, k = i - c * per_channel;
        const uint32_t r = r0 + k / w;
        rows[i] = r < h ? x[((n * C + c) * h + r) * w + k % w] : (uint16_t)0u;
      }
    }
    __syncthreads();
    const uint32_t out_rows = min(U, hs - u0);
    uint4* out = y + (n * hs + u0) * row_chunks;
    for (uint32_t i = threadIdx.x; i < out_rows * row_chunks; i += blockDim.x) {
      const uint32_t uu = i / row_chunks, q = i - uu * row_chunks;
      const uint32_t v = q / kPerPixel, chunk = q % kPerPixel;
      const uint16_t* line = rows + 2u * uu * w; /* channel 0's row 2·uu, b = 0 */
      uint32_t bits[8];
#pragma unroll
      for (uint32_t e = 0; e < 8u; ++e) {
        bits[e] = 0u;
#pragma unroll
        for (uint32_t k = 0; k < kPerPixel; ++k) {
          const uint32_t channel = 8u * k + e, phase = channel / C, c = channel % C;
          /* Unsigned: a column left of x wraps past its end. */
          const uint32_t s = 2u * v + phase % 2u - (uint32_t)p.pad_w;
          if (chunk == k && phase < 4u && s < w) {
            bits[e] = line[(c * lines + phase / 2u) * w + s];
          }
        }
      }
      out[i] = make_uint4(bits[0] | bits[1] << 16, bits[2] | bits[3] << 16,
                          bits[4] | bits[5] << 16, bits[6] | bits[7] << 16);
    }
    __syncthreads(); /* every row read before the next turn's copies */
  }
}

/* The row form for an image's channels (1, grey; 3, RGB) where the host gave it its
 * shared memory, the chunk form otherwise. */
__device__ __forceinline__ void space_to_depth(const ember_k_space_to_depth_params& p) {
  if (p.shared_rows && p.c == 3 && p.cp == 16) {
    space_to_depth_rows<3, 16>(p);
  } else if (p.shared_rows && p.c == 1 && p.cp == 8) {
    space_to_depth_rows<1, 8>(p);
  } else {
    space_to_depth_chunks(p);
  }
}

/* col[p][k] for the GEMM that writes a conv's output channels last (kernel_params.h
 * ember_k_im2col_nhwc_params): a thread per 16 bytes of col, consecutive threads along a
 * row, so the stores are contiguous and the loads of one tap read 8 channels after 8. */
__device__ __forceinline__ void im2col_nhwc(const ember_k_im2col_nhwc_params& p) {
  const uint4* x = reinterpret_cast<const uint4*>(p.x);
  uint4* col = reinterpret_cast<uint4*>(p.col);
  const uint32_t c_vectors = (uint32_t)p.c / 8u;
  for (uint32_t v = global_thread32(); v < (uint32_t)p.vectors; v += global_stride32()) {
    const uint32_t pos = fast_div(v, p.div_mul[EMBER_K_IM2COL_NHWC_DIV_ROW],
                                  p.div_shift[EMBER_K_IM2COL_NHWC_DIV_ROW]);
    const uint32_t q = v - pos * (uint32_t)p.row_vectors;
    uint4 out = make_uint4(0u, 0u, 0u, 0u);
    if (q == (uint32_t)p.tap_vectors) {
      out.x = p.one_bits; /* the bias column: 1, then 7 zeros */
    } else {
      const uint32_t tap = fast_div(q, p.div_mul[EMBER_K_IM2COL_NHWC_DIV_CHANNELS],
                                    p.div_shift[EMBER_K_IM2COL_NHWC_DIV_CHANNELS]);
      const uint32_t cv = q - tap * c_vectors;
      const uint32_t ki = fast_div(tap, p.div_mul[EMBER_K_IM2COL_NHWC_DIV_KW],
                                   p.div_shift[EMBER_K_IM2COL_NHWC_DIV_KW]);
      const uint32_t kj = tap - ki * (uint32_t)p.kw;
      const uint32_t image = fast_div(pos, p.div_mul[EMBER_K_IM2COL_NHWC_DIV_POSITIONS],
                                      p.div_shift[EMBER_K_IM2COL_NHWC_DIV_POSITIONS]);
      const uint32_t rem = pos - image * (uint32_t)p.image_positions;
      const uint32_t oi = fast_div(rem, p.div_mul[EMBER_K_IM2COL_NHWC_DIV_OW],
                                   p.div_shift[EMBER_K_IM2COL_NHWC_DIV_OW]);
      const uint32_t oj = rem - oi * (uint32_t)p.ow;
      const int32_t ih = (int32_t)oi * p.stride_h - p.pad_h + (int32_t)ki * p.dilation_h;
      const int32_t iw = (int32_t)oj * p.stride_w - p.pad_w + (int32_t)kj * p.dilation_w;
      if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) {
        out = x[(((int32_t)image * p.h + ih) * p.w + iw) * (int32_t)c_vectors + (int32_t)cv];
      }
    }
    col[v] = out;
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_HALF(ember_conv_igemm, ember::conv_igemm_entry, ember_k_conv_igemm_params)

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_nhwc_pack_2(const ember_k_nhwc_pack_params p) {
  ember::begin_after_previous_grid();
  ember::nhwc_pack(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_conv_igemm_weights_3(const ember_k_conv_igemm_weights_params p) {
  ember::begin_after_previous_grid();
  ember::conv_igemm_weights(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_space_to_depth_pack(const ember_k_space_to_depth_params p) {
  ember::begin_after_previous_grid();
  ember::space_to_depth(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_im2col_nhwc_2(const ember_k_im2col_nhwc_params p) {
  ember::begin_after_previous_grid();
  ember::im2col_nhwc(p);
}
