/* Parameters of Ember's CUDA kernels: one struct per kernel family, shared by the host
 * side (C, cuda_executor.c fills them) and the device side (the .cu files read them).
 *
 * Every kernel takes exactly one parameter, its struct, by value. That keeps a launch
 * uniform (kernelParams = { &struct }) and lets the executor patch the device addresses
 * inside a struct when the caller's bound pointers change, then hand the whole struct to
 * cuGraphExecKernelNodeSetParams. Device addresses are uint64_t (CUdeviceptr) so the
 * layout is the same in both compilers: only fixed-width fields, each naturally aligned,
 * checked by the static assertions at the end.
 *
 * Element types are not fields: each kernel exists once per dtype (name suffix _f32,
 * _f16, _bf16; cuda_kernels.c names them) and computes in float32. */
#ifndef EMBER_SRC_CUDA_KERNEL_PARAMS_H_
#define EMBER_SRC_CUDA_KERNEL_PARAMS_H_

#include <stddef.h>
#include <stdint.h>

#define EMBER_K_MAX_RANK 8

/* Threads per block for every kernel (the reductions assume a multiple of 32, at most
 * 1024). */
#define EMBER_K_BLOCK 256

/* Elementwise unary functions; also the activations of the bias_act kernel. */
typedef enum ember_k_unary_op {
  EMBER_K_UNARY_IDENTITY = 0,
  EMBER_K_UNARY_RELU = 1,
  EMBER_K_UNARY_GELU_ERF = 2,
  EMBER_K_UNARY_GELU_TANH = 3,
  EMBER_K_UNARY_SIGMOID = 4,
  EMBER_K_UNARY_TANH = 5,
  EMBER_K_UNARY_SILU = 6,
  EMBER_K_UNARY_NEG = 7,
  EMBER_K_UNARY_EXP = 8,
  EMBER_K_UNARY_LOG = 9,
  EMBER_K_UNARY_SQRT = 10,
  EMBER_K_UNARY_RSQRT = 11,
  EMBER_K_UNARY_ABS = 12,
  EMBER_K_UNARY_RECIPROCAL = 13,
  EMBER_K_UNARY_CLAMP = 14, /* bounds in ember_k_unary_params (not a GEMM epilogue) */
} ember_k_unary_op;

typedef enum ember_k_binary_op {
  EMBER_K_BINARY_ADD = 0,
  EMBER_K_BINARY_SUB = 1,
  EMBER_K_BINARY_MUL = 2,
  EMBER_K_BINARY_DIV = 3,
  EMBER_K_BINARY_POW = 4,
  EMBER_K_BINARY_MAXIMUM = 5, /* NaN propagates, as torch.maximum */
  EMBER_K_BINARY_MINIMUM = 6,
} ember_k_binary_op;

/* ember_unary_<dtype>: y[i] = f(x[i]) for i < count. CLAMP reads clamp_min/clamp_max
 * (the plan's f64 bounds rounded to float32; +-inf where a bound is absent). */
typedef struct ember_k_unary_params {
  uint64_t x;
  uint64_t y;
  uint64_t count;
  int32_t op; /* ember_k_unary_op */
  int32_t reserved;
  float clamp_min;
  float clamp_max;
} ember_k_unary_params;

/* ember_binary_<dtype>: y = a op b, broadcast, then a ReLU when `relu` is set (a RELU op
 * fused into the binary op: resnet's residual ADD). The host collapses dims first, so
 * `rank` is usually 1 or 2. dims are y's; a_strides/b_strides are element strides of a
 * and b per y dim (0 where that input is broadcast along the dim). */
typedef struct ember_k_binary_params {
  uint64_t a;
  uint64_t b;
  uint64_t y;
  uint64_t count; /* elements of y */
  int32_t op;     /* ember_k_binary_op */
  uint32_t rank;  /* 1..EMBER_K_MAX_RANK */
  int32_t relu;
  int32_t reserved;
  int64_t dims[EMBER_K_MAX_RANK];
  int64_t a_strides[EMBER_K_MAX_RANK];
  int64_t b_strides[EMBER_K_MAX_RANK];
} ember_k_binary_params;

/* ember_gather_<element size 1, 2, 4, 8>: PERMUTE, EXPAND and SLICE. y[i] = x[x_offset +
 * offset(i)], where i walks y's dims row-major and offset adds x_strides[d] per step of y
 * dim d (x's element stride along the x dim that becomes y dim d; 0 where EXPAND
 * broadcasts; times the step for SLICE's dim).
 *
 * Every count, dim, stride and offset here is in units of `vector` elements: the host
 * widens a gather whose innermost dim is contiguous (x stride 1) so that each unit is
 * 4, 8 or 16 bytes (cuda_executor.c fill_gather_params). The kernel moves a unit in one
 * load and store when x and y are aligned to it, else element by element. */
typedef struct ember_k_gather_params {
  uint64_t x;
  uint64_t y;
  uint64_t count;   /* units of y */
  int64_t x_offset; /* units */
  uint32_t rank;    /* 1..EMBER_K_MAX_RANK */
  uint32_t vector;  /* elements per unit: 1, or a power of two up to 16 bytes' worth */
  /* Set by the host when count and every x offset fit in int32: 32-bit index math, and
   * a division by dims[d] (d >= 1) is (umulhi(n, div_mul[d]) + n) >> div_shift[d]. */
  int32_t index32;
  uint32_t reserved;
  int64_t dims[EMBER_K_MAX_RANK];
  int64_t x_strides[EMBER_K_MAX_RANK];
  uint32_t div_mul[EMBER_K_MAX_RANK];
  uint32_t div_shift[EMBER_K_MAX_RANK];
} ember_k_gather_params;

/* ember_copy_rows: `rows` rows of row_bytes bytes, row r from x + x_offset + r * x_pitch
 * to y + y_offset + r * y_pitch (CAT: one launch per input; SLICE with step 1). Moves 16,
 * 8, 4, 2 or 1 bytes at a time, the widest that every address and size allows. */
typedef struct ember_k_copy_rows_params {
  uint64_t x;
  uint64_t y;
  int64_t rows;
  int64_t row_bytes;
  int64_t x_pitch;
  int64_t y_pitch;
  int64_t x_offset;
  int64_t y_offset;
} ember_k_copy_rows_params;

/* ember_where_<element size 1, 2, 4, 8>: y = cond ? a : b, broadcast (cond is bool, one
 * byte). dims are y's (collapsed as for binary); strides are element strides per y dim,
 * 0 where that input is broadcast. */
typedef struct ember_k_where_params {
  uint64_t cond;
  uint64_t a;
  uint64_t b;
  uint64_t y;
  uint64_t count;
  uint32_t rank;
  uint32_t reserved;
  int64_t dims[EMBER_K_MAX_RANK];
  int64_t cond_strides[EMBER_K_MAX_RANK];
  int64_t a_strides[EMBER_K_MAX_RANK];
  int64_t b_strides[EMBER_K_MAX_RANK];
} ember_k_where_params;

