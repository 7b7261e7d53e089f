/* LINEAR with the activation after it (or none) on Hopper's wgmma, fed by the tensor
 * memory accelerator (TMA), float16 and bfloat16: first for the activations cuBLASLt's
 * epilogue does not have (GELU's erf form, SIGMOID, TANH, SILU), which would otherwise be
 * a kernel of their own reading and writing the whole output again (the MLP's four erf
 * GELUs at batch 4096), then for every LINEAR of a program that then need not load
 * cuBLASLt at all. Built for sm_90a only, as conv_wgmma.cu; kernel_params.h
 * (ember_k_linear_tma_params, ember_k_gemm_wgmma_params) has the contract.
 *
 * A block of 384 threads computes a 128 x BN tile of y (rows of x by rows of w; BN 256,
 * or 192 in ember_gemm_wgmma192, where the narrower tiles fill the SMs better: the
 * executor's choice), K = 64 at a time, through a ring of 4 stages of 48 KB (40 KB).
 * Warpgroup 0 is the producer: one thread waits for a stage to be empty, then has the TMA
 * copy x's 128 x 64 and w's BN x 64 tiles into it (128-byte rows with the 128-byte
 * swizzle, the layout wgmma's descriptors name; zeros past the tensors' ends), and the
 * stage's full barrier counts their bytes. When w and the bias are the plan's constants,
 * the first stages' w copies go out before the kernel waits for the one before it (PDL),
 * so that only x's are left once it has finished. Warps 1-3 of the producer put the
 * tile's bias in shared memory for the epilogue. Warpgroups 1 and 2 are the consumers, 64
 * rows each (wgmma's M) by all BN columns (N): each waits for a stage to be full, issues
 * its 4 m64nBNk16 MMAs, and once the MMAs of the stage before have completed
 * (wgmma.wait_group 1) releases that one to the producer (an arrival per warp on its
 * empty barrier). The producer gives most of its registers to the consumers
 * (setmaxnreg), who hold BN / 2 accumulators a thread.
 *
 * With EMBER_K_GEMM_WGMMA_CLUSTER 2 (or 4), blocks group on consecutive row tiles of one
 * column tile and each copies its share of w's tile into all of them (TMA multicast; the
 * empty barriers then count every block's consumers). On an H100 clusters of 2 were
 * slower (18.2 against 16.4 us for 4096 x 1024 x 1024, same process), and only 30
 * clusters of 4 fit at once (120 of 128 blocks), so it is 1.
 *
 * The epilogue adds the bias and rounds to the dtype (the unfused LINEAR's stored
 * output) into shared memory, four 8 x 8 fragments a stmatrix, then applies the
 * activation on the way out, 16 bytes a thread. It is what the kernel spends beyond its
 * MMAs: on an H100, of 15.5 us for 4096 x 1024 x 1024 without an activation (PDL), the
 * MMA loop took 10.0 and the epilogue 2.8 (bias and fragments 1.0, stores 1.8), and the
 * erf GELU made the stores 4.5 (its arithmetic issue-bound; globaltimer stamps of each
 * block's phases, in a probe of this kernel before its stmatrix epilogue: bench/RESULTS.md,
 * the twenty-third session). A block holds one tile, so its epilogue never overlaps
 * another tile's loads, as cuBLASLt's persistent kernels do: in several waves that is
 * most of what it loses to them (bench/RESULTS.md, the thirty-eighth session). The chain
 * kernel below is this block looping over tiles of several LINEARs.
 *
 * The executor takes this kernel where its tiles fit in one wave, or in any number in a
 * program that then loads no cuBLASLt (cuda_executor.c linear_takes_gemm_wgmma says
 * why). */
#include "wgmma.cuh"

