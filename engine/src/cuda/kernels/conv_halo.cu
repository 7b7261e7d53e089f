/* CONV2D of stride 1 over a channels-last input of a multiple of 64 channels on Hopper's
 * wgmma, each input pixel read from global memory once per strip rather than once per tap
 * (kernel_params.h, ember_k_conv_halo_params, has the contract). Built for sm_90a only,
 * as conv_wgmma.cu.
 *
 * Why: conv_wgmma gathers a 128-position tile for every tap through cp.async, 9 times per
 * pixel for a 3x3 conv; on the H200 resnet18's 64-channel convs were bound by that gather
 * (its address arithmetic and L1, ncu), at about 200 TFLOP/s. Here the tensor memory
 * accelerator copies a strip's halo, (rows + KH - 1) x pitch pixels of 64 channels, once,
 * with zeros where it falls outside x, and every tap is the same halo read from another
 * row: with the output positions as wgmma's N (f = r·pitch + ow over the strip, pitch =
 * OW + KW - 1), tap (kh, kw) of position f is halo row f + kh·pitch + kw, so the B
 * operand of a tap is the halo's matrix descriptor moved by that many 128-byte rows. The
 * 128-byte swizzle is a function of the shared-memory address bits, and the halo starts
 * on a 1024-byte boundary, so a descriptor that starts on any row reads it as the copy
 * wrote it (the same property lets a K step of 16 add 32 bytes). The positions with
 * ow >= OW read across a row's end and are dropped; the halo buffer has rows past the
 * copy's for the last strip positions' taps to read (garbage, for dropped positions).
 * Images small enough for several to a strip are stacked whole, one copy's box of them,
 * and the same holds with the rows between images dropped too (resnet18's 7 x 7 convs:
 * strips of one image would drop 62% of N 128).
 *
 * A block of 384 threads, one an SM, loops over tiles: warpgroup 0 is the producer (one
 * thread copies halos into their ring, another the weights' 64 x 64·groups tile of each
 * (chunk, tap) into theirs, both running ahead into the next tile), 1 and 2 the consumers,
 * 64 output channels (wgmma's M, the A operand from the weight tile) by N positions each.
 * The epilogue adds the bias into a position-major tile of the warpgroup's own in shared
 * memory and writes 8 channels of a position at a time, with the residual and ReLU as the
 * other implicit-GEMM kernels do (conv_igemm_tile.cuh). */
#include "conv_igemm_tile.cuh"
#include "pool_max.cuh"
#include "wgmma.cuh"

namespace ember {

constexpr uint32_t kHaloConsumerWarps = 8;

/* Strip `strip`'s (first) image n and its first output row oh0 (strips = ceil(oh / rows)
 * an image, or strip_images whole images a strip). */
__device__ __forceinline__ void strip_origin(const ember_k_conv_halo_params& hp, int strip, int& n,
                                             int& oh0) {
  if (hp.strip_images > 1) {
    n = strip * hp.strip_images;
    oh0 = 0;
    return;
  }
  n = strip / hp.strips;
  oh0 = (strip - n * hp.strips) * hp.rows;
}

/* The output rows a strip keeps, over all its images (from its first image n). */
__device__ __forceinline__ int strip_rows(const ember_k_conv_halo_params& hp, int n, int oh0) {
  return hp.strip_images > 1 ? min(hp.strip_images, hp.images - n) * hp.conv.oh
                             : min(hp.rows, hp.conv.oh - oh0);
}

/* Writes a consumer warpgroup's tile (the strip's positions of 64 channels from o0, biased
 * and rounded, [f][EMBER_K_CONV_HALO_OUT_STRIDE]) of strip `strip` into a channels-last y
 * (o a multiple of 8): 16 bytes (8 channels of one position) a thread at a time, the
 * residual added and the ReLU applied on the way. A thread keeps its 8 channels and walks
 * positions 16 apart, its row and column stepped rather than divided out, kBatch of them
 * at a time with every residual load issued before the first is used: one at a time, this
 * loop took about 2 us a tile of resnet18's 56-wide convs on the H200. */
template <typename T>
__device__ __forceinline__ void store_halo_tile(const ember_k_conv_halo_params& hp,
                                                const uint16_t* tile, int strip, int o0) {
  constexpr int kBatch = 8, kStep = 16; /* 128 threads: 8 vectors of a position, 16 positions */
  const ember_k_conv_igemm_params& p = hp.conv;
  int n, oh0;
  strip_origin(hp, strip, n, oh0);
  const int thread = (int)(threadIdx.x & 127), channel = (thread & 7) * 8, o = o0 + channel;
  if (n >= hp.images || o >= p.o) return;
  const int count = strip_rows(hp, n, oh0) * p.ow; /* the strip's kept positions */
  const int plane = p.oh * p.ow;
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const bool residual_last = (p.layout & EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST) != 0;
  const bool residual_vector = residual_last && aligned16(p.residual);
  const int image_rows = hp.image_rows;
  /* The position's image (from n), its row in that image (from oh0) and column. */
  int position = thread >> 3, image = 0, r = position / p.ow, ow = position - r * p.ow;
  for (; r >= p.oh - oh0; r -= p.oh - oh0) ++image; /* oh0 is 0 where a strip has images */
#pragma unroll 1
  for (; position < count; position += kStep * kBatch) {
    Vec16<T> out[kBatch], add[kBatch];
    int at[kBatch]; /* the position's index in y (and a channels-last residual), or -1 */
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      at[k] = position + kStep * k < count ? (n + image) * plane + (oh0 + r) * p.ow + ow : -1;
      add[k].raw = make_uint4(0, 0, 0, 0);
      if (at[k] >= 0) {
        out[k].raw = *reinterpret_cast<const uint4*>(
            tile + ((image * image_rows + r) * hp.pitch + ow) * EMBER_K_CONV_HALO_OUT_STRIDE +
            channel);
        if (p.has_residual) {
          const int m = n + image, last = at[k] * p.o + o;
          const int nchw = (m * p.o + o) * plane + (at[k] - m * plane);
          add[k] = load_residual<T>(p, residual_vector, [&](int e) {
            return residual_last ? last + e : nchw + e * plane;
          });
        }
      }
      for (ow += kStep; ow >= p.ow; ow -= p.ow) {
        if (++r == p.oh - oh0) r = 0, ++image;
      }
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      if (at[k] < 0) continue;
      finish_with<T>(p, out[k], add[k]);
      *reinterpret_cast<uint4*>(y + at[k] * p.o + o) = out[k].raw;
    }
  }
}