/* ember_cast: y[i] = x[i] converted from x_dtype to y_dtype (ember_dtype codes), with the
 * CPU reference executor's rules (float to integer: toward zero, NaN 0, saturating; to
 * bool: != 0; int32 wraps). */
typedef struct ember_k_cast_params {
  uint64_t x;
  uint64_t y;
  uint64_t count;
  int32_t x_dtype;
  int32_t y_dtype;
} ember_k_cast_params;

/* ember_embedding_<element size 2, 4>: y[i, :] = w[indices[i], :] for i < count, rows of
 * `cols` elements out of `rows`. An index outside [0, rows) gives a row of zeros and
 * records (op_index << 40 | i) into *error with atomicMin (the host sets it to all ones
 * before a run and reports the smallest after). */
typedef struct ember_k_embedding_params {
  uint64_t w;
  uint64_t indices;
  uint64_t y;
  uint64_t error;
  int64_t count;
  int64_t rows;
  int64_t cols;
  int32_t index_is_64; /* int64 indices, else int32 */
  uint32_t op_index;
} ember_k_embedding_params;

/* REDUCE_SUM/MEAN/MAX. Output i walks the kept dims (kept_dims, x strides kept_strides);
 * each sums over the reduced dims (red_dims, red_strides), red_count elements.
 * ember_reduce_block_<dtype>: a block per output, a warp per output or 32 columns a block
 * (`form`); ember_reduce_thread_<dtype>: a thread per output (short reductions). */
typedef enum ember_k_reduce_op {
  EMBER_K_REDUCE_SUM = 0,
  EMBER_K_REDUCE_MEAN = 1,
  EMBER_K_REDUCE_MAX = 2,
} ember_k_reduce_op;

#define EMBER_K_REDUCE_WARP_MAX 256

/* How ember_reduce_block takes its outputs. WARPS: a warp per output, for reductions of
 * at most EMBER_K_REDUCE_WARP_MAX elements (fewer than a block has threads, so most of a
 * block would idle; longer rows, as an RMSNorm's 1024, are faster a block each: on the
 * H200 a warp each took 20 us where a block took 6.5). COLUMNS: for those, where the
 * innermost kept dim has stride 1 and at least EMBER_K_REDUCE_COLUMNS_MIN elements (the
 * outputs are neighbouring columns of x: a channels-last global average pool), 32 columns
 * of one outer index a block, its warps splitting the reduction. COLUMN_VECTORS: COLUMNS
 * with 16 bytes of columns a lane (32·16/sizeof(T) a block), where the columns are a
 * multiple of those 16 bytes and every other stride too (x 16-byte aligned; else the
 * kernel takes COLUMNS' loop). */
typedef enum ember_k_reduce_form {
  EMBER_K_REDUCE_BLOCKS = 0,
  EMBER_K_REDUCE_WARPS = 1,
  EMBER_K_REDUCE_COLUMNS = 2,
  EMBER_K_REDUCE_COLUMN_VECTORS = 3,
} ember_k_reduce_form;

#define EMBER_K_REDUCE_COLUMNS_MIN 8

typedef struct ember_k_reduce_params {
  uint64_t x;
  uint64_t y;
  int64_t out_count;
  int64_t red_count;
  uint32_t kept_rank; /* 0..EMBER_K_MAX_RANK */
  uint32_t red_rank;  /* 1..EMBER_K_MAX_RANK */
  int32_t op;         /* ember_k_reduce_op */
  int32_t form;       /* ember_k_reduce_form: ember_reduce_block only */
  int64_t kept_dims[EMBER_K_MAX_RANK];
  int64_t kept_strides[EMBER_K_MAX_RANK];
  int64_t red_dims[EMBER_K_MAX_RANK];
  int64_t red_strides[EMBER_K_MAX_RANK];
} ember_k_reduce_params;

/* ember_sdpa_<dtype>: softmax(q kᵀ · scale + mask) v, one warp per query row with an
 * online softmax (flash-attention style: one pass over the keys, nothing materialized).
 * q [batches, L, E], k [batches, S, E], v [batches, S, Ev], y [batches, L, Ev]. The mask
 * (mask_kind 1: additive, of the dtype; 2: bool, false masks out) is at mask +
 * batch offset + i * mask_row_stride + j * mask_col_stride, where the batch offset walks
 * batch_dims with mask_batch_strides. A row whose keys are all masked gives zeros. */
typedef struct ember_k_sdpa_params {
  uint64_t q;
  uint64_t k;
  uint64_t v;
  uint64_t mask;
  uint64_t y;
  int64_t batches;
  int64_t l;
  int64_t s;
  int64_t e;
  int64_t ev;
  int64_t mask_row_stride;
  int64_t mask_col_stride;
  float scale;
  int32_t is_causal;
  int32_t mask_kind; /* 0 none, 1 additive, 2 bool */
  uint32_t batch_rank;
  int64_t batch_dims[EMBER_K_MAX_RANK];
  int64_t mask_batch_strides[EMBER_K_MAX_RANK];
} ember_k_sdpa_params;

/* ember_sdpa_softmax_<dtype>: the middle of SDPA run as two GEMMs. scores (float32,
 * [rows, s], rows = batches · l) hold q·kᵀ; p ([rows, s], the dtype) gets
 * softmax(scores · scale) per row over its keys (all s, or the first i + 1 of row i of
 * each batch when is_causal), 0 past them. Special values as ember_sdpa's. */
typedef struct ember_k_sdpa_softmax_params {
  uint64_t scores;
  uint64_t p;
  int64_t rows;
  int64_t l;
  int64_t s;
  float scale;
  int32_t is_causal;
} ember_k_sdpa_softmax_params;

/* ember_sdpa_flash_<f16, bf16>: SDPA without a mask tensor on tensor cores
 * (FlashAttention-2: attention.cu says how). Each of q [batch, heads, l, e],
 * k [batch, heads, s, e], v [batch, heads, s, e] and y [batch, heads, l, e] is an address
 * and element strides over (batch, heads, rows); a row's e elements are contiguous. Every
 * address is 16-byte aligned and every stride a multiple of 8 elements, so each row
 * starts on a 16-byte boundary (the host checks). e is 64 or 128 (e == ev). Launched
 * with EMBER_K_SDPA_FLASH_THREADS threads a block (not EMBER_K_BLOCK), one block per
 * EMBER_K_SDPA_FLASH_ROWS query rows of one (batch, head): ceil(l / ROWS) * heads * batch
 * blocks, and EMBER_K_SDPA_FLASH_SMEM_BYTES(e) bytes of dynamic shared memory (at most
 * the 48 KiB a block may take without opting in). */
