/* LINEAR with the activation after it on Hopper's wgmma, fed by the tensor memory
 * accelerator (TMA), float16 and bfloat16: for the activations cuBLASLt's epilogue does
 * not have (GELU's erf form, SIGMOID, TANH, SILU), which would otherwise be a kernel of
 * their own reading and writing the whole output again (the MLP's four erf GELUs at
 * batch 4096). Built for sm_90a only, as conv_wgmma.cu; kernel_params.h
 * (ember_k_gemm_wgmma_params) has the contract.
 *
 * A block of 384 threads computes a 128 x 256 tile of y (rows of x by rows of w), K = 64
 * at a time, through a ring of 4 stages of 48 KB. Warpgroup 0 is the producer: one
 * thread waits for a stage to be empty, then has the TMA copy x's 128 x 64 and w's 256 x
 * 64 tiles into it (128-byte rows with the 128-byte swizzle, the layout wgmma's
 * descriptors name; zeros past the tensors' ends), and the stage's full barrier counts
 * their bytes. Warpgroups 1 and 2 are the consumers, 64 rows each (wgmma's M) by all 256
 * columns (N): each waits for a stage to be full, issues its 4 m64n256k16 MMAs, and once
 * the MMAs of the stage before have completed (wgmma.wait_group 1) releases that one to
 * the producer (an arrival per warp on its empty barrier). The producer gives most of
 * its registers to the consumers (setmaxnreg), who hold 128 accumulators a thread.
 *
 * With EMBER_K_GEMM_WGMMA_CLUSTER 2, blocks pair up on consecutive row tiles of one
 * column tile and each copies half of w's tile into both (TMA multicast; the empty
 * barriers then count both blocks' consumers). On the H200 that was slower, so it is 1.
 *
 * The epilogue adds the bias and rounds to the dtype (the unfused LINEAR's stored
 * output) into shared memory, then applies the activation on the way out, 16 bytes a
 * thread.
 *
 * The executor takes this kernel only with EMBER_CUDA_GEMM_WGMMA=1 (cuda_executor.c
 * uses_gemm_wgmma says why): the activation's arithmetic runs after the MMAs, not beside
 * them, and the MMA loop is slower than cuBLASLt's. */
#include "wgmma.cuh"