namespace ember {

constexpr int kGemmBM = EMBER_K_GEMM_WGMMA_BM;
constexpr int kGemmBK = EMBER_K_GEMM_WGMMA_BK;
constexpr int kGemmStages = EMBER_K_GEMM_WGMMA_STAGES;
constexpr int kGemmXBytes = kGemmBM * kGemmBK * 2;
static_assert(kGemmBK * 2 == 128, "one K tile is one 128-byte swizzle row");
constexpr int kGemmBarrierBytes = kGemmStages * 16;
static_assert(EMBER_K_GEMM_WGMMA_THREADS == 384 && kGemmBM == 128,
              "a producer and two consumer warpgroups of 64 rows");
constexpr uint32_t kGemmConsumerWarps = 8;
/* Barrier 1 before the epilogue: the consumers, and the producer's warps 1-3, which write
 * the bias tile. */
constexpr int kGemmEpilogueThreads = 256 + 96;
constexpr int kGemmCluster = EMBER_K_GEMM_WGMMA_CLUSTER;

/* What depends on the tile's BN columns (EMBER_K_GEMM_WGMMA_BN or _BN_SMALL): a stage of
 * x's and w's K tiles, and the epilogue's rows of BN + 8 elements. */
template <int BN>
struct GemmColumns {
  static constexpr int kStageBytes = (kGemmBM + BN) * kGemmBK * 2;
  static constexpr int kOutStride = BN + 8; /* elements between rows of the epilogue's tile */
  static_assert(BN == EMBER_K_GEMM_WGMMA_BN || BN == EMBER_K_GEMM_WGMMA_BN_SMALL, "a host's BN");
  static_assert(kStageBytes % 1024 == 0 && kGemmXBytes % 1024 == 0,
                "tiles keep the swizzle's alignment");
  static_assert(kGemmStages * kStageBytes + kGemmBarrierBytes + BN * 4 + 1024 <=
                    EMBER_K_GEMM_WGMMA_SMEM_BYTES,
                "within the host's size");
  static_assert(2 * 64 * kOutStride * 2 <= kGemmStages * kStageBytes,
                "both warpgroups' epilogue tiles fit in the ring");
  static_assert((kGemmCluster == 1 || kGemmCluster == 2 || kGemmCluster == 4) &&
                    BN % (8 * kGemmCluster) == 0,
                "blocks of a cluster sharing w's tile in whole groups of 8 rows");
};
static_assert(GemmColumns<EMBER_K_GEMM_WGMMA_BN>::kStageBytes * kGemmStages + kGemmBarrierBytes +
                      EMBER_K_GEMM_WGMMA_BN * 4 + 1024 ==
                  EMBER_K_GEMM_WGMMA_SMEM_BYTES,
              "the host's size is the wide tile's");

/* One 16-byte vector (8 columns) of the epilogue's tile at `from` to y at `to`, with
 * activation kAct. */
template <typename T, int kAct>
__device__ __forceinline__ void store_gemm_vector(const uint16_t* from, uint16_t* to) {
  Vec16<T> out;
  out.raw = *reinterpret_cast<const uint4*>(from);
#pragma unroll
  for (int e = 0; e < 8; ++e) out.set(e, activate_as<T>(kAct, out.get(e)));
  *reinterpret_cast<uint4*>(to) = out.raw;
}

/* An activation as a type, for with_activation's callers. */
template <int A>
struct Act {
  static constexpr int kValue = A;
};

/* Calls store(Act<a>{}) for the activation a that `act` names: one activation's code,
 * chosen once per tile. Every activation inlined at each of the 128 accumulators made
 * gemm_wgmma 40 thousand instructions long, and its warps waited on instruction fetch
 * (4096 x 1024 x 1024: 61 us a GEMM, 20 without the epilogue). */
template <typename Store>
__device__ __forceinline__ void with_activation(int act, Store store) {
  switch (act) {
    case EMBER_K_UNARY_RELU: store(Act<EMBER_K_UNARY_RELU>{}); break;
    case EMBER_K_UNARY_GELU_ERF: store(Act<EMBER_K_UNARY_GELU_ERF>{}); break;
    case EMBER_K_UNARY_GELU_TANH: store(Act<EMBER_K_UNARY_GELU_TANH>{}); break;
    case EMBER_K_UNARY_SIGMOID: store(Act<EMBER_K_UNARY_SIGMOID>{}); break;
    case EMBER_K_UNARY_TANH: store(Act<EMBER_K_UNARY_TANH>{}); break;
    case EMBER_K_UNARY_SILU: store(Act<EMBER_K_UNARY_SILU>{}); break;
    default: store(Act<EMBER_K_UNARY_IDENTITY>{}); break;
  }
}

/* Writes a warpgroup's 64 rows (from row0) by BN columns (from n0) of y from its tile in
 * shared memory, applying activation kAct: 16 bytes (8 columns) a thread at a time, a
 * row's BN / 8 vectors by consecutive threads. A tile wholly inside y takes a loop without
 * bounds tests, 4 vectors at a time, whose loads, arithmetic and stores the compiler
 * interleaves (with a test per vector it kept to one vector at a time): the MLP at batch
 * 4096, four erf GELU epilogues, took 73.3-73.9 us against 74.2-74.9 with the tests (an
 * H100, same call; 2 vectors at a time 74.0-74.9, 8 73.7-75.1). */
template <typename T, int BN, int kAct>
__device__ __forceinline__ void store_gemm_tile(const ember_k_linear_tma_params& p,
                                                const uint16_t* tile, int row0, int n0) {
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const int thread = threadIdx.x & 127;
  constexpr int kRowVectors = BN / 8;
  constexpr int kOutStride = GemmColumns<BN>::kOutStride;
  if (row0 + 64 <= p.rows && n0 + BN <= p.n) {
#pragma unroll 4
    for (int v = thread; v < 64 * kRowVectors; v += 128) {
      const int r = v / kRowVectors, c = (v % kRowVectors) * 8;
      store_gemm_vector<T, kAct>(tile + r * kOutStride + c,
                                 y + (int64_t)(row0 + r) * p.n + n0 + c);
    }
    return;
  }
#pragma unroll 2
  for (int v = thread; v < 64 * kRowVectors; v += 128) {
    const int r = v / kRowVectors, c = (v % kRowVectors) * 8;
    if (row0 + r >= p.rows || n0 + c >= p.n) continue;
    store_gemm_vector<T, kAct>(tile + r * kOutStride + c,
                               y + (int64_t)(row0 + r) * p.n + n0 + c);
  }
}

/* A consumer warpgroup's MMAs of one tile over k_tiles K tiles, the ring's uses first ..
 * first + k_tiles - 1 (use u in stage u % STAGES, its full barrier's phase u / STAGES):
 * each stage goes back to the producer (an arrival per warp on its empty barrier) once
 * the MMAs after it are issued and its own have completed (wgmma.wait_group 1), but the
 * last `kept` uses' stages, which the caller still needs. */
template <typename T, int BN, typename Full, typename Empty>
__device__ __forceinline__ void gemm_wgmma_mmas(float (&acc)[BN / 2], uint32_t ring, int group,
                                                int lane, Full full, Empty empty, int first,
                                                int k_tiles, int kept) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int u = first + kt, s = u % kGemmStages;
    mbarrier_wait(full(s), (uint32_t)((u / kGemmStages) & 1));
    const uint32_t x_tile = ring + (uint32_t)(s * GemmColumns<BN>::kStageBytes);
    const uint32_t a = x_tile + (uint32_t)(group * 64 * 128);
    const uint32_t b = x_tile + (uint32_t)kGemmXBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kGemmBK / 16; ++kk) {
      wgmma_mma<T, BN>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
    }
    wgmma_commit();
    wgmma_wait<1>(); /* the MMAs of tile kt - 1 have read their stage */
    /* lane r: the block of rank r's barrier */
    if (kt > 0 && kt - 1 < k_tiles - kept && lane < kGemmCluster) {
      const uint32_t released = empty((u - 1) % kGemmStages);
      if constexpr (kGemmCluster > 1) {
        mbarrier_arrive_cluster(released, (uint32_t)lane);
      } else {
        mbarrier_arrive(released);
      }
    }
  }
  wgmma_wait_all();
  fence_accumulators(acc);
}