/* store_halo_tile for an NCHW y, from a channel-major tile ([channel][N + 8]): 8
 * consecutive positions of one row of one channel a thread, one 16-byte store where they
 * are whole and aligned in y, consecutive threads along the row. */
template <typename T, int N>
__device__ __forceinline__ void store_halo_tile_nchw(const ember_k_conv_halo_params& hp,
                                                     const uint16_t* tile, int strip, int o0) {
  const ember_k_conv_igemm_params& p = hp.conv;
  int n, oh0;
  strip_origin(hp, strip, n, oh0);
  if (n >= hp.images) return;
  const int rows = strip_rows(hp, n, oh0), groups = (p.ow + 7) / 8; /* of 8 in a row */
  const int plane = p.oh * p.ow, units = 64 * rows * groups, image_rows = hp.image_rows;
  const int image_oh = p.oh - oh0; /* rows of an image in the strip, where it has images */
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const bool residual_last = (p.layout & EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST) != 0;
#pragma unroll 1
  for (int u = (int)(threadIdx.x & 127); u < units; u += 128) {
    const int channel = u / (rows * groups), rest = u - channel * rows * groups;
    const int strip_row = rest / groups, ow = (rest - strip_row * groups) * 8, o = o0 + channel;
    if (o >= p.o) continue;
    const int image = strip_row / image_oh, r = strip_row - image * image_oh, m = n + image;
    const int count = min(8, p.ow - ow);
    const int at = (m * p.o + o) * plane + (oh0 + r) * p.ow + ow; /* y's index of the first */
    const int pos = m * plane + (oh0 + r) * p.ow + ow;           /* its position */
    const uint16_t* from = tile + channel * (N + 8) + (image * image_rows + r) * hp.pitch + ow;
    Vec16<T> out, add;
    add.raw = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int e = 0; e < 8; ++e) out.bits[e] = e < count ? from[e] : 0;
    const bool whole = count == 8 && (at & 7) == 0 && aligned16(p.y);
    if (p.has_residual) {
      if (whole && !residual_last && aligned16(p.residual)) {
        add = load_residual<T>(p, true, [&](int e) { return at + e; });
      } else {
        const uint16_t* residual = reinterpret_cast<const uint16_t*>(p.residual);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (e < count) add.bits[e] = residual[residual_last ? (pos + e) * p.o + o : at + e];
        }
      }
    }
    finish_with<T>(p, out, add);
    if (whole) {
      *reinterpret_cast<uint4*>(y + at) = out.raw;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (e < count) y[at + e] = out.bits[e];
      }
    }
  }
}

/* A consumer warpgroup's accumulators (64 channels by N positions), biased and rounded,
 * into its epilogue tile: accumulator 4j + e is channel 16·warp + lane / 4 (+8 for
 * e >= 2), position 8j + 2·(lane % 4) + e % 2. Position-major
 * ([f][EMBER_K_CONV_HALO_OUT_STRIDE]) for a channels-last y, so that 8 channels of a
 * position are 16 bytes; channel-major ([channel][N + 8]) for an NCHW one, so that a
 * thread's two positions are one 4-byte store and 8 positions of a channel are
 * contiguous. (stmatrix, four 8 x 8 blocks an instruction, made resnet18's 56-wide convs
 * about 1 us slower each on the H200.) The caller has the warpgroup's threads done with
 * the tile's bytes before (its named barrier) and after. */