namespace ember {

constexpr int kGemmBM = EMBER_K_GEMM_WGMMA_BM;
constexpr int kGemmBN = EMBER_K_GEMM_WGMMA_BN;
constexpr int kGemmBK = EMBER_K_GEMM_WGMMA_BK;
constexpr int kGemmStages = EMBER_K_GEMM_WGMMA_STAGES;
constexpr int kGemmXBytes = kGemmBM * kGemmBK * 2;
constexpr int kGemmStageBytes = (kGemmBM + kGemmBN) * kGemmBK * 2;
static_assert(kGemmBK * 2 == 128, "one K tile is one 128-byte swizzle row");
static_assert(kGemmStageBytes % 1024 == 0 && kGemmXBytes % 1024 == 0,
              "tiles keep the swizzle's alignment");
static_assert(kGemmStages * kGemmStageBytes + kGemmStages * 16 + 1024 ==
                  EMBER_K_GEMM_WGMMA_SMEM_BYTES,
              "the host's size");
static_assert(EMBER_K_GEMM_WGMMA_THREADS == 384 && kGemmBM == 128 && kGemmBN == 256,
              "a producer and two consumer warpgroups of 64 rows by 256 columns");
constexpr uint32_t kGemmConsumerWarps = 8;
constexpr int kGemmOutStride = kGemmBN + 8; /* elements between rows of the epilogue's tile */
static_assert(2 * 64 * kGemmOutStride * 2 <= kGemmStages * kGemmStageBytes,
              "both warpgroups' epilogue tiles fit in the ring");
constexpr int kGemmCluster = EMBER_K_GEMM_WGMMA_CLUSTER;
static_assert(kGemmCluster == 1 || kGemmCluster == 2, "blocks of a cluster sharing w's tile");

/* Writes a warpgroup's 64 rows (from row0) by BN columns (from n0) of y from its tile in
 * shared memory, applying activation kAct: 16 bytes (8 columns) a thread at a time, a
 * row's 32 vectors by consecutive threads. */
template <typename T, int kAct>
__device__ __forceinline__ void store_gemm_tile(const ember_k_gemm_wgmma_params& p,
                                                const uint16_t* tile, int row0, int n0) {
  uint16_t* y = reinterpret_cast<uint16_t*>(p.y);
  const int thread = threadIdx.x & 127;
#pragma unroll 1
  for (int v = thread; v < 64 * (kGemmBN / 8); v += 128) {
    const int r = v / (kGemmBN / 8), c = (v % (kGemmBN / 8)) * 8;
    if (row0 + r >= p.rows || n0 + c >= p.n) continue;
    Vec16<T> out;
    out.raw = *reinterpret_cast<const uint4*>(tile + r * kGemmOutStride + c);
#pragma unroll
    for (int e = 0; e < 8; ++e) out.set(e, activate_as<T>(kAct, out.get(e)));
    *reinterpret_cast<uint4*>(y + (int64_t)(row0 + r) * p.n + n0 + c) = out.raw;
  }
}

/* The consumer warpgroups' part: the MMAs over every K tile, then the epilogue. */
template <typename T, typename Full, typename Empty>
__device__ __forceinline__ void gemm_wgmma_consume(const ember_k_gemm_wgmma_params& p,
                                                   uint8_t* smem, Full full, Empty empty, int m0,
                                                   int n0) {
  const uint32_t ring = shared_address(smem);
  const int tid = threadIdx.x;
  const int group = (tid >> 7) - 1, warp = (tid >> 5) & 3, lane = tid & 31;
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int kt = 0; kt < p.k_tiles; ++kt) {
    const int s = kt % kGemmStages;
    mbarrier_wait(full(s), (uint32_t)((kt / kGemmStages) & 1));
    const uint32_t x_tile = ring + (uint32_t)(s * kGemmStageBytes);
    const uint32_t a = x_tile + (uint32_t)(group * 64 * 128);
    const uint32_t b = x_tile + (uint32_t)kGemmXBytes;
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kGemmBK / 16; ++kk) {
      wgmma_mma<T, 256>(acc, wgmma_descriptor(a + kk * 32), wgmma_descriptor(b + kk * 32));
    }
    wgmma_commit();
    wgmma_wait<1>(); /* the MMAs of tile kt - 1 have read their stage */
    if (kt > 0 && lane == 0) {
      const uint32_t released = empty((kt - 1) % kGemmStages);
      if constexpr (kGemmCluster > 1) {
        for (uint32_t r = 0; r < (uint32_t)kGemmCluster; ++r) mbarrier_arrive_cluster(released, r);
      } else {
        mbarrier_arrive(released);
      }
    }
  }
  wgmma_wait_all();
  fence_accumulators(acc);

  /* Accumulator 4j + e: row 64·group + 16·warp + lane / 4 (+8 for e >= 2), column
   * 8j + 2·(lane % 4) + e % 2. Biased and rounded (the unfused LINEAR's stored output)
   * into this warpgroup's 64 rows of the ring: rows of BN + 8 elements, so that the 8 rows
   * of a warp's pairs fall on distinct banks. Both consumer warpgroups first wait for each
   * other (barrier 1): the other one's last MMAs may still read the stages underneath. */
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
  uint16_t* tile = reinterpret_cast<uint16_t*>(smem) + group * 64 * kGemmOutStride;
  const uint16_t* bias = reinterpret_cast<const uint16_t*>(p.bias);
  const int row = 16 * warp + (lane >> 2);
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int col = 8 * j + 2 * (lane & 3);
    const bool inside = p.has_bias && n0 + col < p.n; /* n is a multiple of 8 */
    const float b0 = inside ? Bits<T>::to_float(bias[n0 + col]) : 0.0f;
    const float b1 = inside ? Bits<T>::to_float(bias[n0 + col + 1]) : 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t pair = Mma<T>::pack(acc[4 * j + 2 * h] + b0, acc[4 * j + 2 * h + 1] + b1);
      *reinterpret_cast<uint32_t*>(tile + (row + 8 * h) * kGemmOutStride + col) = pair;
    }
  }
  /* The warpgroup's own barrier (2 and 3; 0 is __syncthreads'). */
  asm volatile("bar.sync %0, 128;\n" ::"r"(group + 2) : "memory");
  /* One activation's code, chosen once: every activation inlined at each of the 128
   * accumulators made the kernel 40 thousand instructions long, and its warps waited on
   * instruction fetch (4096 x 1024 x 1024: 61 us a GEMM, 20 without the epilogue). */
  switch (p.act) {
    case EMBER_K_UNARY_GELU_ERF: store_gemm_tile<T, EMBER_K_UNARY_GELU_ERF>(p, tile, m0 + 64 * group, n0); break;
    case EMBER_K_UNARY_SIGMOID: store_gemm_tile<T, EMBER_K_UNARY_SIGMOID>(p, tile, m0 + 64 * group, n0); break;
    case EMBER_K_UNARY_TANH: store_gemm_tile<T, EMBER_K_UNARY_TANH>(p, tile, m0 + 64 * group, n0); break;
    case EMBER_K_UNARY_SILU: store_gemm_tile<T, EMBER_K_UNARY_SILU>(p, tile, m0 + 64 * group, n0); break;
    default: store_gemm_tile<T, EMBER_K_UNARY_IDENTITY>(p, tile, m0 + 64 * group, n0); break;
  }
}