/* Accumulator 4j + e: row 64·group + 16·warp + lane / 4 (+8 for e >= 2), column
 * 8j + 2·(lane % 4) + e % 2: each (j, e / 2) is one 8 x 8 fragment of stmatrix's layout.
 * Biased (bias_tile: the tile's BN columns in float32) and rounded (the unfused LINEAR's
 * stored output) into the warpgroup's 64 rows at `tile`, four fragments a stmatrix: rows
 * of BN + 8 elements, so that a fragment's 8 rows fall on distinct banks. */
template <typename T, int BN>
__device__ __forceinline__ void stage_gemm_tile(const float (&acc)[BN / 2], const float* bias_tile,
                                                uint16_t* tile, int warp, int lane) {
  constexpr int kOutStride = GemmColumns<BN>::kOutStride;
  /* This thread's row address for stmatrix: fragment lane / 8 = (column group j + f / 2,
   * rows + 8 for odd f), row lane % 8 of it. */
  const int fragment = lane >> 3;
  const uint32_t row_address =
      shared_address(tile + (16 * warp + (lane & 7) + 8 * (fragment & 1)) * kOutStride +
                     8 * (fragment >> 1));
#pragma unroll
  for (int j = 0; j < BN / 8; j += 2) {
    uint32_t pairs[4];
#pragma unroll
    for (int f = 0; f < 4; ++f) {
      const int jj = j + (f >> 1), e = 2 * (f & 1);
      const float2 b = *reinterpret_cast<const float2*>(bias_tile + 8 * jj + 2 * (lane & 3));
      pairs[f] = Mma<T>::pack(acc[4 * jj + e] + b.x, acc[4 * jj + e + 1] + b.y);
    }
    stmatrix_x4(row_address + (uint32_t)(j * 8 * 2), pairs);
  }
}

/* A consumer warpgroup's epilogue of its tile's rows: once both consumer warpgroups are
 * done with their MMAs and the bias warps with `bias_tile` (barrier 1; the other
 * warpgroup's last MMAs may still read the stages underneath `tile`), staged into `tile`
 * (its own 64 rows), then stored from there with y's activation (after the warpgroup's own
 * barrier, 2 or 3; 0 is __syncthreads'). */
template <typename T, int BN>
__device__ __forceinline__ void finish_gemm_tile(const float (&acc)[BN / 2],
                                                 const float* bias_tile, uint16_t* tile,
                                                 const ember_k_linear_tma_params& p, int m0,
                                                 int n0) {
  const int tid = threadIdx.x;
  const int group = (tid >> 7) - 1, warp = (tid >> 5) & 3, lane = tid & 31;
  asm volatile("bar.sync 1, %0;\n" ::"n"(kGemmEpilogueThreads) : "memory");
  stage_gemm_tile<T, BN>(acc, bias_tile, tile, warp, lane);
  asm volatile("bar.sync %0, 128;\n" ::"r"(group + 2) : "memory");
  with_activation(p.act, [&](auto act) {
    store_gemm_tile<T, BN, decltype(act)::kValue>(p, tile, m0 + 64 * group, n0);
  });
}

/* The bias warps' part (the producer's warps 1-3): the tile's bias in float32 for the
 * epilogue, zeros past n or without one. */
template <typename T, int BN>
__device__ __forceinline__ void load_bias_tile(const ember_k_linear_tma_params& p,
                                               float* bias_tile, int n0) {
  const uint16_t* bias = reinterpret_cast<const uint16_t*>(p.bias);
  for (int c = (int)threadIdx.x - 32; c < BN; c += 96) {
    bias_tile[c] = p.has_bias && n0 + c < p.n ? Bits<T>::to_float(bias[n0 + c]) : 0.0f;
  }
}

/* The consumer warpgroups' part: the MMAs over every K tile, then the epilogue. */
template <typename T, int BN, typename Full, typename Empty>
__device__ __forceinline__ void gemm_wgmma_consume(const ember_k_gemm_wgmma_params& p,
                                                   uint8_t* smem, const float* bias_tile,
                                                   Full full, Empty empty, int m0, int n0) {
  constexpr int kOutStride = GemmColumns<BN>::kOutStride;
  const int tid = threadIdx.x;
  const int group = (tid >> 7) - 1, lane = tid & 31;
  float acc[BN / 2];
  gemm_wgmma_mmas<T, BN>(acc, shared_address(smem), group, lane, full, empty, 0, p.k_tiles, 1);
  /* The tile goes into the ring's first stages. */
  finish_gemm_tile<T, BN>(acc, bias_tile,
                          reinterpret_cast<uint16_t*>(smem) + group * 64 * kOutStride, p.linear,
                          m0, n0);
}

/* The producer's first act: have the tensor maps fetched while the barriers settle. */
__device__ __forceinline__ void prefetch_linear_maps(const ember_k_linear_tma_params& p) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(&p.x_map) : "memory");
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(&p.w_map) : "memory");
}

/* The producer's copies of w's tile for K tile kt into stage memory x_tile (after x's),
 * counted by barrier `bar`: all of it, or with clusters this block's share of it into
 * every block of the cluster. */
template <int BN>
__device__ __forceinline__ void copy_w_tile(const ember_k_gemm_wgmma_params& p, uint32_t x_tile,
                                            int kt, int n0, uint32_t rank, uint32_t bar) {
  if constexpr (kGemmCluster > 1) {
    constexpr int kShare = BN / kGemmCluster;
    tma_load_2d_multicast(x_tile + (uint32_t)(kGemmXBytes + (int)rank * kShare * 128),
                          &p.linear.w_map, kt * kGemmBK, n0 + (int)rank * kShare, bar,
                          (uint16_t)((1u << kGemmCluster) - 1u));
  } else {
    (void)rank;
    tma_load_2d(x_tile + (uint32_t)kGemmXBytes, &p.linear.w_map, kt * kGemmBK, n0, bar);
  }
}

/* The producer's one thread: every K tile's copies into the ring. With constant operands
 * the first stages' w copies go out before the previous kernel has finished (PDL), x's
 * only after: that kernel may be what writes x. */