template <typename T, int N>
__device__ __forceinline__ void tile_accumulators(const ember_k_conv_igemm_params& p, uint16_t* tile,
                                                  const float (&acc)[N / 2], float bias0, float bias1) {
  const int lane = (int)(threadIdx.x & 31), warp = (int)((threadIdx.x >> 5) & 3);
  const int channel = 16 * warp + (lane >> 2);
  if (p.layout & EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST) {
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int f = 8 * j + 2 * (lane & 3) + e;
        tile[f * EMBER_K_CONV_HALO_OUT_STRIDE + channel] = Bits<T>::from_float(acc[4 * j + e] + bias0);
        tile[f * EMBER_K_CONV_HALO_OUT_STRIDE + channel + 8] =
            Bits<T>::from_float(acc[4 * j + 2 + e] + bias1);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
      const int f = 8 * j + 2 * (lane & 3);
      *reinterpret_cast<uint32_t*>(tile + channel * (N + 8) + f) =
          Mma<T>::pack(acc[4 * j] + bias0, acc[4 * j + 1] + bias0);
      *reinterpret_cast<uint32_t*>(tile + (channel + 8) * (N + 8) + f) =
          Mma<T>::pack(acc[4 * j + 2] + bias1, acc[4 * j + 3] + bias1);
    }
  }
}

/* The tile of strip `strip`'s positions by the 64 channels from o0 into y, in y's layout. */
template <typename T, int N>
__device__ __forceinline__ void store_tile(const ember_k_conv_halo_params& hp, const uint16_t* tile,
                                           int strip, int o0) {
  if (hp.conv.layout & EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST) {
    store_halo_tile<T>(hp, tile, strip, o0);
  } else {
    store_halo_tile_nchw<T, N>(hp, tile, strip, o0);
  }
}

/* The max (max_nan) of the three columns 2k - 1 .. 2k + 1 (the first left out when k is
 * 0) of row r of a position-major tile, channels 8g .. 8g + 7. */
template <typename T>
__device__ __forceinline__ uint4 row_window_max(const ember_k_conv_halo_params& hp,
                                                const uint16_t* tile, int r, int k, int g) {
  const uint16_t* at = tile + (r * hp.pitch + 2 * k) * EMBER_K_CONV_HALO_OUT_STRIDE + g * 8;
  const uint4 mid = *reinterpret_cast<const uint4*>(at);
  const uint4 right = *reinterpret_cast<const uint4*>(at + EMBER_K_CONV_HALO_OUT_STRIDE);
  const uint4 two = max_nan<T>(mid, right);
  return k > 0 ? max_nan<T>(*reinterpret_cast<const uint4*>(at - EMBER_K_CONV_HALO_OUT_STRIDE),
                            two)
               : two;
}

/* The pooled rows at the two boundaries a consumer of a pooled conv could not complete
 * itself (conv_halo_units' q_buffers): above its first strip (`top`, unless 0) and below
 * its last (`bottom`, unless its image's strips, its row above being that strip's window
 * row in pool_rows), each shared with a strip of the other consumer or of another block. The
 * consumer arrives at both (hp.pool_counts[n][boundary], 0 between launches); whichever
 * of a boundary's two strips arrives second takes the max of the two parts into y's row,
 * by MAX_POOL2D's exact rule, and sets the count back to 0. Each thread fenced its stores
 * before the arrival; the loads go to the L2 (ld.cg: not an L1 line of this SM from
 * before the other strip wrote). `flags`: two ints of the consumer's shared memory. Done
 * at the end, where its latency is a tail of a few us: in each strip's epilogue, the
 * arrivals at every boundary (counted in global memory, the row combined by whichever
 * came second) made resnet18 b64's stem 127.6-145.7 us on the H200 against 90.2 with a
 * step of its own for these rows (ember_max_pool_rows, 22.3 us); the epilogues are the
 * stem's critical path. */
template <typename T>
__device__ __forceinline__ void complete_pooled_rows(const ember_k_conv_halo_params& hp, int g,
                                                     int top_n, int top, int bottom_n,
                                                     int bottom, volatile int* flags) {
  const ember_k_conv_igemm_params& p = hp.conv;
  const int thread = (int)(threadIdx.x & 127);
  int* counts = reinterpret_cast<int*>(hp.pool_counts);
  __threadfence();
  asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
  if (thread < 2) { /* one boundary each, the two atomics at once */
    const int n = thread == 0 ? top_n : bottom_n, boundary = thread == 0 ? top : bottom;
    bool second = false;
    if (boundary > 0 && boundary < hp.strips) {
      int* count = counts + (int64_t)n * hp.strips + boundary;
      second = atomicAdd(count, 1) == 1;
      if (second) *count = 0;
    }
    __threadfence(); /* the other strip's parts, which its arrival published, come after */
    flags[thread] = second;
  }
  asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
  const int row_vectors = p.ow / 2 * p.o / 8;
  const Vec16<T> neg_inf = all_neg_inf<Vec16<T>>();
  uint4* y = reinterpret_cast<uint4*>(p.y);
  const uint4* rows = reinterpret_cast<const uint4*>(hp.pool_rows);
  for (int k = 0; k < 2; ++k) {
    if (!flags[k]) continue;
    const int m = k == 0 ? top_n : bottom_n, b = k == 0 ? top : bottom;
    uint4* at = y + ((int64_t)m * (p.oh / 2) + b * (hp.rows / 2)) * row_vectors;
    const uint4* above = rows + ((int64_t)m * hp.strips + b - 1) * row_vectors;
    constexpr int kBatch = 4; /* every load of a thread's vectors issued before the first max */
    for (int e0 = thread; e0 < row_vectors; e0 += 128 * kBatch) {
      uint4 taps[kBatch][2];
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int e = e0 + 128 * i;
        if (e < row_vectors) taps[i][0] = __ldcg(above + e), taps[i][1] = __ldcg(at + e);
      }
#pragma unroll
      for (int i = 0; i < kBatch; ++i) {
        const int e = e0 + 128 * i;
        if (e < row_vectors) at[e] = max_of_taps<T, 2>(taps[i], neg_inf).raw;
      }
    }
  }
}