#define EMBER_K_SDPA_FLASH_THREADS 128
#define EMBER_K_SDPA_FLASH_ROWS 64
/* Keys a chunk: 32 at e 128 keeps the scores and the wider output accumulator in fewer
 * registers (as FlashAttention-2's head dim 128 tiles). */
#define EMBER_K_SDPA_FLASH_KEYS(e) ((e) == 128 ? 32 : 64)
/* A Q tile of ROWS rows, a K and a V tile of KEYS rows, of e 16-bit elements each. */
#define EMBER_K_SDPA_FLASH_SMEM_BYTES(e) \
  ((EMBER_K_SDPA_FLASH_ROWS + 2u * EMBER_K_SDPA_FLASH_KEYS(e)) * (unsigned)(e) * 2u)

typedef struct ember_k_sdpa_flash_params {
  uint64_t q;
  uint64_t k;
  uint64_t v;
  uint64_t y;
  int64_t q_strides[3]; /* batch, head, row */
  int64_t k_strides[3];
  int64_t v_strides[3];
  int64_t y_strides[3];
  int32_t batch;
  int32_t heads;
  int32_t l;
  int32_t s;
  int32_t e;
  float scale_log2; /* the scale attribute times log2(e): scores go through exp2 */
  int32_t is_causal;
  int32_t reserved;
} ember_k_sdpa_flash_params;

/* ember_conv2d_<dtype>: a direct convolution, NCHW, a thread per output position and
 * block of 4 output channels of one group (groups and depthwise included). w is
 * [O, C / groups, KH, KW]; b (O) when has_bias. */
typedef struct ember_k_conv2d_params {
  uint64_t x;
  uint64_t w;
  uint64_t b;
  uint64_t y;
  int64_t n, c, h, w_in, o, oh, ow, kh, kw;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w, groups;
  int32_t has_bias;
  int32_t reserved;
} ember_k_conv2d_params;

/* ember_im2col_<dtype>: CONV2D's implicit GEMM, groups 1. col has `rows` rows per image
 * (C·KH·KW + 1, rounded up to a multiple of 8 so that the GEMM's K keeps its operands
 * 16-byte aligned): row (c, ki, kj) holds the input under that kernel tap for every output
 * position (0 in the padding), row C·KH·KW holds 1 (it meets the bias, which the executor
 * appends to each weight row) and the rows past it hold 0. image_major: col is
 * [N, rows, OH·OW] (one GEMM per image); else [rows, N, OH·OW] (one GEMM over every
 * image's positions). */
typedef enum ember_k_im2col_divisor {
  EMBER_K_IM2COL_DIV_POSITIONS = 0, /* oh * ow */
  EMBER_K_IM2COL_DIV_OUTER = 1,     /* rows when image_major, else n */
  EMBER_K_IM2COL_DIV_OW = 2,
  EMBER_K_IM2COL_DIV_KW = 3,
  EMBER_K_IM2COL_DIV_KH = 4,
  EMBER_K_IM2COL_DIVISORS = 5,
} ember_k_im2col_divisor;

typedef struct ember_k_im2col_params {
  uint64_t x;
  uint64_t col;
  int64_t n, c, h, w, kh, kw, oh, ow;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t rows;
  /* Set by the host when every index and coordinate the kernel computes fits in int32:
   * the kernel then uses 32-bit math and divides a numerator n < 2^31 by divisor k as
   * (umulhi(n, div_mul[k]) + n) >> div_shift[k]. 0: int64 math throughout. */
  int32_t index32;
  int32_t image_major;
  uint32_t div_mul[EMBER_K_IM2COL_DIVISORS];
  uint32_t div_shift[EMBER_K_IM2COL_DIVISORS];
} ember_k_im2col_params;

/* ember_conv_igemm_<f16|bf16>: CONV2D of groups 1 as an implicit GEMM on tensor cores
 * (conv_igemm.cu): D[o, p] = sum_k W[o, k] * X[k, p] over output positions
 * p = (image, oh, ow) and k = (kh, kw, c). x is the conv's input packed by
 * ember_nhwc_pack_2 ([N, H, W, c], c the channels padded to a multiple of 8), or by
 * ember_space_to_depth_pack (then the conv's stride is 1 and its padding 0). w holds
 * the weights reordered to [o][kh][kw][c] (zeros for the padded channels), the bias at
 * column k_taps = KH·KW·c, zeros to k_stride (a multiple of 8). table has
 * k_tiles · BK / 8 int2 entries, one per 8 consecutive k: the element offset of those 8
 * channels from a window's first pixel, (kh·dil_h · W + kw·dil_w) · c + c0, and
 * (kh·dil_h) << 16 | (kw·dil_w & 0xffff); entries past k_taps have a row offset of
 * EMBER_K_CONV_IGEMM_NO_TAP (always outside x), so they read zeros. y is NCHW or channels
 * last (layout); residual (has_residual), same shape, is added before the ReLU. The channel tile BM is 64 when
 * o <= 64, else 128. All element offsets fit int32 (the host checks). */
#define EMBER_K_CONV_IGEMM_BK 64
#define EMBER_K_CONV_IGEMM_BN 128
#define EMBER_K_CONV_IGEMM_STAGES 3
/* Dynamic shared memory of a launch with channel tile bm: the ring of stages, each a W
 * and an X tile of rows BK + 8 elements (2 bytes). */
#define EMBER_K_CONV_IGEMM_SMEM_BYTES(bm) \
  (EMBER_K_CONV_IGEMM_STAGES * ((bm) + EMBER_K_CONV_IGEMM_BN) * (EMBER_K_CONV_IGEMM_BK + 8) * 2)
#define EMBER_K_CONV_IGEMM_NO_TAP 0x4000
/* y, and the residual, stored [N, OH, OW, O] (o a multiple of 8, 16-byte aligned): the
 * layout x has, so that a conv's output feeds the next conv with no pack. */
#define EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST 1
#define EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST 2
/* ember_conv_wgmma<bm>_<f16|bf16> (conv_wgmma.cu, sm_90a; bm 64 for o <= 64, else 128):
 * the same parameters on Hopper's wgmma. Its dynamic shared memory: a ring of 3 stages,
 * each BN + bm rows of BK elements, and 1 KB to align it to the swizzle's 1024 bytes
 * (73 KB and 97 KB: 3 and 2 blocks an SM). */
#define EMBER_K_CONV_WGMMA_STAGES 3
#define EMBER_K_CONV_WGMMA_SMEM_BYTES(bm) \
  (EMBER_K_CONV_WGMMA_STAGES * (EMBER_K_CONV_IGEMM_BN + (bm)) * EMBER_K_CONV_IGEMM_BK * 2 + 1024)
