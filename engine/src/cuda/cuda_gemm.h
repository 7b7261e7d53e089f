/* LINEAR and MATMUL on cuBLASLt: everything about a GEMM that can be decided once is
 * decided in ember_cuda_gemm_prepare (descriptors, layouts, the epilogue, the algorithm,
 * the workspace it needs); ember_cuda_gemm_enqueue only fills in pointers and calls
 * cublasLtMatmul on the program's stream (eagerly, or while the stream is captured into
 * a graph).
 *
 * Row-major to cuBLASLt's column-major: a row-major [R, C] matrix is a column-major
 * [C, R] one with the same bytes, so y = x·wᵀ (y [M, N]) is computed as the column-major
 * product yᵀ [N, M] = w [N, K] · xᵀ [K, M]: cuBLASLt's A is the weight (transposed when
 * the plan's weight is [N, K]), B is x, D is y, and the bias, of length N, runs along
 * D's rows, which is what CUBLASLT_EPILOGUE_BIAS broadcasts. MATMUL is the same with A = b
 * and B = a.
 *
 * Batches (MATMUL's leading dims, broadcast): when only `a` has them, they fold into M
 * (one GEMM); when both have them whole, or one has none, a strided batch (stride 0 for
 * the one without); anything else (a [2,1,..] with b [1,3,..]) is a loop of single GEMMs
 * over the output's batch positions. */
#ifndef EMBER_SRC_CUDA_CUDA_GEMM_H_
#define EMBER_SRC_CUDA_CUDA_GEMM_H_

#include <stdbool.h>

#include "cublaslt_library.h"
#include "kernel_params.h"
#include "plan.h"

/* How many algorithms a GEMM asks cublasLtMatmulAlgoGetHeuristic for and keeps (in the
 * heuristic's order). */
#define EMBER_CUDA_GEMM_CANDIDATES 8
/* How many of those, the heuristic's first, the executor times at prepare
 * (choose_gemm_algorithms). Timing a candidate costs more than its runs: cuBLASLt loads
 * its kernel lazily, several ms each on the H200, and the heuristic's later picks rarely
 * win; the workspace is sized for these alone. */
#define EMBER_CUDA_GEMM_TIMED_CANDIDATES 4
_Static_assert(EMBER_CUDA_GEMM_TIMED_CANDIDATES <= EMBER_CUDA_GEMM_CANDIDATES,
               "the executor times candidates the heuristic gave");

/* One matrix layout as make_layout told cuBLASLt. */
typedef struct ember_cuda_gemm_layout_key {
  int64_t type; /* cudaDataType_t */
  uint64_t rows, cols;
  int64_t ld;
  int64_t batch;        /* 1 when BATCH_COUNT was not set */
  int64_t batch_stride; /* 0 when STRIDED_BATCH_OFFSET was not set */
} ember_cuda_gemm_layout_key;

/* Everything cublasLtMatmulAlgoGetHeuristic is given, as values, recorded as the
 * descriptor, layouts and preference are set (cuda_gemm.c): the key of the process's
 * heuristic cache. An attribute newly set on any of them needs a field here, or two
 * GEMMs that differ in it would share candidates. Every field is 64 bits wide so the
 * struct has no padding and compares with memcmp. */
typedef struct ember_cuda_gemm_key {
  int64_t device; /* CUdevice ordinal the cuBLASLt handle works on */
  int64_t compute_type, scale_type;
  int64_t transa, transb;
  int64_t epilogue;
  /* BIAS_POINTER: 0 not set, 1 set. The heuristic reads the pointer's alignment (up to
   * 256 bytes; 0 for NULL), not where it points, so that is what is kept. */
  int64_t bias_set;
  uint64_t bias_alignment;
  ember_cuda_gemm_layout_key a, b, d; /* C is D */
  uint64_t max_workspace;
  uint64_t min_alignment[4]; /* A, B, C, D, bytes */
  uint64_t requested;        /* algorithms asked for */
} ember_cuda_gemm_key;

/* What the heuristic answered for a key: its successful algorithms in its order, and
 * the workspace each needs; count 0 when it had none. */
typedef struct ember_cuda_gemm_candidates {
  uint32_t count;
  cublasLtMatmulAlgo_t algos[EMBER_CUDA_GEMM_CANDIDATES];
  size_t workspace[EMBER_CUDA_GEMM_CANDIDATES];
} ember_cuda_gemm_candidates;