template <int BN, typename Full, typename Empty>
__device__ __forceinline__ void gemm_wgmma_produce(const ember_k_gemm_wgmma_params& p,
                                                   uint32_t ring, Full full, Empty empty, int m0,
                                                   int n0, uint32_t rank) {
  constexpr int kStageBytes = GemmColumns<BN>::kStageBytes;
  prefetch_linear_maps(p.linear);
  const int early = p.linear.constant_operands ? min(kGemmStages, p.k_tiles) : 0;
  for (int kt = 0; kt < early; ++kt) {
    mbarrier_expect_tx(full(kt), (uint32_t)kStageBytes);
    copy_w_tile<BN>(p, ring + (uint32_t)(kt * kStageBytes), kt, n0, rank, full(kt));
  }
  wait_previous_grid();
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    const int s = kt % kGemmStages;
    const uint32_t x_tile = ring + (uint32_t)(s * kStageBytes);
    if (kt >= early) {
      /* Use u of a stage waits for the consumers' release of use u - 1 (in every block of
       * the cluster: this block's copies land in all of them), the u-th phase of its empty
       * barrier; the first use of each waits for nothing. */
      if (kt >= kGemmStages) mbarrier_wait(empty(s), (uint32_t)((kt / kGemmStages - 1) & 1));
      mbarrier_expect_tx(full(s), (uint32_t)kStageBytes);
      copy_w_tile<BN>(p, x_tile, kt, n0, rank, full(s));
    }
    tma_load_2d(x_tile, &p.linear.x_map, kt * kGemmBK, m0, full(s));
  }
}

template <typename T, int BN>
__device__ __forceinline__ void gemm_wgmma(const ember_k_gemm_wgmma_params& p, uint8_t* smem) {
  constexpr int kStageBytes = GemmColumns<BN>::kStageBytes;
  const int tid = threadIdx.x, warpgroup = tid >> 7;
  /* Blocks of a cluster share a column tile and take consecutive row tiles. */
  const uint32_t rank = kGemmCluster > 1 ? cluster_rank() : 0u;
  const uint32_t pair = blockIdx.x / (uint32_t)kGemmCluster;
  const int n0 = (int)(pair % (uint32_t)p.n_tiles) * BN;
  const int m0 = (int)((pair / (uint32_t)p.n_tiles) * (uint32_t)kGemmCluster + rank) * kGemmBM;
  const uint32_t ring = shared_address(smem);
  const uint32_t bars = ring + (uint32_t)(kGemmStages * kStageBytes);
  float* bias_tile = reinterpret_cast<float*>(smem + kGemmStages * kStageBytes + kGemmBarrierBytes);
  auto full = [&](int s) { return bars + (uint32_t)(8 * s); };
  auto empty = [&](int s) { return bars + (uint32_t)(8 * (kGemmStages + s)); };
  if (tid == 0) {
    for (int s = 0; s < kGemmStages; ++s) {
      mbarrier_init(full(s), 1);
      mbarrier_init(empty(s), kGemmConsumerWarps * kGemmCluster);
    }
    fence_mbarrier_init();
  }
  if constexpr (kGemmCluster > 1) {
    cluster_sync(); /* no block copies into, or arrives at, another's barriers before init */
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      gemm_wgmma_produce<BN>(p, ring, full, empty, m0, n0, rank);
    } else if (tid >= 32) {
      if (!p.linear.constant_operands) wait_previous_grid();
      load_bias_tile<T, BN>(p.linear, bias_tile, n0);
      asm volatile("bar.arrive 1, %0;\n" ::"n"(kGemmEpilogueThreads) : "memory");
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    wait_previous_grid(); /* y may be memory the previous kernel reads */
    gemm_wgmma_consume<T, BN>(p, smem, bias_tile, full, empty, m0, n0);
  }
  /* No block leaves while another may still arrive at its barriers. */
  if constexpr (kGemmCluster > 1) cluster_sync();
}