/* ember_conv_split_sum_<f16|bf16> (conv_wgmma.cu): the same parameters, LANES threads a
 * vector of 8 channels of one position (positions · o8 / 8 of them), in a grid-stride
 * loop. */
#define EMBER_K_CONV_SPLIT_SUM_LANES 4
/* The elements between positions of a split's sums: o rounded up to 8, whole vectors. */
#define EMBER_K_CONV_SPLIT_ROW(o) (((o) + 7) & ~7)
typedef struct ember_k_conv_igemm_params {
  uint64_t x;
  uint64_t w;
  uint64_t table;
  uint64_t residual;
  uint64_t y;
  int32_t c, h, w_in, o;
  int32_t oh, ow, stride_h, stride_w;
  int32_t pad_h, pad_w, k_taps, k_stride;
  int32_t positions; /* n * oh * ow */
  int32_t k_tiles;   /* ceil(k_taps / BK) */
  int32_t o_tiles;   /* ceil(o / BM): blockIdx.x % o_tiles is the block's channel tile */
  int32_t relu;
  int32_t has_residual;
  /* n / (oh·ow) and n / ow as (umulhi(n, mul) + n) >> shift (the host's fast_divisor). */
  uint32_t div_mul[2];
  uint32_t div_shift[2];
  int32_t layout; /* EMBER_K_CONV_IGEMM_*_CHANNELS_LAST bits; else NCHW */
  /* Split over K (the wgmma kernel only; k_splits 0 or 1: none). With k_splits > 1 the
   * grid is the tiles times k_splits, blockIdx.x / tiles a block's split, which takes
   * split_k_tiles of the K tiles from split · split_k_tiles; it writes its sums, float32
   * without the bias, to partial [k_splits][positions][o8] (o8: EMBER_K_CONV_SPLIT_ROW) and
   * nothing else. ember_conv_split_sum then adds the splits in order (the same result
   * every run), the bias, the residual and the ReLU, and writes y. */
  uint64_t partial;
  int32_t k_splits;
  int32_t split_k_tiles;
} ember_k_conv_igemm_params;

/* ember_nhwc_pack_2: x [n, c, hw] of 2-byte elements -> y [n, hw, cp], channels c..cp-1
 * zero; cp a multiple of 8, y 16-byte aligned, n · hw · cp within int32. */
typedef struct ember_k_nhwc_pack_params {
  uint64_t x;
  uint64_t y;
  int64_t n, c, hw, cp;
} ember_k_nhwc_pack_params;

/* ember_space_to_depth_pack: the input of a stride-2 conv of few channels (resnet's stem)
 * for the implicit GEMM, folded space-to-depth. x [n, c, h, w] of 2-byte elements -> y
 * [n, hs, ws, cp]: pixel (u, v) holds, at channel (b·2 + b')·c + ch, x[ch][2u + b - pad_h]
 * [2v + b' - pad_w] (zero outside x), and zeros from 4·c to cp. The stride-2 conv of
 * kernel kh x kw is then a stride-1 conv of ceil(kh/2) x ceil(kw/2) taps and no padding
 * over y, whose taps read cp channels, 16 or 32 bytes a pixel, where the plain pack reads
 * 8 channels for each of kh·kw taps (cuda_executor.c conv_space_to_depth). cp a multiple
 * of 8 and at least 4·c; y 16-byte aligned; chunks = n·hs·ws·cp/8 and x's elements within
 * int32 (the host checks). shared_rows, 0 or U from 1 to 4: the launch gives each block
 * 4·U·c·w bytes of dynamic shared memory (at most EMBER_K_SPACE_TO_DEPTH_ROWS_BYTES), for
 * 2·U rows of each channel of x; then c 3 with cp 16, and c 1 with cp 8, go U rows of y a
 * block at a time. */
typedef struct ember_k_space_to_depth_params {
  uint64_t x;
  uint64_t y;
  int32_t c, h, w, hs;
  int32_t ws, pad_h, pad_w, cp;
  int32_t chunks;
  int32_t shared_rows;
} ember_k_space_to_depth_params;
#define EMBER_K_SPACE_TO_DEPTH_ROWS_BYTES (32 * 1024)

/* ember_conv_igemm_weights_3: a conv's weights w [o][c][kh][kw] (2-byte elements) and
 * bias [o] (0: none) -> out [o][k_stride], the implicit GEMM's layout: row o holds
 * k = tap · cp + channel over the taps of the folded kernel, ceil(kh/fold) x
 * ceil(kw/fold), then at taps · cp the bias (or 0), then zeros. fold 1: the taps are
 * the kernel's and channel ch is x's (channels c..cp-1 zero). fold 2 (the input packed
 * by ember_space_to_depth_pack): tap (a, a') and channel (b·2 + b')·c + ch hold
 * w[ch][2a + b][2a' + b'], zero past the kernel's edge and from 4·c on. elements =
 * o · k_stride, within int32 (the host checks). */
typedef struct ember_k_conv_igemm_weights_params {
  uint64_t w;
  uint64_t bias;
  uint64_t out;
  int64_t elements;
  int32_t c, kh, kw, fold;
  int32_t cp, k_stride;
} ember_k_conv_igemm_weights_params;

/* ember_im2col_nhwc_2: the im2col of a conv whose output is channels last and whose
 * product cuBLASLt computes with the output channels as M (cuda_executor.c
 * build_conv2d_gemm_nhwc). x is [N, H, W, c] of 2-byte elements (c a multiple of 8: a
 * channels-last tensor, or the input packed by ember_nhwc_pack_2); col is
 * [positions][row_vectors · 8], row p = (image, oh, ow) holding k = (kh, kw, c), the
 * order of the implicit GEMM's weights, then the bias column: one_bits (1.0 in the dtype)
 * and 7 zeros. Taps outside x read zeros. x and col 16-byte aligned; positions ·
 * row_vectors and x's elements within int32 (the host checks). */
typedef enum ember_k_im2col_nhwc_divisor {
  EMBER_K_IM2COL_NHWC_DIV_ROW = 0,      /* row_vectors */
  EMBER_K_IM2COL_NHWC_DIV_CHANNELS = 1, /* c / 8 */
  EMBER_K_IM2COL_NHWC_DIV_KW = 2,
  EMBER_K_IM2COL_NHWC_DIV_POSITIONS = 3, /* oh * ow */
  EMBER_K_IM2COL_NHWC_DIV_OW = 4,
  EMBER_K_IM2COL_NHWC_DIVISORS = 5,
} ember_k_im2col_nhwc_divisor;