/* The resident-weights form's epilogue when it takes the MAX_POOL2D after the conv
 * (hp.pooled; kernel_params.h): the strip of image n from output row oh0 (rows = 2R) from its
 * position-major tile into the pool's output y [n, oh/2, ow/2, o], pooled rows oh0/2 ..
 * oh0/2 + R - 1, the first with the window row above the strip from `above` (the strip
 * above's last row's window maxima, which this consumer computed last; null where another
 * strip has them: complete_pooled_rows adds them), and, unless it is its image's last
 * strip, its last row's window maxima into `below` (for this consumer's next strip), or
 * hp.pool_rows where `below` is null. Both are [ow/2][o] in shared memory. A thread takes 8
 * channels of one output: the max of each window row's three columns, then of the rows
 * (max_nan: what MAX_POOL2D gives, up to the sign of a zero and a NaN's payload), the ReLU
 * applied to the max (which commutes with it). Why: resnet18's stem wrote 102.8 MB
 * at batch 64 and the pool read them back (49.4 us on the H200). With MAX_POOL2D's exact
 * rule (max_of_taps: a NaN test on every tap), the stem took 137.8 us against 100.3
 * without the pool: the epilogue outlasted the other consumer's MMAs. */
template <typename T>
__device__ __forceinline__ void store_pooled_tile(const ember_k_conv_halo_params& hp,
                                                  const uint16_t* tile, int n, int oh0,
                                                  const uint16_t* above, uint16_t* below) {
  const ember_k_conv_igemm_params& p = hp.conv;
  if (n >= hp.images) return;
  const int groups = p.o / 8, pw = p.ow / 2, pooled = hp.rows / 2, s = oh0 / hp.rows;
  const bool above_next = s + 1 < hp.strips; /* the next strip's first row lacks our last */
  Vec16<T> none;
  none.raw = make_uint4(0, 0, 0, 0); /* no residual: the planner's */
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  uint16_t* rows = reinterpret_cast<uint16_t*>(hp.pool_rows);
#pragma unroll 2
  for (int i = (int)(threadIdx.x & 127); i < pooled * pw * groups; i += 128) {
    const int g = i % groups, k = (i / groups) % pw, m = i / (groups * pw);
    /* Rows 2m - 1 .. 2m + 1 of the strip: the first is the strip above's for m = 0. */
    Vec16<T> last, v;
    last.raw = row_window_max<T>(hp, tile, 2 * m + 1, k, g);
    v.raw = max_nan<T>(row_window_max<T>(hp, tile, 2 * m, k, g), last.raw);
    if (m > 0) v.raw = max_nan<T>(row_window_max<T>(hp, tile, 2 * m - 1, k, g), v.raw);
    finish_with<T>(p, v, none);
    if (m == 0 && above != nullptr) {
      v.raw = max_nan<T>(*reinterpret_cast<const uint4*>(above + k * p.o + g * 8), v.raw);
    }
    *reinterpret_cast<uint4*>(y + (((int64_t)n * (p.oh / 2) + oh0 / 2 + m) * pw + k) * p.o +
                              g * 8) = v.raw;
    if (m == pooled - 1 && above_next) {
      finish_with<T>(p, last, none);
      uint16_t* to = below != nullptr
                         ? below + k * p.o + g * 8
                         : rows + (((int64_t)n * hp.strips + s) * pw + k) * p.o + g * 8;
      *reinterpret_cast<uint4*>(to) = last.raw;
    }
  }
}