/* What the GEMM's epilogue applies after the product (and the bias, when fused). */
typedef enum ember_cuda_gemm_activation {
  EMBER_CUDA_GEMM_ACT_NONE = 0,
  EMBER_CUDA_GEMM_ACT_RELU = 1,
  EMBER_CUDA_GEMM_ACT_GELU_TANH = 2,
} ember_cuda_gemm_activation;

typedef struct ember_cuda_gemm {
  /* Plan tensors: cuBLASLt's A and B, the bias (EMBER_PLAN_NO_INDEX if none), and D (the
   * op's output, or the output of the activation op fused into this GEMM). */
  uint32_t a_tensor;
  uint32_t b_tensor;
  uint32_t bias_tensor;
  uint32_t d_tensor;
  size_t element_size;
  uint64_t m, n, k; /* cuBLASLt's: m = N, n = M (times folded batches), k = K */

  /* Done by the GEMM: bias (fused into the epilogue) and activation. What it could not
   * fuse the executor does with a bias_act kernel after it (needs_bias_act). */
  bool bias_fused;
  ember_cuda_gemm_activation activation_fused;
  bool needs_bias_act;
  int32_t bias_act_activation; /* ember_k_unary_op, for the bias_act kernel */

  /* Loop of cublasLtMatmul calls over broadcast batch positions (1 call when the batch is
   * folded or strided). Offsets are in elements. */
  uint64_t calls;
  uint32_t loop_rank;
  int64_t loop_dims[EMBER_K_MAX_RANK];
  int64_t a_loop_strides[EMBER_K_MAX_RANK];
  int64_t b_loop_strides[EMBER_K_MAX_RANK];
  int64_t d_loop_strides[EMBER_K_MAX_RANK];

  /* What the descriptor, layouts and last preference were given (the cache's key), and
   * how many of this GEMM's heuristic questions the cache answered, or cuBLASLt did. */
  ember_cuda_gemm_key key;
  uint32_t heuristic_hits;
  uint32_t heuristic_misses;

  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a_layout;
  cublasLtMatrixLayout_t b_layout;
  cublasLtMatrixLayout_t d_layout;
  cublasLtMatmulAlgo_t algo;
  size_t workspace_size;
  /* The heuristic's best algorithms, in its order (algo is the first until the executor
   * times them on the real operands and keeps the fastest: ember_cuda_gemm_choose). */
  uint32_t num_candidates;
  uint32_t chosen; /* which candidate algo is */
  cublasLtMatmulAlgo_t candidates[EMBER_CUDA_GEMM_CANDIDATES];
  size_t candidate_workspace[EMBER_CUDA_GEMM_CANDIDATES];
} ember_cuda_gemm;

/* The minimum byte alignment ember_cuda_gemm_prepare assumes of each of a GEMM's tensors.
 * Arena and constant tensors are what they are; inputs and outputs bound by the caller
 * are assumed 256-byte aligned (what cudaMalloc and PyTorch's allocator give); a bound
 * device pointer that is less aligned is staged instead (cuda_executor.c). */
#define EMBER_CUDA_GEMM_IO_ALIGNMENT 256u

/* How the executor tells prepare where a tensor lives at prepare time. */
typedef uint64_t (*ember_cuda_gemm_address_fn)(void* context, uint32_t tensor);

typedef struct ember_cuda_gemm_request {
  const ember_plan* plan;
  uint32_t op_index; /* the LINEAR or MATMUL op */
  /* The activation op fused into it (RELU, or GELU with the tanh form), or
   * EMBER_PLAN_NO_INDEX. Its output becomes D. */
  uint32_t fused_op_index;
  ember_cuda_gemm_address_fn address;
  void* address_context;
  size_t max_workspace; /* bytes the heuristic may ask for */
  int device;           /* CUdevice ordinal of the handle (the heuristic cache's key) */
} ember_cuda_gemm_request;

/* Prepares `out_gemm` (zeroed first). With a fused activation that cuBLASLt has no
 * algorithm for, it falls back to a plain GEMM and sets needs_bias_act. No algorithm at
 * all is EMBER_UNAVAILABLE. On error everything is released. */
ember_status* ember_cuda_gemm_prepare(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                      const ember_cuda_gemm_request* request,
                                      ember_cuda_gemm* out_gemm);