typedef struct ember_k_im2col_nhwc_params {
  uint64_t x;
  uint64_t col;
  int32_t h, w, c, kw;
  int32_t ow, image_positions; /* oh · ow */
  int32_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int32_t tap_vectors; /* KH · KW · c / 8: the row's vectors before the bias column */
  int32_t row_vectors; /* tap_vectors + 1 */
  int32_t vectors;     /* positions · row_vectors: one thread each */
  uint32_t one_bits;
  uint32_t div_mul[EMBER_K_IM2COL_NHWC_DIVISORS];
  uint32_t div_shift[EMBER_K_IM2COL_NHWC_DIVISORS];
} ember_k_im2col_nhwc_params;

/* ember_pool2d_<dtype>: MAX_POOL2D, AVG_POOL2D and ADAPTIVE_AVG_POOL2D over NCHW planes,
 * one thread per output element, with the CPU reference executor's windows.
 * ember_max_pool2d_nhwc_<dtype>: MAX_POOL2D with x and y both channels last (the
 * executor's plan_channels_last kept them so), a thread per 16 bytes of y. */
typedef enum ember_k_pool_kind {
  EMBER_K_POOL_MAX = 0,
  EMBER_K_POOL_AVG = 1,
  EMBER_K_POOL_ADAPTIVE_AVG = 2,
} ember_k_pool_kind;

typedef struct ember_k_pool2d_params {
  uint64_t x;
  uint64_t y;
  int64_t planes, h, w, oh, ow, kh, kw;
  int64_t stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  int64_t divisor_override; /* 0: none */
  int32_t kind;             /* ember_k_pool_kind */
  int32_t count_include_pad;
  /* MAX only, set by the host when every index and window coordinate fits in int32:
   * 32-bit math, dividing n < 2^31 by ow (div_*[0]) and oh (div_*[1]) as
   * (umulhi(n, div_mul[k]) + n) >> div_shift[k]. 0: int64 math. */
  int32_t index32;
  /* ember_max_pool2d_nhwc only, 3 x 3 windows of dilation 1: a block per output row, its
   * input rows in dynamic shared memory (3 · w · C elements, which the host launches). */
  int32_t shared_rows;
  uint32_t div_mul[2];
  uint32_t div_shift[2];
  /* ember_max_pool2d_nhwc only: C, x and y being [N, H, W, C] in memory (C a multiple of
   * 8, both 16-byte aligned, fewer than 2^31 elements each; planes is still N · C). */
  int64_t channels;
} ember_k_pool2d_params;

/* ember_copy_bytes: nbytes bytes from x to y (RESHAPE, COPY); the regions do not overlap. */
typedef struct ember_k_copy_params {
  uint64_t x;
  uint64_t y;
  uint64_t nbytes;
} ember_k_copy_params;

/* ember_softmax_rows_<dtype> (inner == 1: one block per row of `dim` contiguous elements)
 * and ember_softmax_strided_<dtype> (inner > 1: one thread per (outer, inner) column).
 * x and y are viewed as [outer, dim, inner]. */
typedef struct ember_k_softmax_params {
  uint64_t x;
  uint64_t y;
  int64_t outer;
  int64_t dim;
  int64_t inner;
} ember_k_softmax_params;

/* ember_layer_norm_<dtype>: rows of `cols` elements; w and b (cols elements) are used
 * when has_weight / has_bias are set. With has_residual, the rows normalized are x + r
 * rounded to the dtype (r of x's shape): the ADD before the LAYER_NORM, done here. Rows of at most EMBER_K_LAYER_NORM_WARP_COLS take a
 * warp each (EMBER_K_BLOCK / 32 rows a block; the host sizes the grid so), longer rows a
 * block each. Where cols and every address allow 16-byte moves (checked per launch), a
 * row of at most EMBER_K_LAYER_NORM_BLOCK_COLS is read once, into registers, up to
 * EMBER_K_LAYER_NORM_PER_THREAD elements a thread; otherwise it is read three times. */
#define EMBER_K_LAYER_NORM_PER_THREAD 32
#define EMBER_K_LAYER_NORM_WARP_COLS (32 * EMBER_K_LAYER_NORM_PER_THREAD)
#define EMBER_K_LAYER_NORM_BLOCK_COLS (EMBER_K_BLOCK * EMBER_K_LAYER_NORM_PER_THREAD)
typedef struct ember_k_layer_norm_params {
  uint64_t x;
  uint64_t r;
  uint64_t w;
  uint64_t b;
  uint64_t y;
  int64_t rows;
  int64_t cols;
  float eps;
  int32_t has_weight;
  int32_t has_bias;
  int32_t has_residual;
} ember_k_layer_norm_params;

/* ember_bias_act_<dtype>: the GEMM epilogue for what cuBLASLt did not fuse, in place on
 * y viewed as [rows, cols]: y = act(y + bias[col]). With `zero_input` set, y is not read
 * (a GEMM with K == 0): y = act(bias[col]), or act(0) without a bias. */
typedef struct ember_k_bias_act_params {
  uint64_t y;
  uint64_t bias;
  int64_t rows;
  int64_t cols;
  int32_t act; /* ember_k_unary_op */
  int32_t has_bias;
  int32_t zero_input;
  int32_t reserved;
} ember_k_bias_act_params;

/* ember_gemv_<dtype>: LINEAR with few rows and weight layout 0 (w is [cols, k]):
 * y[r, n] = act(sum over k of x[r, k] * w[n, k] + bias[n]) for r < rows, n < cols; a warp
 * per column of a group of GROUP_ROWS rows, float32 accumulation. Up to 8 rows the
 * product stays bound by reading w once (2 flops per weight element and row: at 8 rows 8
 * flops per byte of float16 weight, under the ~14 per byte of HBM an H200's CUDA cores
 * manage), so tiles that reuse w (cuBLASLt) gain nothing. Past that the CUDA cores'
 * arithmetic bounds it (about 2 instructions a multiply-add with the conversions: some
 * 15 T multiply-adds a second on an H200), so only up to GROUPED_MAX_ROWS rows of at most
 * GROUPED_MAX_MACS multiply-adds, a few microseconds, about what cuBLASLt's smallest
 * GEMMs take (resnet18's 64 x 512 x 1000 classifier: 6.9 us profiled); a program whose
 * only GEMMs those are then never loads cuBLASLt, whose load and first heuristic query
 * cost 150-200 ms of init. More rows, or a larger product, go to cuBLASLt. (In float16
 * and bfloat16 the kernel takes those rows on the tensor cores instead: MMA_ROWS below.) */
#define EMBER_K_GEMV_MAX_ROWS 8
#define EMBER_K_GEMV_GROUP_ROWS 8
#define EMBER_K_GEMV_GROUPED_MAX_ROWS 64
#define EMBER_K_GEMV_GROUPED_MAX_MACS (1ull << 26)
/* Past MAX_ROWS in float16 and bfloat16 with K even, a kernel of its own (ember_gemv_mma)
 * runs on the tensor cores instead, a block per tile of MMA_ROWS x MMA_COLS of y, its
 * warps splitting K (gemv.cu gemv_mma), and the host sizes the grid in those tiles. */
