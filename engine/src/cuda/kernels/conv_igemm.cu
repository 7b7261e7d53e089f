/* CONV2D as an implicit GEMM on tensor cores (float16 and bfloat16), NCHW in and out.
 *
 * Two kernels per conv. ember_nhwc_pack_2 copies x into [N, H, W, Cp] (channels last,
 * padded with zeros to Cp, a multiple of 8), so that 8 channels of one pixel are 16
 * contiguous bytes. Then ember_conv_igemm_<dtype> computes D[o, p] = sum_k W[o, k] · X[k, p]
 * for output channels o, output positions p = (image, oh, ow) and k = (kh, kw, c): X is
 * never written to memory (im2col wrote KH·KW times the input, and was half of resnet18's
 * time at batch 64); each block gathers its tiles of X from the packed input with 16-byte
 * cp.async copies (zero-filled where the window leaves the image) while the tensor cores
 * work on earlier ones.
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
 * there (so y rounds twice when a residual is fused, as the unfused CONV2D then ADD). */
#include "tensor_core.cuh"

namespace ember {

constexpr int kIgemmBK = EMBER_K_CONV_IGEMM_BK;
constexpr int kIgemmBN = EMBER_K_CONV_IGEMM_BN;
constexpr int kIgemmStride = kIgemmBK + 8;   /* elements between rows of a W or X tile */
constexpr int kIgemmOutStride = kIgemmBN + 8; /* between rows of the epilogue's tile */
constexpr int kIgemmStages = EMBER_K_CONV_IGEMM_STAGES;
constexpr int kIgemmChunks = kIgemmBK / 8; /* 16-byte chunks of a tile row */
constexpr int kIgemmRowsPerPass = EMBER_K_BLOCK / kIgemmChunks;
static_assert(EMBER_K_CONV_IGEMM_SMEM_BYTES(128) ==
                  kIgemmStages * (128 + kIgemmBN) * kIgemmStride * 2, "the host's size");
static_assert(128 * kIgemmOutStride * 2 <= EMBER_K_CONV_IGEMM_SMEM_BYTES(64),
              "the epilogue tile fits");
static_assert(EMBER_K_BLOCK == 256, "the tile loops assume 256 threads");

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
  const int plane = p.oh * p.ow;

  /* This thread's positions of X's tile (rows tid / chunks + rows-per-pass · j) and its
   * chunk. */
  const int chunk = tid % kIgemmChunks, first_row = tid / kIgemmChunks;
  int base[kPositions], ih0[kPositions], iw0[kPositions];
#pragma unroll
  for (int j = 0; j < kPositions; ++j) {
    const int pos = p0 + first_row + kIgemmRowsPerPass * j;
    if (pos < p.positions) {
      const int n = (int)fast_div((uint32_t)pos, p.div_mul[0], p.div_shift[0]);
      const int r = pos - n * plane;
      const int oh = (int)fast_div((uint32_t)r, p.div_mul[1], p.div_shift[1]);
      const int ow = r - oh * p.ow;
      ih0[j] = oh * p.stride_h - p.pad_h;
      iw0[j] = ow * p.stride_w - p.pad_w;
      base[j] = ((n * p.h + ih0[j]) * p.w_in + iw0[j]) * p.c;
    } else {
      ih0[j] = -(1 << 20); /* below any tap's row offset: always outside x */
      iw0[j] = 0;
      base[j] = 0;
    }
  }

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
    const int dh = tap.y >> 16, dw = (int)(int16_t)(tap.y & 0xffff);
#pragma unroll
    for (int j = 0; j < kPositions; ++j) {
      const int ih = ih0[j] + dh, iw = iw0[j] + dw;
      const bool valid = (unsigned)ih < (unsigned)p.h && (unsigned)iw < (unsigned)p.w_in;
      cp_async16(shared_address(b_tile + (first_row + kIgemmRowsPerPass * j) * kIgemmStride + chunk * 8),
                   valid ? x + base[j] + tap.x : x, valid);
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
  uint16_t* out_tile = smem; /* [BM][kIgemmOutStride] */
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = warp_m * (BM / 2) + mt * 16 + (lane >> 2) + 8 * half;
      const int o = o0 + row;
      const float bias = o < p.o ? Bits<T>::to_float(w[(int64_t)o * p.k_stride + p.k_taps]) : 0.0f;
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) {
        const int col = warp_n * 32 + nt * 8 + 2 * (lane & 3);
        const uint32_t pair = Mma<T>::pack(acc[mt][nt][2 * half] + bias, acc[mt][nt][2 * half + 1] + bias);
        *reinterpret_cast<uint32_t*>(out_tile + row * kIgemmOutStride + col) = pair;
      }
    }
  }
  __syncthreads();
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const uint16_t* residual = reinterpret_cast<const uint16_t*>(p.residual);
  for (int c = tid; c < BM * (kIgemmBN / 8); c += EMBER_K_BLOCK) {
    const int row = c / (kIgemmBN / 8), col = (c % (kIgemmBN / 8)) * 8;
    const int o = o0 + row, pos = p0 + col;
    if (o >= p.o || pos >= p.positions) continue;
    const int n = (int)fast_div((uint32_t)pos, p.div_mul[0], p.div_shift[0]);
    const int r = pos - n * plane;
    const int index = (n * p.o + o) * plane + r;
    Vec16<T> v;
    v.raw = *reinterpret_cast<const uint4*>(out_tile + row * kIgemmOutStride + col);
    const bool whole = r + 8 <= plane && pos + 8 <= p.positions && (index & 7) == 0 &&
                       aligned16(p.y) && (!p.has_residual || aligned16(p.residual));
    if (whole) {
      if (p.has_residual || p.relu) {
        Vec16<T> add;
        if (p.has_residual) add.raw = *reinterpret_cast<const uint4*>(residual + index);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          float value = v.get(e) + (p.has_residual ? add.get(e) : 0.0f);
          if (p.relu) value = value < 0.0f ? 0.0f : value;
          v.set(e, value);
        }
      }
      *reinterpret_cast<uint4*>(y + index) = v.raw;
      continue;
    }
    /* The 8 positions cross an image or the end, or an address is unaligned. */
    for (int e = 0; e < 8 && pos + e < p.positions; ++e) {
      const int ne = (int)fast_div((uint32_t)(pos + e), p.div_mul[0], p.div_shift[0]);
      const int at = (ne * p.o + o) * plane + (pos + e - ne * plane);
      float value = v.get(e) + (p.has_residual ? Bits<T>::to_float(residual[at]) : 0.0f);
      if (p.relu) value = value < 0.0f ? 0.0f : value;
      y[at] = Bits<T>::from_float(value);
    }
  }
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

}  // namespace ember

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_conv_igemm_f16(const ember_k_conv_igemm_params p) {
  ember::conv_igemm_entry<__half>(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_conv_igemm_bf16(const ember_k_conv_igemm_params p) {
  ember::conv_igemm_entry<__nv_bfloat16>(p);
}

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK)
    ember_nhwc_pack_2(const ember_k_nhwc_pack_params p) {
  ember::nhwc_pack(p);
}