template <typename T, int BN>
__device__ __forceinline__ void gemm_wgmma_entry(const ember_k_gemm_wgmma_params& p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  gemm_wgmma<T, BN>(p, swizzle_aligned_shared()); /* EMBER_K_GEMM_WGMMA_SMEM_BYTES */
#else
  (void)p;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

/* ---- the chain: LINEARs one after another in one persistent kernel ------------------- */

/* ember_k_gemm_chain_params has the contract. A block is gemm_wgmma's, looping over the
 * tiles it takes. Its producer thread takes a ticket, tells the block the tile (a slot of
 * two in shared memory, one barrier each), copies w's first kChainEarly K tiles, then,
 * for a tile past the first layer, waits until every tile of its rows in the layer before
 * has arrived, and copies x's. The consumers run the MMAs, put the tile into the ring's
 * last two stages (kept from the producer until the epilogue is done), store it with the
 * activation, count their arrival at the tile's rows, and give the two stages back. The
 * bias warps write each tile's bias into one of two tiles in turn. */
constexpr int kChainBN = EMBER_K_GEMM_WGMMA_BN;
constexpr int kChainStageBytes = GemmColumns<kChainBN>::kStageBytes;
constexpr int kChainTileOffset = (kGemmStages - 2) * kChainStageBytes;
constexpr int kChainEarly = 2;
static_assert(kGemmCluster == 1, "the chain's blocks are not clustered");
static_assert(2 * 64 * GemmColumns<kChainBN>::kOutStride * 2 <= 2 * kChainStageBytes,
              "the epilogue's tile fits in the ring's last two stages");
static_assert(kGemmStages * kChainStageBytes + kGemmStages * 16 + 2 * 8 + 2 * kChainBN * 4 + 8 +
                      1024 <= EMBER_K_GEMM_CHAIN_SMEM_BYTES,
              "within the host's size");

/* Tile t of the chain (tickets count the first layer's tiles, then the second's): its
 * layer and first row and column. False past the last. */
__device__ __forceinline__ bool chain_tile(const ember_k_gemm_chain_params& p, int t, int* layer,
                                           int* m0, int* n0) {
  if (t < 0) return false;
  for (int l = 0; l < p.layers; ++l) {
    const int tiles = p.m_tiles * p.layer[l].n_tiles;
    if (t < tiles) {
      *layer = l;
      *m0 = t / p.layer[l].n_tiles * kGemmBM;
      *n0 = t % p.layer[l].n_tiles * kChainBN;
      return true;
    }
    t -= tiles;
  }
  return false;
}

/* The tile of job `job` from the producer (slot job % 2, its barrier's phase job / 2), as
 * chain_tile: false when the tickets have run out. */
__device__ __forceinline__ bool next_chain_tile(const ember_k_gemm_chain_params& p,
                                                uint32_t jobs_full, const volatile int* jobs,
                                                int job, int* layer, int* m0, int* n0) {
  mbarrier_wait(jobs_full + 8u * (uint32_t)(job & 1), (uint32_t)((job >> 1) & 1));
  return chain_tile(p, jobs[job & 1], layer, m0, n0);
}

/* The arrivals at row tile m of layer l's output. */
__device__ __forceinline__ int* chain_rows_count(const ember_k_gemm_chain_params& p, int l,
                                                 int m0) {
  return reinterpret_cast<int*>(p.counts) + 2 + l * p.m_tiles + m0 / kGemmBM;
}

/* Spins until *count reaches target (acquire: the stores the arrivals published are
 * visible after), then orders the async proxy's reads (the x copies) after them. */
__device__ __forceinline__ void wait_arrivals(const int* count, int target) {
  int seen;
  for (;;) {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(count) : "memory");
    if (seen >= target) break;
    __nanosleep(32);
  }
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

template <typename Full, typename Empty>
__device__ __forceinline__ void gemm_chain_produce(const ember_k_gemm_chain_params& p,
                                                   uint32_t ring, Full full, Empty empty,
                                                   uint32_t jobs_full, int* jobs) {
  for (int l = 0; l < p.layers; ++l) prefetch_linear_maps(p.layer[l].linear);
  bool waited = false; /* for the kernel before (PDL) */
  int use = 0;         /* of the ring, over every tile so far */
  for (int job = 0;; ++job) {
    int layer = 0, m0 = 0, n0 = 0;
    int t = atomicAdd(reinterpret_cast<int*>(p.counts), 1);
    if (!chain_tile(p, t, &layer, &m0, &n0)) t = -1;
    jobs[job & 1] = t;
    mbarrier_arrive(jobs_full + 8u * (uint32_t)(job & 1));
    if (t < 0) return;
    const ember_k_gemm_wgmma_params& g = p.layer[layer];
    if (!waited && !g.linear.constant_operands) {
      wait_previous_grid();
      waited = true;
    }
    /* Use u of a stage waits for the consumers' release of use u - STAGES. */
    auto claim = [&](int kt) {
      const int u = use + kt, s = u % kGemmStages;
      if (u >= kGemmStages) mbarrier_wait(empty(s), (uint32_t)((u / kGemmStages - 1) & 1));
      mbarrier_expect_tx(full(s), (uint32_t)kChainStageBytes);
      copy_w_tile<kChainBN>(g, ring + (uint32_t)(s * kChainStageBytes), kt, n0, 0, full(s));
    };
    const int early = min(kChainEarly, g.k_tiles);
    for (int kt = 0; kt < early; ++kt) claim(kt);
    if (!waited) {
      wait_previous_grid();
      waited = true;
    }
    if (layer > 0) wait_arrivals(chain_rows_count(p, layer - 1, m0), 2 * p.layer[layer - 1].n_tiles);
    for (int kt = 0; kt < g.k_tiles; ++kt) {
      if (kt >= early) claim(kt);
      const int s = (use + kt) % kGemmStages;
      tma_load_2d(ring + (uint32_t)(s * kChainStageBytes), &g.linear.x_map, kt * kGemmBK, m0,
                  full(s));
    }
    use += g.k_tiles;
  }
}

template <typename T, typename Full, typename Empty>
__device__ __forceinline__ void gemm_chain_consume(const ember_k_gemm_chain_params& p,
                                                   uint8_t* smem, const float* bias_tiles,
                                                   Full full, Empty empty, uint32_t jobs_full,
                                                   const volatile int* jobs) {
  constexpr int kOutStride = GemmColumns<kChainBN>::kOutStride;
  const int tid = threadIdx.x;
  const int group = (tid >> 7) - 1, lane = tid & 31;
  uint16_t* tile = reinterpret_cast<uint16_t*>(smem + kChainTileOffset) + group * 64 * kOutStride;
  wait_previous_grid(); /* y may be memory the previous kernel reads */
  int use = 0;
  for (int job = 0;; ++job) {
    int layer = 0, m0 = 0, n0 = 0;
    if (!next_chain_tile(p, jobs_full, jobs, job, &layer, &m0, &n0)) return;
    const ember_k_gemm_wgmma_params& g = p.layer[layer];
    float acc[kChainBN / 2];
    gemm_wgmma_mmas<T, kChainBN>(acc, shared_address(smem), group, lane, full, empty, use,
                                 g.k_tiles, 2);
    finish_gemm_tile<T, kChainBN>(acc, bias_tiles + (job & 1) * kChainBN, tile, g.linear, m0,
                                  n0);
    if (layer + 1 < p.layers) { /* the warpgroup's rows, for the next layer's tiles */
      __threadfence();
      asm volatile("bar.sync %0, 128;\n" ::"r"(group + 2) : "memory");
      if ((tid & 127) == 0) atomicAdd(chain_rows_count(p, layer, m0), 1);
    }
    /* The stages under the tile, back to the producer: the warp's reads and writes of
     * them ordered before the copies that will land there (the async proxy). */
    fence_proxy_async();
    __syncwarp();
    if (lane == 0) {
      mbarrier_arrive(empty((use + g.k_tiles - 2) % kGemmStages));
      mbarrier_arrive(empty((use + g.k_tiles - 1) % kGemmStages));
    }
    use += g.k_tiles;
  }
}

/* The producer's warps 1-3: each tile's bias in float32, zeros past n or without one, into
 * bias_tiles' tile (job % 2); barrier 1 with the consumers, who read it after. */
template <typename T>
__device__ __forceinline__ void gemm_chain_bias(const ember_k_gemm_chain_params& p,
                                                float* bias_tiles, uint32_t jobs_full,
                                                const volatile int* jobs) {
  bool waited = false;
  for (int job = 0;; ++job) {
    int layer = 0, m0 = 0, n0 = 0;
    if (!next_chain_tile(p, jobs_full, jobs, job, &layer, &m0, &n0)) return;
    const ember_k_linear_tma_params& g = p.layer[layer].linear;
    if (!waited && !g.constant_operands) {
      wait_previous_grid();
      waited = true;
    }
    load_bias_tile<T, kChainBN>(g, bias_tiles + (job & 1) * kChainBN, n0);
    asm volatile("bar.sync 1, %0;\n" ::"n"(kGemmEpilogueThreads) : "memory");
  }
}

template <typename T>
__device__ __forceinline__ void gemm_chain(const ember_k_gemm_chain_params& p, uint8_t* smem) {
  const int tid = threadIdx.x, warpgroup = tid >> 7;
  const uint32_t ring = shared_address(smem);
  const uint32_t bars = ring + (uint32_t)(kGemmStages * kChainStageBytes);
  const uint32_t jobs_full = bars + (uint32_t)(16 * kGemmStages);
  float* bias_tiles =
      reinterpret_cast<float*>(smem + kGemmStages * kChainStageBytes + 16 * kGemmStages + 16);
  int* jobs = reinterpret_cast<int*>(bias_tiles + 2 * kChainBN);
  auto full = [&](int s) { return bars + (uint32_t)(8 * s); };
  auto empty = [&](int s) { return bars + (uint32_t)(8 * (kGemmStages + s)); };
  if (tid == 0) {
    for (int s = 0; s < kGemmStages; ++s) {
      mbarrier_init(full(s), 1);
      mbarrier_init(empty(s), kGemmConsumerWarps);
    }
    mbarrier_init(jobs_full, 1);
    mbarrier_init(jobs_full + 8u, 1);
    fence_mbarrier_init();
  }
  __syncthreads();
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      gemm_chain_produce(p, ring, full, empty, jobs_full, jobs);
    } else if (tid >= 32) {
      gemm_chain_bias<T>(p, bias_tiles, jobs_full, jobs);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    gemm_chain_consume<T>(p, smem, bias_tiles, full, empty, jobs_full, jobs);
  }
  /* The last block out sets the counts back to zero for the next launch: every other has
   * taken its last ticket and passed its last wait. */
  __syncthreads();
  if (tid == 0) {
    int* counts = reinterpret_cast<int*>(p.counts);
    __threadfence();
    if (atomicAdd(counts + 1, 1) == (int)gridDim.x - 1) {
      for (int i = 0; i < 2 + (p.layers - 1) * p.m_tiles; ++i) counts[i] = 0;
    }
  }
}