#define EMBER_K_GEMV_MMA_ROWS 16
#define EMBER_K_GEMV_MMA_COLS 8

typedef struct ember_k_gemv_params {
  uint64_t x;
  uint64_t w;
  uint64_t bias;
  uint64_t y;
  int64_t rows; /* 1..EMBER_K_GEMV_GROUPED_MAX_ROWS */
  int64_t cols;
  int64_t k;    /* > 0 */
  int32_t act;  /* ember_k_unary_op: IDENTITY or an activation (RELU..SILU) */
  int32_t has_bias;
} ember_k_gemv_params;

/* What ember_gemm_wgmma and ember_gemm_narrow (gemm_wgmma.cu, sm_90a) share: a LINEAR
 * with the activation after it (IDENTITY for none), y[r, n] = act(round(sum over k of
 * x[r, k] * w[n, k] + bias[n])) (round: to the dtype, as the LINEAR stores its output
 * before the activation reads it), float32 accumulation. x [rows, k] and w [n, k] are read
 * by the tensor memory accelerator through x_map and w_map (CUtensorMap, encoded by the
 * host from x and w: 2-byte elements, boxes of 64 (the kernels' BK) by x_box_rows and by
 * w_box_rows, the 128-byte swizzle, zeros outside), so k is a multiple of 8 and x, w
 * 16-byte aligned; n a multiple of 8 and y 16-byte aligned. The first member of both
 * kernels' parameters. */
#if defined(__cplusplus)
#define EMBER_K_ALIGNAS(n) alignas(n)
#else
#define EMBER_K_ALIGNAS(n) _Alignas(n)
#endif
typedef struct ember_k_linear_tma_params {
  EMBER_K_ALIGNAS(64) uint64_t x_map[16]; /* a CUtensorMap: 128 bytes, 64-byte aligned */
  uint64_t w_map[16];
  uint64_t x; /* what the maps were encoded from (the executor patches these) */
  uint64_t w;
  uint64_t bias;
  uint64_t y;
  int32_t rows, n, k;
  int32_t x_box_rows, w_box_rows;
  int32_t act; /* ember_k_unary_op: IDENTITY or an activation */
  int32_t has_bias;
  /* w and bias are the plan's constants, which no kernel of a run writes: the block
   * starts copying them before the kernel it follows (PDL) has finished. */
  int32_t constant_operands;
} ember_k_linear_tma_params;

/* ember_gemm_wgmma_<f16|bf16>, ember_gemm_wgmma192_<f16|bf16>: a LINEAR of many rows
 * (ember_k_linear_tma_params; x's box BK x BM, w's BK x BN / CLUSTER, BN 256 or
 * BN_SMALL). A block of THREADS threads computes a BM x BN tile of y: one warpgroup issues
 * the copies into a ring of STAGES stages, two compute (64 rows each). blockIdx.x /
 * CLUSTER % n_tiles is the block's column tile. SMEM_BYTES is the wider tile's, enough
 * for both. */
#define EMBER_K_GEMM_WGMMA_BM 128
#define EMBER_K_GEMM_WGMMA_BN 256
/* ember_gemm_wgmma192's BN: the same block with 192 columns a tile. */
#define EMBER_K_GEMM_WGMMA_BN_SMALL 192
#define EMBER_K_GEMM_WGMMA_BK 64
#define EMBER_K_GEMM_WGMMA_STAGES 4
#define EMBER_K_GEMM_WGMMA_THREADS 384
/* Blocks of a cluster (consecutive row tiles of one column tile) that share w's tile:
 * each has the TMA copy its 1 / CLUSTER of it into all of them (multicast); the grid is a
 * whole number of clusters. 1 (no sharing): on the H200 clusters of 2 made the MLP's
 * 4096 x 1024 x 1024 GEMMs slower (151.4 against 121.5 us for four, same run). */
#define EMBER_K_GEMM_WGMMA_CLUSTER 1
/* The ring, a full and an empty barrier per stage, the tile's bias in float32, and 1 KB
 * to align the ring to the swizzle's 1024 bytes. */
#define EMBER_K_GEMM_WGMMA_SMEM_BYTES                                                    \
  (EMBER_K_GEMM_WGMMA_STAGES * (EMBER_K_GEMM_WGMMA_BM + EMBER_K_GEMM_WGMMA_BN) *          \
       EMBER_K_GEMM_WGMMA_BK * 2 +                                                        \
   EMBER_K_GEMM_WGMMA_STAGES * 16 + EMBER_K_GEMM_WGMMA_BN * 4 + 1024)
typedef struct ember_k_gemm_wgmma_params {
  ember_k_linear_tma_params linear;
  int32_t k_tiles; /* ceil(k / BK) */
  int32_t n_tiles; /* ceil(n / BN) */
} ember_k_gemm_wgmma_params;

/* ember_gemm_chain_<f16|bf16>: up to CHAIN_MAX LINEARs (each with its activation or none)
 * one after another, each reading the one before's output, as one persistent kernel of
 * gemm_wgmma's blocks (BN 256, no clusters): a block takes tiles in order from a ticket
 * (every tile of layer l before any of layer l + 1), and a tile of layer l + 1 copies its x
 * only once all tiles of its rows in layer l have stored theirs (their arrivals counted in
 * `counts`), so that one layer's epilogues overlap the next one's first copies and no
 * block waits for a kernel boundary. Tickets taken in order make it deadlock-free
 * whatever blocks are resident: a tile waits only for tiles of earlier tickets, which
 * running blocks hold. Every layer's K tiles are a multiple of STAGES (each tile's last two
 * K tiles then sit in the ring's last two stages, where its epilogue's tile goes, while
 * the next tile's first copies go to the first two). counts: int32 [0] tickets taken, [1]
 * blocks done, [2 + l·m_tiles + m] the arrivals (two a tile) at row tile m of layer l's
 * output; zero before a launch, and the last block to finish sets them back to zero. */
#define EMBER_K_GEMM_CHAIN_MAX 4
/* gemm_wgmma's, and a second bias tile, a job's two barriers and its two ticket slots. */
#define EMBER_K_GEMM_CHAIN_SMEM_BYTES \
  (EMBER_K_GEMM_WGMMA_SMEM_BYTES + EMBER_K_GEMM_WGMMA_BN * 4 + 64)
typedef struct ember_k_gemm_chain_params {
  ember_k_gemm_wgmma_params layer[EMBER_K_GEMM_CHAIN_MAX];
  uint64_t counts;
  int32_t layers;
  int32_t m_tiles; /* ceil(rows / BM), the same in every layer */
} ember_k_gemm_chain_params;