template <typename T>
__device__ __forceinline__ void gemm_wgmma(const ember_k_gemm_wgmma_params& p, uint8_t* smem) {
  const int tid = threadIdx.x, warpgroup = tid >> 7;
  /* Blocks of a cluster share a column tile and take consecutive row tiles. */
  const uint32_t rank = kGemmCluster > 1 ? cluster_rank() : 0u;
  const uint32_t pair = blockIdx.x / (uint32_t)kGemmCluster;
  const int n0 = (int)(pair % (uint32_t)p.n_tiles) * kGemmBN;
  const int m0 = (int)((pair / (uint32_t)p.n_tiles) * (uint32_t)kGemmCluster + rank) * kGemmBM;
  const uint32_t ring = shared_address(smem);
  const uint32_t bars = ring + (uint32_t)(kGemmStages * kGemmStageBytes);
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
      for (int kt = 0; kt < p.k_tiles; ++kt) {
        const int s = kt % kGemmStages;
        /* Use u of a stage waits for the consumers' release of use u - 1 (in every block
         * of the cluster: this block's copies land in all of them), the u-th phase of its
         * empty barrier; the first use of each waits for nothing. */
        if (kt >= kGemmStages) mbarrier_wait(empty(s), (uint32_t)((kt / kGemmStages - 1) & 1));
        mbarrier_expect_tx(full(s), (uint32_t)kGemmStageBytes);
        const uint32_t x_tile = ring + (uint32_t)(s * kGemmStageBytes);
        tma_load_2d(x_tile, &p.x_map, kt * kGemmBK, m0, full(s));
        if constexpr (kGemmCluster > 1) {
          /* This block's share of w's tile, into every block of the cluster. */
          constexpr int kShare = kGemmBN / kGemmCluster;
          tma_load_2d_multicast(x_tile + (uint32_t)(kGemmXBytes + (int)rank * kShare * 128), &p.w_map,
                                kt * kGemmBK, n0 + (int)rank * kShare, full(s),
                                (uint16_t)((1u << kGemmCluster) - 1u));
        } else {
          tma_load_2d(x_tile + (uint32_t)kGemmXBytes, &p.w_map, kt * kGemmBK, n0, full(s));
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    gemm_wgmma_consume<T>(p, smem, full, empty, m0, n0);
  }
  /* No block leaves while another may still arrive at its barriers. */
  if constexpr (kGemmCluster > 1) cluster_sync();
}

template <typename T>
__device__ __forceinline__ void gemm_wgmma_entry(const ember_k_gemm_wgmma_params& p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  gemm_wgmma<T>(p, swizzle_aligned_shared()); /* EMBER_K_GEMM_WGMMA_SMEM_BYTES */
#else
  (void)p;
  __trap(); /* built for another target than sm_90a: the host never launches it there */
#endif
}

}  // namespace ember

/* __grid_constant__: the tensor maps are read by the TMA where the launch put them. The
 * cluster size is the kernel's own, so a plain launch (and a graph's kernel node) makes
 * clusters. */
#define EMBER_GEMM_WGMMA_KERNEL(suffix, type)                                               \
  extern "C" __global__ void __launch_bounds__(EMBER_K_GEMM_WGMMA_THREADS, 1)              \
      __cluster_dims__(EMBER_K_GEMM_WGMMA_CLUSTER, 1, 1)                                   \
      ember_gemm_wgmma_##suffix(const __grid_constant__ ember_k_gemm_wgmma_params p) {     \
    ember::begin_after_previous_grid();                                                    \
    ember::gemm_wgmma_entry<type>(p);                                                      \
  }
EMBER_GEMM_WGMMA_KERNEL(f16, __half)
EMBER_GEMM_WGMMA_KERNEL(bf16, __nv_bfloat16)