template <typename T>
__device__ __forceinline__ void gemm_chain_entry(const ember_k_gemm_chain_params& p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  gemm_chain<T>(p, swizzle_aligned_shared()); /* EMBER_K_GEMM_CHAIN_SMEM_BYTES */
#else
  (void)p;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

/* ---- the narrow form: few rows of x as wgmma's N (ember_k_gemm_narrow_params) ---------- */

constexpr int kNarrowBM = EMBER_K_GEMM_NARROW_BM;
constexpr int kNarrowBK = EMBER_K_GEMM_NARROW_BK;
constexpr int kNarrowWBoxBytes = kNarrowBM * kNarrowBK * 2;
constexpr int kNarrowMaxStages = EMBER_K_GEMM_NARROW_MAX_STAGES;
static_assert(kNarrowBK * 2 == 128 && kNarrowBM == 64,
              "a K tile is one 128-byte swizzle row; w's 64 rows are wgmma's M");
static_assert(EMBER_K_GEMM_NARROW_RING_BYTES + kNarrowMaxStages * 16 + 1024 ==
                  EMBER_K_GEMM_NARROW_SMEM_BYTES,
              "the host's size");
static_assert(EMBER_K_GEMM_NARROW_THREADS == 160, "a consumer warpgroup and a producer warp");
constexpr int kNarrowOutStride = kNarrowBM + 8; /* elements between rows of the epilogue's tile */

/* Writes the narrow form's tile (R rows of y from m0, 64 columns from n0, rows
 * kNarrowOutStride apart) with activation kAct, 16 bytes a thread: consecutive threads
 * along a row of y; rows and columns past y's left out (n is a multiple of 8). */
template <typename T, int R, int kAct>
__device__ __forceinline__ void store_narrow_tile(const ember_k_linear_tma_params& p,
                                                  const uint16_t* tile, int m0, int n0) {
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  constexpr int kRowVectors = kNarrowBM / 8;
#pragma unroll 4
  for (int v = threadIdx.x; v < R * kRowVectors; v += 128) {
    const int r = v / kRowVectors, c = (v % kRowVectors) * 8;
    if (m0 + r >= p.rows || n0 + c >= p.n) continue;
    store_gemm_vector<T, kAct>(tile + r * kNarrowOutStride + c,
                               y + (int64_t)(m0 + r) * p.n + n0 + c);
  }
}

/* The consumer warpgroup: the MMAs over every stage, then the epilogue. D = w_tile · x_tileᵀ,
 * so accumulator 4j + e is output column (of y) 16·warp + lane / 4 (+8 for e >= 2) of the
 * block's 64 and row 8j + 2·(lane % 4) + e % 2 of its R: transposed through shared memory
 * on the way out, so that y's rows are written 16 bytes a thread. */
template <typename T, int R, int kBoxes>
__device__ __forceinline__ void gemm_narrow_consume(const ember_k_gemm_narrow_params& p,
                                                    uint8_t* smem, uint32_t full0,
                                                    uint32_t empty0, int m0, int n0) {
  constexpr int kXBoxBytes = R * kNarrowBK * 2;
  constexpr int kStageBytes = kBoxes * (kNarrowWBoxBytes + kXBoxBytes);
  const uint32_t ring = shared_address(smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  /* The bias of this thread's two output columns, read before the MMAs so that its load
   * is not the epilogue's wait; a bias a kernel of the run writes only after the wait. */
  const int col = 16 * warp + (lane >> 2);
  float bias_lo = 0.0f, bias_hi = 0.0f;
  if (!p.linear.constant_operands) wait_previous_grid();
  if (p.linear.has_bias) {
    const uint16_t* bias = reinterpret_cast<const uint16_t*>(p.linear.bias);
    if (n0 + col < p.linear.n) bias_lo = Bits<T>::to_float(bias[n0 + col]);
    if (n0 + col + 8 < p.linear.n) bias_hi = Bits<T>::to_float(bias[n0 + col + 8]);
  }
  wait_previous_grid(); /* y may be memory the previous kernel reads */
  float acc[R / 2];
#pragma unroll
  for (int i = 0; i < R / 2; ++i) acc[i] = 0.0f;
  int s = 0;
  uint32_t phase = 0;
  for (int st = 0; st < p.k_stages; ++st) {
    mbarrier_wait(full0 + 8u * (uint32_t)s, phase);
    const uint32_t w_box = ring + (uint32_t)(s * kStageBytes);
    const uint32_t x_box = w_box + (uint32_t)(kBoxes * kNarrowWBoxBytes);
    wgmma_fence();
    /* Every stage runs the same MMAs: a wgmma under a branch makes ptxas serialize all of
     * the kernel's (its advisory C7520), so the host picks B dividing the K tiles. */
#pragma unroll
    for (int b = 0; b < kBoxes; ++b) {
#pragma unroll
      for (int kk = 0; kk < kNarrowBK / 16; ++kk) {
        wgmma_mma<T, R>(acc, wgmma_descriptor(w_box + (uint32_t)(b * kNarrowWBoxBytes + kk * 32)),
                        wgmma_descriptor(x_box + (uint32_t)(b * kXBoxBytes + kk * 32)));
      }
    }
    wgmma_commit();
    wgmma_wait<1>(); /* the MMAs of the stage before have read it */
    if (st > 0 && lane == 0) {
      mbarrier_arrive(empty0 + 8u * (uint32_t)(s == 0 ? p.stages - 1 : s - 1));
    }
    if (++s == p.stages) {
      s = 0;
      phase ^= 1u;
    }
  }
  wgmma_wait_all();
  fence_accumulators(acc);

  /* Biased and rounded (the unfused LINEAR's stored output) into a tile of R rows of y by
   * 64 columns at the ring's start: every copy has landed and every MMA has read its
   * stage, once all four warps are here. */
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
  uint16_t* tile = reinterpret_cast<uint16_t*>(smem);
#pragma unroll
  for (int j = 0; j < R / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = 8 * j + 2 * (lane & 3) + (e & 1), c = col + 8 * (e >> 1);
      const float value = acc[4 * j + e] + (e >= 2 ? bias_hi : bias_lo);
      tile[row * kNarrowOutStride + c] = Bits<T>::from_float(value);
    }
  }
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
  /* 8 vectors of 8 columns a row of the tile, consecutive threads along a row of y. */
  with_activation(p.linear.act, [&](auto act) {
    store_narrow_tile<T, R, decltype(act)::kValue>(p.linear, tile, m0, n0);
  });
}

/* The producer's copies of stage st's B boxes of w to `stage`, counted by barrier `full`. */
template <int kBoxes>
__device__ __forceinline__ void copy_w_boxes(const ember_k_gemm_narrow_params& p, uint32_t stage,
                                             int st, int n0, uint32_t full) {
  for (int b = 0; b < kBoxes; ++b) {
    tma_load_2d(stage + (uint32_t)(b * kNarrowWBoxBytes), &p.linear.w_map,
                (st * kBoxes + b) * kNarrowBK, n0, full);
  }
}

/* The producer's one thread: B boxes of w and of x a stage. With constant operands the
 * first stages' w boxes go out before the previous kernel has finished (PDL), x's only
 * after: that kernel may be what writes x. */
template <int R, int kBoxes>
__device__ __forceinline__ void gemm_narrow_produce(const ember_k_gemm_narrow_params& p,
                                                    uint32_t ring, uint32_t full0,
                                                    uint32_t empty0, int m0, int n0) {
  constexpr int kXBoxBytes = R * kNarrowBK * 2;
  constexpr int kStageBytes = kBoxes * (kNarrowWBoxBytes + kXBoxBytes);
  prefetch_linear_maps(p.linear);
  const int early = p.linear.constant_operands ? min(p.stages, p.k_stages) : 0;
  for (int st = 0; st < early; ++st) {
    const uint32_t full = full0 + 8u * (uint32_t)st, stage = ring + (uint32_t)(st * kStageBytes);
    mbarrier_expect_tx(full, (uint32_t)kStageBytes);
    copy_w_boxes<kBoxes>(p, stage, st, n0, full);
  }
  wait_previous_grid();
  int s = 0;
  uint32_t phase = 0;
  for (int st = 0; st < p.k_stages; ++st) {
    const uint32_t full = full0 + 8u * (uint32_t)s, stage = ring + (uint32_t)(s * kStageBytes);
    if (st >= early) {
      /* Use u of a stage waits for the consumers' release of use u - 1 (the u-th phase of
       * its empty barrier); the first use of each waits for nothing. */
      if (st >= p.stages) mbarrier_wait(empty0 + 8u * (uint32_t)s, phase ^ 1u);
      mbarrier_expect_tx(full, (uint32_t)kStageBytes);
      copy_w_boxes<kBoxes>(p, stage, st, n0, full);
    }
    for (int b = 0; b < kBoxes; ++b) {
      tma_load_2d(stage + (uint32_t)(kBoxes * kNarrowWBoxBytes + b * kXBoxBytes), &p.linear.x_map,
                  (st * kBoxes + b) * kNarrowBK, m0, full);
    }
    if (++s == p.stages) {
      s = 0;
      phase ^= 1u;
    }
  }
}

template <typename T, int R, int kBoxes>
__device__ __forceinline__ void gemm_narrow(const ember_k_gemm_narrow_params& p, uint8_t* smem) {
  const int tid = threadIdx.x;
  const int n0 = (int)(blockIdx.x % (uint32_t)p.n_tiles) * kNarrowBM;
  const int m0 = (int)(blockIdx.x / (uint32_t)p.n_tiles) * R;
  const uint32_t ring = shared_address(smem);
  const uint32_t full0 = ring + (uint32_t)EMBER_K_GEMM_NARROW_RING_BYTES;
  const uint32_t empty0 = full0 + 8u * (uint32_t)kNarrowMaxStages;
  if (tid == 0) {
    for (int s = 0; s < p.stages; ++s) {
      mbarrier_init(full0 + 8u * (uint32_t)s, 1);
      mbarrier_init(empty0 + 8u * (uint32_t)s, 4); /* an arrival per consumer warp */
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (tid < 128) {
    gemm_narrow_consume<T, R, kBoxes>(p, smem, full0, empty0, m0, n0);
  } else if (tid == 128) {
    gemm_narrow_produce<R, kBoxes>(p, ring, full0, empty0, m0, n0);
  }
}

template <typename T, int R, int kBoxes>
__device__ __forceinline__ void gemm_narrow_entry(const ember_k_gemm_narrow_params& p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  gemm_narrow<T, R, kBoxes>(p, swizzle_aligned_shared()); /* EMBER_K_GEMM_NARROW_SMEM_BYTES */
#else
  (void)p;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

}  // namespace ember

/* __grid_constant__: the tensor maps are read by the TMA where the launch put them. The
 * cluster size is the kernel's own, so a plain launch (and a graph's kernel node) makes
 * clusters. */
#define EMBER_GEMM_WGMMA_KERNEL(name, bn, suffix, type)                                     \
  extern "C" __global__ void __launch_bounds__(EMBER_K_GEMM_WGMMA_THREADS, 1)              \
      __cluster_dims__(EMBER_K_GEMM_WGMMA_CLUSTER, 1, 1)                                   \
      name##_##suffix(const __grid_constant__ ember_k_gemm_wgmma_params p) {               \
    ember::allow_next_grid(); /* the waits are gemm_wgmma's: w is copied before them */   \
    ember::gemm_wgmma_entry<type, bn>(p);                                                  \
  }
EMBER_GEMM_WGMMA_KERNEL(ember_gemm_wgmma, EMBER_K_GEMM_WGMMA_BN, f16, __half)
EMBER_GEMM_WGMMA_KERNEL(ember_gemm_wgmma, EMBER_K_GEMM_WGMMA_BN, bf16, __nv_bfloat16)
EMBER_GEMM_WGMMA_KERNEL(ember_gemm_wgmma192, EMBER_K_GEMM_WGMMA_BN_SMALL, f16, __half)
EMBER_GEMM_WGMMA_KERNEL(ember_gemm_wgmma192, EMBER_K_GEMM_WGMMA_BN_SMALL, bf16, __nv_bfloat16)

#define EMBER_GEMM_CHAIN_KERNEL(suffix, type)                                              \
  extern "C" __global__ void __launch_bounds__(EMBER_K_GEMM_WGMMA_THREADS, 1)              \
      ember_gemm_chain_##suffix(const __grid_constant__ ember_k_gemm_chain_params p) {     \
    ember::allow_next_grid(); /* the waits are gemm_chain's: w is copied before them */   \
    ember::gemm_chain_entry<type>(p);                                                      \
  }
EMBER_GEMM_CHAIN_KERNEL(f16, __half)
EMBER_GEMM_CHAIN_KERNEL(bf16, __nv_bfloat16)

/* The narrow form by R (rows of x a block) and B (K tiles a stage): cuda_kernels.c's table
 * lists the same, in order. */
#define EMBER_GEMM_NARROW_KERNEL(rows, boxes, suffix, type)                                 \
  extern "C" __global__ void __launch_bounds__(EMBER_K_GEMM_NARROW_THREADS, 1)              \
      ember_gemm_narrow##rows##_##boxes##_##suffix(                                        \
          const __grid_constant__ ember_k_gemm_narrow_params p) {                          \
    ember::allow_next_grid(); /* the waits are gemm_narrow's: w is copied before them */   \
    ember::gemm_narrow_entry<type, rows, boxes>(p);                                        \
  }