/* ember_gemm_narrow<R>_<B>_<f16|bf16>: a LINEAR of few rows (the encoder's 128 tokens at
 * batch 1; ember_k_linear_tma_params, x's box BK x R, w's BK x BM) in the transposed
 * form: wgmma's M is BM = 64 rows of w (64 outputs), its N is R = 16, 32, 64 or 128 rows
 * of x, so a LINEAR of 128 rows makes 36-96 blocks where gemm_wgmma's 128 x 256 tiles
 * made 3-12 and left the GPU idle. A block of THREADS threads: one consumer warpgroup
 * (warps 0-3) and a producer warp whose first thread has the TMA copy K tiles of BK into a
 * ring of `stages` stages (at most MAX_STAGES, in RING_BYTES), B (1-4) K tiles a stage: B
 * w boxes, then B x boxes, so one barrier wait covers B tiles' MMAs. k_tiles = ceil(k /
 * BK) is k_stages·B (the host picks a B that divides it). Block b: column tile b %
 * n_tiles (BM outputs), row tile b / n_tiles (R rows). */
#define EMBER_K_GEMM_NARROW_BM 64
#define EMBER_K_GEMM_NARROW_BK 64
#define EMBER_K_GEMM_NARROW_THREADS 160
#define EMBER_K_GEMM_NARROW_RING_BYTES (192 * 1024)
#define EMBER_K_GEMM_NARROW_MAX_STAGES 32
#define EMBER_K_GEMM_NARROW_MAX_BOXES 4
/* R = 16 << index, index < ROWS_COUNT. */
#define EMBER_K_GEMM_NARROW_ROWS_COUNT 4
/* The ring, a full and an empty barrier per stage, and 1 KB to align the ring to the
 * swizzle's 1024 bytes. */
#define EMBER_K_GEMM_NARROW_SMEM_BYTES \
  (EMBER_K_GEMM_NARROW_RING_BYTES + EMBER_K_GEMM_NARROW_MAX_STAGES * 16 + 1024)
typedef struct ember_k_gemm_narrow_params {
  ember_k_linear_tma_params linear;
  int32_t n_tiles;  /* ceil(n / BM) */
  int32_t k_stages; /* ceil(k / BK) / B */
  int32_t stages;   /* of the ring: RING_BYTES / (B·(BM + R)·BK·2), at most MAX_STAGES */
} ember_k_gemm_narrow_params;

/* ember_conv_halo<n>_<f16|bf16> (conv_halo.cu, sm_90a): a CONV2D of stride 1, dilation 1
 * and groups 1 over a channels-last input of a multiple of 64 channels, as wgmma products
 * whose M is the output channels (64 a consumer warpgroup) and whose N is n (one of
 * EMBER_K_CONV_HALO_WIDTHS) output positions of a strip: `rows` output rows of one image,
 * each `pitch` positions apart, so that tap (kh, kw) of flat position f reads row f +
 * kh·pitch + kw of the strip's halo ((rows + KH - 1) x pitch input pixels from column
 * -pad_w, loaded once per 64 channels by one tensor copy, zeros outside x), and positions
 * with ow >= OW are computed and dropped. pitch = W + pad_w: a row's right padding is the
 * next row's left padding (zeros), and the last row's is the halo buffer's bytes past the
 * copy, which the kernel keeps zero (OW + KW - 1 where pad_w > KW - 1). With
 * strip_images > 1, a strip is that many whole images (rows = OH, strips = 1) stacked in
 * one halo, each its image_rows = H + pad_h rows of pitch pixels from row -pad_h (an
 * image's bottom padding is the next one's top, and the last one's the zeros past the
 * copy; OH + KH - 1 where pad_h > KH - 1): image i's positions are the first image's
 * moved by i·image_rows·pitch, and the positions between images are dropped too
 * (resnet18's 7 x 7 convs: two images in N 120). `conv`
 * holds the rest as for the implicit GEMM: x (what x_map names), w (the implicit GEMM's
 * weights [o][k_stride], bias at column k_taps, what w_map names), residual, y, the
 * shape, relu and layout; conv.o_tiles = ceil(o / (64·groups)). A tile is two strips of
 * the same 64 channels (strips_per_block 2, groups 1: o <= 64) or one strip and 128
 * channels (1, 2); tile t is channel tile t % o_tiles of the strips from (t /
 * o_tiles)·strips_per_block on (strip s: image s / strips, its output rows from (s %
 * strips)·rows; or images from s·strip_images), `tiles` of them. A block (a producer
 * warpgroup and two consumer warpgroups, one strip or 64 channels each) takes tiles
 * blockIdx.x, + gridDim.x, ...
 * Dynamic shared memory: the halo ring (halo_stages x strips_per_block x halo_bytes), the
 * weight ring (w_stages x groups·64 rows of 128 bytes), the epilogue's two tiles (n x
 * (64 + 8) elements each), the barriers (EMBER_K_CONV_HALO_BARRIER_BYTES), and 1 KB to
 * align it to the swizzle's 1024 bytes (cuda_executor.c conv_halo_plan_of).
 * ember_conv_halo_units<n>_<f16|bf16> takes the same parameters for a conv of at most 64
 * output channels over conv.c = 64 input channels, and ember_conv_halo_units<n>_c16_* over
 * 16 (halo rows of 32 bytes, boxes of 16 channels with the 32-byte swizzle; a tap is one
 * K step of 16), n one of EMBER_K_CONV_HALO_UNITS_WIDTHS and pitch = OW + KW - 1 (a
 * slot's bytes past the copy may hold its epilogue tile, so no padding is read there): a
 * tile is one strip (`tiles` = images·strips), strips_per_block,
 * groups, o_tiles and strip_images 1, halo_stages 2 or 3, w_stages = the weight tiles of
 * K 64 that the taps take (taps·c / 64 rounded up, at most
 * EMBER_K_CONV_HALO_UNITS_MAX_W_TILES; with 16 channels, taps a multiple of 4); its
 * shared memory is the halo slots, halo_bytes each (a slot also holds the epilogue tile
 * of the strip whose halo it held: at least EMBER_K_CONV_HALO_UNITS_TILE_BYTES(n)), the
 * weight tiles, the barriers, and the 1 KB. On that form, `pooled` 1 takes the MAX_POOL2D
 * after the conv (3 x 3, stride 2, padding 1; oh, ow and rows even, oh a multiple of
 * rows, no residual): conv.y is the pool's output [n, oh/2, ow/2, o] channels last, into
 * which a strip writes its rows/2 pooled rows (MAX_POOL2D's values up to the sign of a
 * zero and a NaN's payload). A block then takes a contiguous run of strips, each consumer
 * half of it, and a strip's first pooled row takes the window row above it from the
 * consumer's previous strip, through shared memory (4 more buffers of ow/2 x o elements
 * after the barriers). A consumer's first strip writes that row without it, and its last
 * (unless its image's last) writes its last row's window maxima into pool_rows
 * [n][strips][ow/2][o]; of the two strips at such a boundary, the second to arrive
 * (pool_counts[n][boundary], counted by atomics at the consumer's end) takes the max of
 * both into y's row and sets the count back to 0. */