template <typename T, int N>
__device__ __forceinline__ void conv_halo(const ember_k_conv_halo_params& hp, uint8_t* smem) {
  const ember_k_conv_igemm_params& p = hp.conv;
  const int tid = threadIdx.x, warpgroup = tid >> 7;
  const int stages = hp.w_stages;
  const uint32_t w_bytes = (uint32_t)hp.groups * 64u * 128u;
  const uint32_t ring = shared_address(smem);
  const uint32_t w_ring = ring + (uint32_t)(hp.halo_stages * hp.strips_per_block * hp.halo_bytes);
  const uint32_t out_tiles = w_ring + (uint32_t)stages * w_bytes;
  const uint32_t bars = out_tiles + 2u * N * EMBER_K_CONV_HALO_OUT_STRIDE * 2u;
  auto halo = [&](int stage, int strip) {
    return ring + (uint32_t)((stage * hp.strips_per_block + strip) * hp.halo_bytes);
  };
  auto halo_full = [&](int s) { return bars + (uint32_t)(8 * s); };
  auto halo_empty = [&](int s) { return bars + (uint32_t)(8 * (2 + s)); };
  auto w_full = [&](int s) { return bars + (uint32_t)(8 * (4 + s)); };
  auto w_empty = [&](int s) {
    return bars + (uint32_t)(8 * (4 + EMBER_K_CONV_HALO_MAX_W_STAGES + s));
  };
  static_assert(8 * (4 + 2 * EMBER_K_CONV_HALO_MAX_W_STAGES) <= EMBER_K_CONV_HALO_BARRIER_BYTES,
                "the barriers fit");
  /* Each halo buffer's bytes past its copy, which no copy writes: zeros, the padding right
   * of the strip's last row (and below its last image) that kept positions' taps read. */
  const int tail_vectors = (hp.halo_bytes - hp.halo_box_bytes) / 16;
  for (int i = tid; i < hp.halo_stages * hp.strips_per_block * tail_vectors; i += blockDim.x) {
    const int buffer = i / tail_vectors, v = i - buffer * tail_vectors;
    *reinterpret_cast<uint4*>(smem + buffer * hp.halo_bytes + hp.halo_box_bytes + 16 * v) =
        make_uint4(0, 0, 0, 0);
  }
  fence_proxy_async(); /* before the MMAs (the async proxy) read them */
  if (tid == 0) {
    for (int s = 0; s < hp.halo_stages; ++s) {
      mbarrier_init(halo_full(s), 1);
      mbarrier_init(halo_empty(s), kHaloConsumerWarps);
    }
    for (int s = 0; s < stages; ++s) {
      mbarrier_init(w_full(s), 1);
      mbarrier_init(w_empty(s), kHaloConsumerWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  /* Tile t: channel tile t % o_tiles of the strips from (t / o_tiles)·strips_per_block. */
  const uint32_t first_tile = blockIdx.x, tile_step = gridDim.x, tiles = (uint32_t)hp.tiles;

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    /* Two copy loops in two warps, so that a halo is never queued behind weight tiles
     * waiting for their stage (or the reverse); both run ahead into the block's next
     * tile while the consumers finish this one. Use u of a stage (u counted over the
     * block's tiles) waits for the consumers' release of use u - 1. A strip past the last
     * image copies zeros (its coordinates are outside x) and writes nothing. */
    if (tid == 0) {
      uint32_t use = 0;
      for (uint32_t tile = first_tile; tile < tiles; tile += tile_step) {
        const int first_strip = (int)(tile / (uint32_t)p.o_tiles) * hp.strips_per_block;
        for (int c = 0; c < hp.chunks; ++c, ++use) {
          const int s = (int)(use % (uint32_t)hp.halo_stages);
          const uint32_t round = use / (uint32_t)hp.halo_stages;
          if (round > 0) mbarrier_wait(halo_empty(s), (round - 1) & 1);
          mbarrier_expect_tx(halo_full(s), (uint32_t)(hp.halo_box_bytes * hp.strips_per_block));
          for (int k = 0; k < hp.strips_per_block; ++k) {
            const int strip = first_strip + k;
            int n, oh0;
            strip_origin(hp, strip, n, oh0);
            tma_load_4d(halo(s, k), hp.x_map, c * 64, -p.pad_w, oh0 - p.pad_h, n, halo_full(s));
          }
        }
      }
    } else if (tid == 32) {
      uint32_t use = 0;
      for (uint32_t tile = first_tile; tile < tiles; tile += tile_step) {
        const int o_row = (int)(tile % (uint32_t)p.o_tiles) * 64 * hp.groups;
        for (int c = 0; c < hp.chunks; ++c) {
          for (int t = 0; t < hp.taps; ++t, ++use) {
            const int s = (int)(use % (uint32_t)stages);
            const uint32_t round = use / (uint32_t)stages;
            if (round > 0) mbarrier_wait(w_empty(s), (round - 1) & 1);
            mbarrier_expect_tx(w_full(s), w_bytes);
            tma_load_2d(w_ring + (uint32_t)s * w_bytes, hp.w_map, t * p.c + c * 64, o_row, w_full(s));
          }
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int g = warpgroup - 1, warp = (tid >> 5) & 3, lane = tid & 31;
  const int strip_index = hp.strips_per_block == 2 ? g : 0;
  const int group = hp.groups == 2 ? g : 0;
  uint16_t* tile_out = reinterpret_cast<uint16_t*>(smem + (out_tiles - ring)) +
                       g * N * EMBER_K_CONV_HALO_OUT_STRIDE;
  const int channel = 16 * warp + (lane >> 2);
  uint32_t halo_use = 0, w_use = 0;
  for (uint32_t tile = first_tile; tile < tiles; tile += tile_step) {
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
    /* The bias first: its loads land under the MMAs. */
    const int first_strip = (int)(tile / (uint32_t)p.o_tiles) * hp.strips_per_block;
    const int o0 = ((int)(tile % (uint32_t)p.o_tiles) * hp.groups + group) * 64;
    const float bias0 = conv_bias<T>(p, o0 + channel), bias1 = conv_bias<T>(p, o0 + channel + 8);
    int w_held = -1, halo_held = -1; /* stages this warpgroup's MMAs may still read */
    for (int c = 0; c < hp.chunks; ++c, ++halo_use) {
      const int hs = (int)(halo_use % (uint32_t)hp.halo_stages);
      mbarrier_wait(halo_full(hs), (halo_use / (uint32_t)hp.halo_stages) & 1);
      const uint32_t halo_base = halo(hs, strip_index);
      for (int t = 0; t < hp.taps; ++t, ++w_use) {
        const int s = (int)(w_use % (uint32_t)stages);
        mbarrier_wait(w_full(s), (w_use / (uint32_t)stages) & 1);
        const int kh = t / hp.kw, kw = t - kh * hp.kw;
        const uint32_t a = w_ring + (uint32_t)s * w_bytes + (uint32_t)(group * 64 * 128);
        const uint32_t b = halo_base + (uint32_t)((kh * hp.pitch + kw) * 128);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          wgmma_mma<T, N>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
        }
        wgmma_commit();
        wgmma_wait<1>(); /* the MMAs before these have read their stages */
        if (lane == 0) {
          if (w_held >= 0) mbarrier_arrive(w_empty(w_held));
          if (t == 0 && halo_held >= 0) mbarrier_arrive(halo_empty(halo_held));
        }
        w_held = s;
        if (t == 0) halo_held = -1;
      }
      halo_held = hs;
    }
    wgmma_wait_all();
    fence_accumulators(acc);
    if (lane == 0) {
      mbarrier_arrive(w_empty(w_held));
      mbarrier_arrive(halo_empty(halo_held));
    }

    asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
    tile_accumulators<T, N>(p, tile_out, acc, bias0, bias1);
    asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
    store_tile<T, N>(hp, tile_out, first_strip + strip_index, o0);
  }
}

/* The halo conv of one group of 64 output channels over one chunk of C input channels
 * (C 64: resnet's first stage; C 16: its stem, read space-to-depth), whose weight tiles
 * (hp.w_stages of them, 64 rows of K 64 each, 8 KB; at most
 * EMBER_K_CONV_HALO_UNITS_MAX_W_TILES) stay in shared memory, since every strip reads the
 * same ones. A unit is one strip of N = 256 positions. The two consumers take the block's
 * units in turn, and so do their MMAs, so that one's epilogue runs while the other's MMAs
 * run. Why: with both consumers on one tile at once (conv_halo), ncu on the H200 found no
 * eligible warp in 61% of the cycles of resnet18's 56-wide convs, whose K of 576 puts an
 * epilogue after every 9 weight tiles; this form took them from 53-57 to 39-44 us. Unit
 * nth's halo lands in slot nth % halo_stages (3 where they fit), and its epilogue tile
 * reuses that slot once its MMAs are done, which is what lets three 48 KB halos and the
 * 72 KB of weights fit. With C 16 a halo row is 32 bytes (the 32-byte swizzle, the same
 * property of the address bits as the 128-byte one) and a tap is one K step of 16, whose
 * weights are the 32 bytes at K offset 16·tap of the weight tiles; its slots are small
 * (19 KB for the stem) beside the tile they also hold. Measured on the H200 and not kept:
 * for C 16, epilogue tiles of the consumers' own and four slots, each going back to the
 * copy once its MMAs are done (the stem 100.3 us at batch 64, against 97.5); units of 64
 * channels by 128 positions for every conv of this file, weights streamed (layer2-3's
 * convs 7-11 us slower each); and two accumulator chains of 128 positions rather than one
 * of 256 (a little slower). */
template <typename T, int C, int N>
__device__ __forceinline__ void conv_halo_units(const ember_k_conv_halo_params& hp, uint8_t* smem) {
  static_assert(C == 16 || C == 64, "halo rows of 32 or 128 bytes");
  constexpr uint32_t kWBytes = 64u * 128u;
  const ember_k_conv_igemm_params& p = hp.conv;
  const int tid = threadIdx.x, warpgroup = tid >> 7;
  const uint32_t slots = shared_address(smem);
  const uint32_t w_tiles = slots + (uint32_t)(hp.halo_stages * hp.halo_bytes);
  const uint32_t bars = w_tiles + (uint32_t)hp.w_stages * kWBytes;
  const uint32_t stages = (uint32_t)hp.halo_stages;
  auto slot = [&](int s) { return slots + (uint32_t)(s * hp.halo_bytes); };
  auto halo_full = [&](int s) { return bars + (uint32_t)(8 * s); };
  auto halo_empty = [&](int s) { return bars + (uint32_t)(8 * (3 + s)); };
  const uint32_t w_full = bars + 48u;
  /* mma_issued(g): consumer g has issued every MMA of its latest unit. */
  auto mma_issued = [&](int g) { return bars + (uint32_t)(8 * (7 + g)); };
  static_assert(8 * 9 <= EMBER_K_CONV_HALO_BARRIER_BYTES, "the barriers fit");
  if (tid == 0) {
    for (int s = 0; s < hp.halo_stages; ++s) {
      mbarrier_init(halo_full(s), 1);
      mbarrier_init(halo_empty(s), 1);
    }
    mbarrier_init(mma_issued(0), 1);
    mbarrier_init(mma_issued(1), 1);
    mbarrier_init(w_full, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  const uint32_t first_unit = blockIdx.x, unit_step = gridDim.x, units = (uint32_t)hp.tiles;
  /* The block's turn t (a unit, i.e. a strip: slot t % stages, consumer t % 2's) is unit
   * blockIdx.x + t·gridDim.x. A pooled conv's block takes a contiguous run of units
   * instead, consumer 0 its first half (rounded up) and 1 the rest, so that a consumer's
   * strips follow each other and it hands its last row's window maxima to its next strip
   * in shared memory (q_buffers, below). */
  const uint32_t run = (uint32_t)((uint64_t)blockIdx.x * units / gridDim.x);
  const uint32_t run_end = (uint32_t)((uint64_t)(blockIdx.x + 1) * units / gridDim.x);
  const uint32_t half = (run_end - run + 1) / 2;
  const uint32_t turns = hp.pooled          ? run_end - run
                         : first_unit < units ? (units - first_unit + unit_step - 1) / unit_step
                                              : 0u;
  auto unit_of = [&](uint32_t t) {
    return hp.pooled ? (t & 1u ? run + half : run) + (t >> 1) : first_unit + t * unit_step;
  };

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      /* Unit nth's halo into slot nth % stages, once unit nth - stages's consumer has
       * stored that unit's tile from it. A strip past the last image copies zeros and
       * writes nothing. */
      for (uint32_t nth = 0; nth < turns; ++nth) {
        const uint32_t unit = unit_of(nth);
        const int s = (int)(nth % stages);
        if (nth >= stages) mbarrier_wait(halo_empty(s), (nth / stages - 1) & 1);
        const int strip = (int)unit;
        int n, oh0;
        strip_origin(hp, strip, n, oh0);
        mbarrier_expect_tx(halo_full(s), (uint32_t)hp.halo_box_bytes);
        tma_load_4d(slot(s), hp.x_map, 0, -p.pad_w, oh0 - p.pad_h, n, halo_full(s));
      }
    } else if (tid == 32) {
      mbarrier_expect_tx(w_full, (uint32_t)hp.w_stages * kWBytes);
      for (int i = 0; i < hp.w_stages; ++i) {
        tma_load_2d(w_tiles + (uint32_t)i * kWBytes, hp.w_map, i * 64, 0, w_full);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int g = warpgroup - 1, warp = (tid >> 5) & 3, lane = tid & 31;
  const int channel = 16 * warp + (lane >> 2);
  const float bias0 = conv_bias<T>(p, channel), bias1 = conv_bias<T>(p, channel + 8);
  /* hp.pooled: this consumer's two buffers of a strip's last row's window maxima (a strip
   * reads one, writes the other; after the barriers), and the boundaries it leaves to
   * complete_pooled_rows. */
  const uint32_t q_bytes = (uint32_t)(p.ow / 2 * p.o) * (uint32_t)sizeof(T);
  uint16_t* q_buffers = reinterpret_cast<uint16_t*>(
      smem + (bars - slots) + EMBER_K_CONV_HALO_BARRIER_BYTES + 2 * g * q_bytes);
  int top_n = 0, top = 0, bottom_n = 0, bottom = 0;
  for (uint32_t nth = (uint32_t)g; nth < turns; nth += 2) {
    const uint32_t unit = unit_of(nth);
    const int s = (int)(nth % stages);
    uint16_t* tile = reinterpret_cast<uint16_t*>(smem + s * hp.halo_bytes);
    float acc[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
    if (nth > 0) mbarrier_wait(mma_issued((int)(nth - 1) & 1), ((nth - 1) >> 1) & 1);
    mbarrier_wait(w_full, 0);
    mbarrier_wait(halo_full(s), (nth / stages) & 1);
    if constexpr (C == 64) {
      for (int t = 0; t < hp.taps; ++t) {
        const int kh = t / hp.kw, kw = t - kh * hp.kw;
        const uint32_t a = w_tiles + (uint32_t)t * kWBytes;
        const uint32_t b = slot(s) + (uint32_t)((kh * hp.pitch + kw) * 128);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          wgmma_mma<T, N>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
        }
        wgmma_commit();
        wgmma_wait<1>();
      }
    } else {
      /* One MMA a tap, four taps (a weight tile) a group (the planner takes a multiple of
       * 4); groups of one, each waited for as the 64-channel loop does, made resnet18's
       * stem at batch 64 108.6 us on the H200, against 97.5. */
      for (int t0 = 0; t0 < hp.taps; t0 += 4) {
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          const int t = t0 + kk, kh = t / hp.kw, kw = t - kh * hp.kw;
          const uint32_t a = w_tiles + (uint32_t)(t0 >> 2) * kWBytes + (uint32_t)kk * 32u;
          const uint32_t b = slot(s) + (uint32_t)((kh * hp.pitch + kw) * 32);
          wgmma_mma<T, N>(acc, wgmma_descriptor(a), wgmma_descriptor_32b(b));
        }
        wgmma_commit();
      }
    }
    if ((tid & 127) == 0) mbarrier_arrive(mma_issued(g));
    wgmma_wait_all();
    fence_accumulators(acc);
    /* Every warp's MMAs have read the halo before any thread writes the tile over it. */
    asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
    tile_accumulators<T, N>(p, tile, acc, bias0, bias1);
    asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
    if (hp.pooled) {
      /* Its j-th strip: the one above is its j - 1-th where j > 0 (same image unless it
       * is its image's first); the one below its j + 1-th where that is its. */
      const uint32_t j = nth >> 1, mine = g == 0 ? half : run_end - run - half;
      int n, oh0;
      strip_origin(hp, (int)unit, n, oh0);
      const int strip_s = oh0 / hp.rows;
      const uint32_t q_elements = q_bytes / (uint32_t)sizeof(T);
      const uint16_t* above = j > 0 ? q_buffers + ((j - 1) & 1) * q_elements : nullptr;
      uint16_t* below = j + 1 < mine ? q_buffers + (j & 1) * q_elements : nullptr;
      store_pooled_tile<T>(hp, tile, n, oh0, strip_s > 0 ? above : nullptr, below);
      if (j == 0) top_n = n, top = strip_s;
      if (j + 1 == mine) bottom_n = n, bottom = strip_s + 1;
    } else {
      store_tile<T, N>(hp, tile, (int)unit, 0);
    }
    /* The slot goes back to the copy (the async proxy) once every thread is done with it. */
    fence_proxy_async();
    asm volatile("bar.sync %0, 128;\n" ::"r"(g + 2) : "memory");
    if ((tid & 127) == 0) mbarrier_arrive(halo_empty(s));
  }
  if (hp.pooled) {
    complete_pooled_rows<T>(hp, g, top_n, top, bottom_n, bottom,
                            reinterpret_cast<volatile int*>(q_buffers));
  }
}

template <typename T, int N>
__device__ __forceinline__ void conv_halo_entry(const ember_k_conv_halo_params& hp) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  conv_halo<T, N>(hp, swizzle_aligned_shared());
#else
  (void)hp;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

template <typename T, int C, int N>
__device__ __forceinline__ void conv_halo_units_entry(const ember_k_conv_halo_params& hp) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  conv_halo_units<T, C, N>(hp, swizzle_aligned_shared());
#else
  (void)hp;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

}  // namespace ember

/* One kernel per strip width N (EMBER_K_CONV_HALO_WIDTHS): wgmma's N is part of the
 * instruction. __grid_constant__: the tensor maps are read by the TMA where the launch put
 * them. */
#define EMBER_CONV_HALO_KERNEL(n, suffix, type)                                             \
  extern "C" __global__ void __launch_bounds__(EMBER_K_CONV_HALO_THREADS, 1)               \
      ember_conv_halo##n##_##suffix(const __grid_constant__ ember_k_conv_halo_params p) {   \
    ember::begin_after_previous_grid();                                                     \
    ember::conv_halo_entry<type, n>(p);                                                     \
  }
#define EMBER_CONV_HALO_KERNELS(n)               \
  EMBER_CONV_HALO_KERNEL(n, f16, __half)         \
  EMBER_CONV_HALO_KERNEL(n, bf16, __nv_bfloat16)
EMBER_CONV_HALO_KERNELS(120)
EMBER_CONV_HALO_KERNELS(128)
EMBER_CONV_HALO_KERNELS(144)
EMBER_CONV_HALO_KERNELS(208)
EMBER_CONV_HALO_KERNELS(216)
EMBER_CONV_HALO_KERNELS(224)

/* One kernel per strip width (EMBER_K_CONV_HALO_UNITS_WIDTHS) and halo row: 64 channels
 * (ember_conv_halo_units<n>_*) or 16 (..._c16_*), as one kernel with both loops had
 * ptxas serialize every wgmma of both (C7520). */
#define EMBER_CONV_HALO_UNITS_KERNEL(name, c, n, suffix, type)                               \
  extern "C" __global__ void __launch_bounds__(EMBER_K_CONV_HALO_THREADS, 1)                 \
      name##_##suffix(const __grid_constant__ ember_k_conv_halo_params p) {                   \
    ember::begin_after_previous_grid();                                                       \
    ember::conv_halo_units_entry<type, c, n>(p);                                              \
  }
#define EMBER_CONV_HALO_UNITS_KERNELS(n)                                                     \
  EMBER_CONV_HALO_UNITS_KERNEL(ember_conv_halo_units##n, 64, n, f16, __half)                 \
  EMBER_CONV_HALO_UNITS_KERNEL(ember_conv_halo_units##n, 64, n, bf16, __nv_bfloat16)         \
  EMBER_CONV_HALO_UNITS_KERNEL(ember_conv_halo_units##n##_c16, 16, n, f16, __half)           \
  EMBER_CONV_HALO_UNITS_KERNEL(ember_conv_halo_units##n##_c16, 16, n, bf16, __nv_bfloat16)
EMBER_CONV_HALO_UNITS_KERNELS(232)
EMBER_CONV_HALO_UNITS_KERNELS(256)