/* A plain strided-batched GEMM that is not a plan op (CONV2D's implicit GEMM, SDPA's two
 * products): D = op(A)·B, column-major, with at most a ReLU after; `batch` products
 * with element strides strides[0..3) for A, B and D (0: shared). op(A) is A, or Aᵀ with transpose_a
 * (then A is stored [k, m] with leading dimension lda). A and B are `dtype`; D is
 * d_dtype: dtype, or float32 (scores kept in float32). alignments[]: of A, B, D's
 * addresses at prepare (bytes). a_tensor, b_tensor, bias_tensor and d_tensor are
 * EMBER_PLAN_NO_INDEX; the caller keeps track of its operands. No algorithm is
 * EMBER_UNAVAILABLE. */
typedef struct ember_cuda_gemm_plain {
  ember_dtype dtype;
  ember_dtype d_dtype;
  bool transpose_a;
  /* Ask for CUBLASLT_EPILOGUE_RELU; activation_fused says whether the heuristic had one
   * (if not, the caller applies it). */
  bool relu;
  uint64_t m, n, k;
  int64_t lda, ldb, ldd;
  int32_t batch;
  int64_t strides[3];
  uint32_t alignments[3];
  size_t max_workspace;
  int device; /* CUdevice ordinal of the handle (the heuristic cache's key) */
} ember_cuda_gemm_plain;

ember_status* ember_cuda_gemm_prepare_plain(const ember_cublaslt_library* lt,
                                            cublasLtHandle_t handle,
                                            const ember_cuda_gemm_plain* request,
                                            ember_cuda_gemm* out_gemm);

/* Enqueues the GEMM on `stream`: all its cublasLtMatmul calls, with these device
 * addresses (bias 0 when there is none). c, when not 0, is a tensor of D's layout added
 * to the product before the epilogue (cuBLASLt's C with beta 1: a conv's residual; it may
 * be d itself); 0 adds nothing. The workspace holds gemm->workspace_size bytes. */
ember_status* ember_cuda_gemm_enqueue(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                      const ember_cuda_gemm* gemm, uint64_t a, uint64_t b,
                                      uint64_t bias, uint64_t c, uint64_t d, uint64_t workspace,
                                      CUstream stream);

/* Makes candidate `c` the algorithm the GEMM runs (c < num_candidates). */
void ember_cuda_gemm_choose(ember_cuda_gemm* gemm, uint32_t c);

/* The most workspace the chosen algorithm or any candidate the executor may time
 * (the first EMBER_CUDA_GEMM_TIMED_CANDIDATES) needs. */
size_t ember_cuda_gemm_max_candidate_workspace(const ember_cuda_gemm* gemm);

/* The process's heuristic cache: a GEMM whose key (descriptor, layouts, preference,
 * device) was seen before takes the candidates cuBLASLt gave then, instead of asking
 * again (a transformer's repeated layers; the same model loaded twice). Only the
 * candidate list comes from it; the executor still times them on the GEMM's own
 * operands. Thread-safe (a mutex). Bounded: once EMBER_CUDA_GEMM_CACHE_ENTRIES keys are
 * in, new ones are not kept (asked every time, as without a cache); the entries live in
 * static storage for the process's life, so there is nothing to free. Errors are not
 * kept. */
#define EMBER_CUDA_GEMM_CACHE_ENTRIES 512

/* Whether `key` is in the cache; if so, *out_candidates is what was added for it. Counts
 * a hit or a miss. */
bool ember_cuda_gemm_cache_find(const ember_cuda_gemm_key* key,
                                ember_cuda_gemm_candidates* out_candidates);

/* Adds `key` with `candidates`, unless it is there already or the cache is full. */
void ember_cuda_gemm_cache_add(const ember_cuda_gemm_key* key,
                               const ember_cuda_gemm_candidates* candidates);

typedef struct ember_cuda_gemm_cache_stats {
  uint64_t hits;
  uint64_t misses;
  uint32_t entries;
} ember_cuda_gemm_cache_stats;

/* The cache's counts since the process started. */
void ember_cuda_gemm_cache_get_stats(ember_cuda_gemm_cache_stats* out_stats);

/* Releases the descriptors. Safe on a zeroed gemm. */
void ember_cuda_gemm_release(const ember_cublaslt_library* lt, ember_cuda_gemm* gemm);

#endif /* EMBER_SRC_CUDA_CUDA_GEMM_H_ */