#define EMBER_K_CONV_HALO_THREADS 384
#define EMBER_K_CONV_HALO_MAX_W_STAGES 8
#define EMBER_K_CONV_HALO_BARRIER_BYTES 256
#define EMBER_K_CONV_HALO_OUT_STRIDE 72 /* elements between positions of an epilogue tile */
#define EMBER_K_CONV_HALO_UNITS_MAX_W_TILES 16
/* An epilogue tile of the resident-weights form: n positions of 64 + 8 channels. */
#define EMBER_K_CONV_HALO_UNITS_TILE_BYTES(n) ((n) * EMBER_K_CONV_HALO_OUT_STRIDE * 2)
/* The strip widths (wgmma's N) of the two forms, one kernel each (and each dtype, and for
 * the resident-weights form each halo row, 64 channels or 16), in the order of their
 * kernel ids (cuda_kernels.h). Every width a multiple of 8 that keeps a shape's strips
 * full would be fewer positions computed; these are resnet's: 7 x 7 images two a strip
 * (120), 28 x 28 ones 7 rows a strip (208), 14 x 14 whole (216), 56 x 56 4 rows (232), and
 * the widths Ember had before them. */
#define EMBER_K_CONV_HALO_WIDTHS {120, 128, 144, 208, 216, 224}
#define EMBER_K_CONV_HALO_WIDTH_COUNT 6
#define EMBER_K_CONV_HALO_UNITS_WIDTHS {232, 256}
#define EMBER_K_CONV_HALO_UNITS_WIDTH_COUNT 2
/* The most a launch asks: what a block of the H100 and H200 can have. */
#define EMBER_K_CONV_HALO_MAX_SMEM_BYTES (227 * 1024)
typedef struct ember_k_conv_halo_params {
  /* [n, h, w, c]: boxes of min(c, 64) x pitch x (rows + KH - 1) x strip_images */
  EMBER_K_ALIGNAS(64) uint64_t x_map[16];
  uint64_t w_map[16]; /* [o][k_stride]: boxes of 64 x 64·groups */
  ember_k_conv_igemm_params conv;
  uint64_t pool_rows; /* pooled: the strips' last rows' window maxima */
  int32_t rows, pitch, strips; /* strips = ceil(oh / rows), of one image */
  int32_t images;
  int32_t strips_per_block, groups;
  int32_t chunks; /* c / 64, rounded up */
  int32_t taps, kw;
  int32_t halo_stages, w_stages; /* halo_stages 1 (one chunk only) or 2; w_stages up to
                                    the max */
  int32_t halo_bytes; /* one strip's halo buffer: its rows in whole KB */
  int32_t halo_box_bytes; /* one halo copy: its box's pixels of min(c, 64) · 2 bytes */
  int32_t tiles;
  int32_t strip_images; /* images a strip holds whole (1: a strip is rows of one image) */
  int32_t pooled;       /* 1: the MAX_POOL2D after the conv done in its epilogue */
  uint64_t pool_counts; /* pooled: int32 [n][strips], 0 before and after a launch */
  int32_t image_rows;   /* the pitch rows from a stacked image's first to the next's */
  int32_t reserved[7];
} ember_k_conv_halo_params;

/* The layouts above must be the same for gcc and nvcc: fixed-width fields, no padding. */
#if defined(__cplusplus)
#define EMBER_K_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define EMBER_K_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif
EMBER_K_STATIC_ASSERT(sizeof(ember_k_unary_params) == 40, "unary params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_binary_params) == 48 + 3 * 8 * EMBER_K_MAX_RANK,
                      "binary params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_gather_params) == 48 + 2 * 8 * EMBER_K_MAX_RANK +
                                                          2 * 4 * EMBER_K_MAX_RANK,
                      "gather params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_copy_rows_params) == 64, "copy_rows params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_where_params) == 48 + 4 * 8 * EMBER_K_MAX_RANK,
                      "where params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_cast_params) == 32, "cast params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_embedding_params) == 64, "embedding params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_reduce_params) == 48 + 4 * 8 * EMBER_K_MAX_RANK,
                      "reduce params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_sdpa_params) == 112 + 2 * 8 * EMBER_K_MAX_RANK,
                      "sdpa params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_sdpa_softmax_params) == 48, "sdpa softmax params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_sdpa_flash_params) == 32 + 4 * 3 * 8 + 8 * 4,
                      "sdpa flash params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_conv2d_params) == 32 + 16 * 8 + 8, "conv2d params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_im2col_params) == 16 + 15 * 8 + 8 + 2 * 4 * 5,
                      "im2col params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_conv_igemm_params) == 6 * 8 + 20 * 4 + 4 * 4,
                      "conv igemm params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_nhwc_pack_params) == 48, "nhwc pack params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_conv_igemm_weights_params) == 4 * 8 + 6 * 4,
                      "conv igemm weights params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_space_to_depth_params) == 2 * 8 + 10 * 4,
                      "space to depth params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_im2col_nhwc_params) == 16 + 16 * 4 + 2 * 4 * 5,
                      "im2col nhwc params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_pool2d_params) == 16 + 14 * 8 + 16 + 4 * 4 + 8,
                      "pool2d params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_copy_params) == 24, "copy params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_softmax_params) == 40, "softmax params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_layer_norm_params) == 72, "layer norm params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_bias_act_params) == 48, "bias_act params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_gemv_params) == 64, "gemv params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_linear_tma_params) == 2 * 128 + 4 * 8 + 8 * 4,
                      "linear tma params layout");
EMBER_K_STATIC_ASSERT(offsetof(ember_k_linear_tma_params, w_map) == 128, "linear tma maps");
EMBER_K_STATIC_ASSERT(offsetof(ember_k_gemm_wgmma_params, linear) == 0 &&
                          offsetof(ember_k_gemm_narrow_params, linear) == 0,
                      "both TMA GEMMs' parameters start with the LINEAR's");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_gemm_wgmma_params) == 384 &&
                          offsetof(ember_k_gemm_chain_params, counts) ==
                              EMBER_K_GEMM_CHAIN_MAX * sizeof(ember_k_gemm_wgmma_params),
                      "gemm chain params layout");
EMBER_K_STATIC_ASSERT(sizeof(ember_k_conv_halo_params) == 2 * 128 + 144 + 2 * 8 + 24 * 4,
                      "conv halo params layout");
EMBER_K_STATIC_ASSERT(offsetof(ember_k_conv_halo_params, conv) == 256, "conv halo maps");

#endif /* EMBER_SRC_CUDA_KERNEL_PARAMS_H_ */