#define EMBER_GEMM_NARROW_KERNELS(rows, boxes)              \
  EMBER_GEMM_NARROW_KERNEL(rows, boxes, f16, __half)        \
  EMBER_GEMM_NARROW_KERNEL(rows, boxes, bf16, __nv_bfloat16)
EMBER_GEMM_NARROW_KERNELS(16, 1)
EMBER_GEMM_NARROW_KERNELS(16, 2)
EMBER_GEMM_NARROW_KERNELS(16, 3)
EMBER_GEMM_NARROW_KERNELS(16, 4)
EMBER_GEMM_NARROW_KERNELS(32, 1)
EMBER_GEMM_NARROW_KERNELS(32, 2)
EMBER_GEMM_NARROW_KERNELS(32, 3)
EMBER_GEMM_NARROW_KERNELS(32, 4)
EMBER_GEMM_NARROW_KERNELS(64, 1)
EMBER_GEMM_NARROW_KERNELS(64, 2)
EMBER_GEMM_NARROW_KERNELS(64, 3)
EMBER_GEMM_NARROW_KERNELS(64, 4)
EMBER_GEMM_NARROW_KERNELS(128, 1)
EMBER_GEMM_NARROW_KERNELS(128, 2)
EMBER_GEMM_NARROW_KERNELS(128, 3)
EMBER_GEMM_NARROW_KERNELS(128, 4)
