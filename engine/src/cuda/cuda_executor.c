/* The CUDA executor: see cuda_executor.h for what prepare and run do, and
 * docs/cuda-executor.md for the design. */
#include "cuda_executor.h"

#include <inttypes.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "cublaslt_library.h"
#include "cuda_driver.h"
#include "cuda_gemm.h"
#include "cuda_kernels.h"
#include "cuda_profile.h"
#include "kernel_params.h"
#include "settings.h"

/* Every device allocation and staging slot starts on this boundary. */
#define EMBER_CUDA_ALIGNMENT 256u
/* The most GEMM workspace a heuristic may ask for (what NVIDIA suggests for Hopper). */
#define EMBER_CUDA_MAX_WORKSPACE (32u << 20)
#define EMBER_CUDA_MAX_PARAMS 1600u
_Static_assert(sizeof(ember_k_conv_halo_params) <= EMBER_CUDA_MAX_PARAMS &&
                   sizeof(ember_k_gemm_chain_params) <= EMBER_CUDA_MAX_PARAMS &&
                   sizeof(ember_k_gemm_narrow_params) <= EMBER_CUDA_MAX_PARAMS,
               "the largest kernel parameters fit a step's");
/* Tensors whose addresses one kernel step patches (SDPA with a mask has five, a chain of
 * LINEARs four a layer). */
#define EMBER_CUDA_MAX_REFS 16u
_Static_assert(EMBER_CUDA_MAX_REFS <= 32u, "a step's read_refs has a bit a ref");

/* A tensor a step reads or writes: for a kernel step, where in its parameter struct the
 * tensor's device address goes, plus `offset` bytes (a view into the tensor: SDPA's folded
 * layout ops); for a GEMM step, which of A, B, bias, D it is (offset 0). */
typedef struct ember_cuda_ref {
  uint32_t tensor;
  uint32_t slot;
  uint64_t offset;
} ember_cuda_ref;

enum { GEMM_A = 0, GEMM_B = 1, GEMM_BIAS = 2, GEMM_D = 3, GEMM_C = 4 };

/* Which tensor maps a kernel step's parameters hold (patch_kernel_params encodes them). */
typedef enum step_tensor_maps {
  TENSOR_MAPS_NONE = 0,
  TENSOR_MAPS_LINEAR = 1,    /* ember_k_gemm_wgmma_params, ember_k_gemm_narrow_params */
  TENSOR_MAPS_CONV_HALO = 2, /* ember_k_conv_halo_params */
  TENSOR_MAPS_CHAIN = 3,     /* ember_k_gemm_chain_params: each layer's */
} step_tensor_maps;

typedef struct ember_cuda_step {
  bool is_gemm;
  uint32_t op_index;
  /* Kernel steps. args[0] points at params: the kernel's one parameter. Threads a block
   * (EMBER_K_BLOCK but for the flash kernel) and dynamic shared memory bytes. */
  CUfunction function;
  unsigned int grid;
  unsigned int block;
  unsigned int shared_bytes;
  alignas(16) uint8_t params[EMBER_CUDA_MAX_PARAMS];
  void* args[1];
  /* GEMM steps: index into executor->gemms, and the addresses of operands that are not
  * plan tensors (CONV2D's im2col buffer and augmented weights), by GEMM slot. */
  uint32_t gemm;
  uint64_t fixed[EMBER_CUDA_MAX_REFS];
  uint32_t num_refs;
  ember_cuda_ref refs[EMBER_CUDA_MAX_REFS];
  /* Whether a ref is an input or output (whose address can change between runs), and
   * the addresses the graph holds for each ref. */
  bool touches_io;
  /* A step whose parameters hold tensor maps (gemm_wgmma, gemm_narrow, conv_halo): encoded again
   * whenever its addresses are patched (they hold x's and w's addresses). */
  step_tensor_maps tensor_maps;
  uint64_t baked[EMBER_CUDA_MAX_REFS];
  /* Bit r: refs[r] is only read. refs_complete: the refs name every byte the step touches
   * that another step may write (no scratch buffer shared between steps), so that
   * steps_independent can tell whether it may run beside the step before it; beside:
   * group_steps put it in the group of the step before it (no edge between the two). */
  uint32_t read_refs;
  bool refs_complete;
  bool beside;
  /* Multiply-adds of a conv on the implicit-GEMM kernels (0 for other steps): the order
   * of a group's nodes (build_graph). */
  uint64_t macs;
  CUgraphNode node;
} ember_cuda_step;

/* How a run binds one input or output. */
typedef enum io_mode {
  IO_DIRECT = 0,        /* the caller's device memory, used in place */
  IO_STAGED_HOST = 1,   /* host memory, copied through the staging buffer (counted) */
  IO_STAGED_DEVICE = 2, /* device memory we cannot use in place, copied on the device */
} io_mode;

typedef struct ember_cuda_executor {
  ember_executor base;
  /* Set when a step would need more than EMBER_CUDA_MAX_REFS addresses; prepare fails. */
  bool too_many_refs;
  const ember_plan* plan;
  const ember_cuda_driver* driver;
  const ember_cublaslt_library* lt; /* NULL when no op runs on it (executor_needs_cublaslt) */
  CUdevice device;
  int device_ordinal;
  int sm_count;
  CUcontext context; /* device's primary context, retained */
  CUstream stream;
  bool kernels_loaded;
  ember_cuda_kernels kernels;
  cublasLtHandle_t lt_handle; /* NULL with lt */

  CUdeviceptr arena;
  CUdeviceptr constants;
  CUdeviceptr staging;
  CUdeviceptr workspace;
  size_t workspace_size;
  /* EMBEDDING's out-of-range check (0 when the plan has no EMBEDDING), and where a run
   * reads it back. */
  CUdeviceptr embedding_error;
  uint64_t embedding_error_host;
  /* CONV2D as implicit GEMM: the im2col buffer (the largest any such conv needs), the
   * weights with the bias appended to each row, and each op's offset in them
   * (UINT64_MAX: the direct kernel). */
  CUdeviceptr conv_col;
  CUdeviceptr conv_weights;
  /* The float32 sums of the splits of a conv whose K is split over blocks (the largest
   * any such conv needs; executor_conv_splits_k). */
  CUdeviceptr conv_partial;
  uint64_t* conv_weight_offset;
  /* Per op: where a CONV2D on the implicit-GEMM kernel (conv_runs_igemm) has its tap
   * table in conv_weights (UINT64_MAX: none), and whether it takes the ADD after it
   * (resnet's residual) into its epilogue. */
  uint64_t* conv_table_offset;
  bool* conv_residual;
  /* Per tensor: stored channels last ([N, H, W, C], what the implicit-GEMM kernel reads)
   * rather than NCHW: written by such a conv (or a MAX_POOL2D over such a tensor) and read
   * only by such convs, as input or fused residual, or MAX_POOL2Ds (plan_channels_last). */
  bool* channels_last;
  uint32_t channels_last_tensors;
  uint32_t pools_channels_last; /* MAX_POOL2Ds reading and writing channels last */
  uint32_t pools_shared_rows;   /* of those, with their input rows in shared memory */
  uint32_t pools_in_conv;       /* of those, done in the halo conv's epilogue before them */
  /* Per op: a MAX_POOL2D done so, its strips' arrival counts (the conv's pool_counts,
   * zeroed at prepare; else 0). */
  CUdeviceptr* pool_counts;
  uint32_t* readers; /* per tensor: how many op inputs read it (count_readers) */
  uint32_t conv_packs; /* NCHW -> channels-last copies before those convs */
  CUdeviceptr conv_packed; /* the input of such a conv, channels last (the largest any needs) */
  uint32_t conv_igemms;
  uint32_t conv_wgmmas; /* of those, on the wgmma kernel */
  uint32_t conv_folds;  /* of those, reading their input space-to-depth */
  uint32_t conv_fold_rows; /* of those, packed rows at a time through shared memory */
  uint32_t conv_halos;  /* of those, on the halo kernel */
  uint32_t conv_halo_units; /* of those, on its resident-weights form */
  uint32_t conv_halo_stacked; /* of those, with whole images stacked in a strip */
  uint32_t conv_halo_kernels; /* the halo kernels they ran on (ember_cuda_executor_info) */
  uint32_t conv_splits; /* of those, with K split over blocks and a sum step after */
  uint32_t reduce_columns;    /* REDUCEs taken 32 contiguous outputs a block */
  uint32_t reduce_column_vectors; /* of those, 16 bytes of outputs a lane */
  uint32_t conv_residuals;
  /* Per op: a CONV2D too small for the implicit-GEMM kernel that runs as im2col from
   * channels last + cuBLASLt with its output channels last (plan_channels_last decides,
   * build_conv2d_gemm_nhwc builds it), and how many do. */
  bool* conv_gemm_nhwc;
  uint32_t conv_gemms_nhwc;
  /* Per op: an ADD that the LAYER_NORM after it does (its residual, build_layer_norm), so
   * it has no step (can_fuse_add_into_norm), and how many are. */
  bool* add_into_norm;
  uint32_t norm_adds;
  /* LINEARs run (with the activation after them, if any) on the gemm_wgmma kernel
   * (linear_takes_gemm_wgmma), and of those in its narrower tiles (gemm_wgmma_columns). */
  uint32_t gemm_wgmmas;
  uint32_t gemm_wgmmas_small;
  /* LINEARs of few rows run on the narrow GEMM kernel (linear_takes_gemm_narrow). */
  uint32_t gemm_narrows;
  /* gemm_wgmma steps merged into chain kernels (merge_gemm_chains): the chains, their
   * LINEARs, and their tickets and arrival counts (one allocation for all). */
  uint32_t gemm_chains;
  uint32_t gemm_chain_layers;
  CUdeviceptr gemm_chain_counts;
  /* Set in open_cublaslt when Ember's kernels can take every GEMM of the program once
   * gemm_wgmma takes any LINEAR it can: then, under EMBER_CUDA_GEMM_WGMMA=auto, it does, and
   * cuBLASLt is not loaded (linear_takes_gemm_wgmma). */
  bool tma_gemms_only;
  /* The product [O, N·OH·OW] of a CONV2D that runs as one GEMM over all its images, before
   * it is moved into NCHW (the largest any such conv needs; 0 if none does). */
  CUdeviceptr conv_out;
  /* SDPA as two GEMMs: float32 scores, then the softmax in the dtype, for the largest
   * such op (0: every SDPA runs the fused kernel). */
  CUdeviceptr sdpa_scratch;

  /* Inputs then outputs: slot = io_index, or num_inputs + io_index. */
  uint32_t num_io;
  uint64_t* staging_offset; /* per slot, in `staging` */
  uint32_t* io_alignment;   /* per slot: what a bound pointer must be aligned to */
  uint64_t* io_address;     /* per slot: the address this run uses */
  uint8_t* io_mode;         /* per slot: io_mode of this run */

  /* Per op: whether this GEMM takes the next op (an activation) into its epilogue. Per
   * tensor: its offset in `arena` when moved out of the plan's place, else UINT64_MAX. */
  bool* fuse_next;
  uint64_t* relocated;
  uint32_t relocations;

  uint32_t num_gemms;
  ember_cuda_gemm* gemms;
  uint32_t num_steps;
  ember_cuda_step* steps;

  bool use_graph;
  CUgraph graph;
  CUgraphExec graph_exec;
  /* On a GPU of compute capability 9.0 or newer, kernel-to-kernel edges of the graph are
   * programmatic (EMBER_CUDA_PDL, settings.h); how many the graph has. Under auto
   * (pdl_auto) prepare times the graph both ways and keeps the faster: pdl_timed says it
   * did, with the median replay of each in microseconds. */
  bool use_pdl;
  bool pdl_auto;
  uint32_t programmatic_edges;
  bool pdl_timed;
  float pdl_off_us, pdl_on_us;

  /* EMBER_CUDA_PROFILE=1: per-step times of every run (then no graph), reported at
   * destroy. NULL otherwise. */
  ember_cuda_profile* profile;
  ember_cuda_init_timer init_timer;

  /* Candidate algorithms choose_gemm_algorithms timed (or tried to) at prepare. */
  uint32_t gemm_candidates_timed;
  /* SDPA ops on the flash kernel. Per op: whether it is a layout op folded into an SDPA's
   * views (no step; NULL when no SDPA takes the flash kernel), and for each SDPA on the
   * flash kernel its q, k, v, y views (4 per op); the copies the folds saved. */
  uint32_t sdpa_flash;
  bool* folded;
  struct sdpa_view* sdpa_views;
  uint32_t folded_layout_ops;

  /* Cumulative, over runs (the copy counters are in `base`). */
  uint64_t graph_node_updates;
  uint64_t graph_rebuilds;
} ember_cuda_executor;

#define CU_CHECK(executor, expr, call_text) \
  EMBER_CU_RETURN_IF_ERROR((executor)->driver, (expr), (call_text))

/* ---- addresses ------------------------------------------------------------------------ */

static uint32_t io_slot(const ember_cuda_executor* executor, const ember_tensor_desc* tensor) {
  return tensor->storage == EMBER_STORAGE_INPUT ? tensor->io_index
                                                : executor->plan->num_inputs + tensor->io_index;
}

static bool is_io(const ember_tensor_desc* tensor) {
  return tensor->storage == EMBER_STORAGE_INPUT || tensor->storage == EMBER_STORAGE_OUTPUT;
}

/* The device address of a tensor in this run (inputs and outputs: as bound). */
static uint64_t tensor_address(const ember_cuda_executor* executor, uint32_t t) {
  const ember_tensor_desc* tensor = &executor->plan->tensors[t];
  switch (tensor->storage) {
    case EMBER_STORAGE_CONSTANT: return executor->constants + tensor->data_offset;
    case EMBER_STORAGE_INTERMEDIATE:
      return executor->arena + (executor->relocated[t] != UINT64_MAX ? executor->relocated[t]
                                                                      : tensor->data_offset);
    default: return executor->io_address[io_slot(executor, tensor)];
  }
}

static uint64_t tensor_address_callback(void* context, uint32_t t) {
  return tensor_address((const ember_cuda_executor*)context, t);
}

/* ---- building steps ------------------------------------------------------------------- */

static ember_status* allocate(ember_cuda_executor* executor, size_t bytes, const char* what,
                              CUdeviceptr* out);

static uint64_t ceil_div_u64(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

static unsigned int grid_for_elements(const ember_cuda_executor* executor, uint64_t count) {
  uint64_t blocks = ceil_div_u64(count, EMBER_K_BLOCK);
  const uint64_t cap = (uint64_t)executor->sm_count * 8u;
  if (blocks > cap) blocks = cap;
  return blocks == 0 ? 1u : (unsigned int)blocks;
}

/* For kernels whose fast path gives each thread 16 bytes (8 float16/bfloat16 or 4 float32
 * elements): a thread per 16 bytes, not per element. Their scalar fallback (unaligned
 * pointers) is a grid-stride loop, correct with any grid. */
static unsigned int grid_for_vectors(const ember_cuda_executor* executor, uint64_t nbytes) {
  return grid_for_elements(executor, nbytes / 16u + (nbytes % 16u != 0));
}

static unsigned int grid_for_rows(const ember_cuda_executor* executor, uint64_t rows) {
  const uint64_t cap = (uint64_t)executor->sm_count * 32u;
  if (rows > cap) rows = cap;
  return rows == 0 ? 1u : (unsigned int)rows;
}

static ember_cuda_step* add_step(ember_cuda_executor* executor, uint32_t op_index) {
  ember_cuda_step* step = &executor->steps[executor->num_steps++];
  memset(step, 0, sizeof *step);
  step->op_index = op_index;
  return step;
}

/* The address of `tensor` plus `offset` bytes goes to `slot` of the step's parameters. */
static void add_ref_at(ember_cuda_executor* executor, ember_cuda_step* step, uint32_t tensor,
                       uint32_t slot, uint64_t offset) {
  if (step->num_refs >= EMBER_CUDA_MAX_REFS) {
    executor->too_many_refs = true;
    return;
  }
  step->refs[step->num_refs].tensor = tensor;
  step->refs[step->num_refs].slot = slot;
  step->refs[step->num_refs].offset = offset;
  ++step->num_refs;
  if (is_io(&executor->plan->tensors[tensor])) step->touches_io = true;
}

static void add_ref(ember_cuda_executor* executor, ember_cuda_step* step, uint32_t tensor,
                    uint32_t slot) {
  add_ref_at(executor, step, tensor, slot, 0);
}

/* A ref the step only reads (steps_independent). */
static void add_read_ref(ember_cuda_executor* executor, ember_cuda_step* step, uint32_t tensor,
                         uint32_t slot) {
  if (step->num_refs < EMBER_CUDA_MAX_REFS) step->read_refs |= 1u << step->num_refs;
  add_ref(executor, step, tensor, slot);
}

static ember_cuda_step* add_kernel_step(ember_cuda_executor* executor, uint32_t op_index,
                                        uint32_t kernel, unsigned int grid, const void* params,
                                        size_t params_size) {
  ember_cuda_step* step = add_step(executor, op_index);
  step->function = executor->kernels.functions[kernel];
  step->grid = grid;
  step->block = EMBER_K_BLOCK;
  memcpy(step->params, params, params_size);
  step->args[0] = step->params;
  return step;
}

static ember_status* encode_linear_tma_maps(const ember_cuda_driver* driver,
                                            ember_k_linear_tma_params* p);
static ember_status* encode_conv_halo_maps(const ember_cuda_driver* driver,
                                           ember_k_conv_halo_params* p);

/* Writes the current addresses of a kernel step's tensors into its parameter struct (and
 * the tensor maps made from them). */
static ember_status* patch_kernel_params(const ember_cuda_executor* executor,
                                         ember_cuda_step* step) {
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    const uint64_t address =
        tensor_address(executor, step->refs[r].tensor) + step->refs[r].offset;
    memcpy(step->params + step->refs[r].slot, &address, sizeof address);
  }
  if (step->tensor_maps == TENSOR_MAPS_LINEAR) {
    ember_k_linear_tma_params p; /* the first member of either kernel's parameters */
    memcpy(&p, step->params, sizeof p);
    EMBER_RETURN_IF_ERROR(encode_linear_tma_maps(executor->driver, &p));
    memcpy(step->params, &p, sizeof p);
  } else if (step->tensor_maps == TENSOR_MAPS_CHAIN) {
    ember_k_gemm_chain_params p;
    memcpy(&p, step->params, sizeof p);
    for (int32_t l = 0; l < p.layers; ++l) {
      EMBER_RETURN_IF_ERROR(encode_linear_tma_maps(executor->driver, &p.layer[l].linear));
    }
    memcpy(step->params, &p, sizeof p);
  } else if (step->tensor_maps == TENSOR_MAPS_CONV_HALO) {
    ember_k_conv_halo_params p;
    memcpy(&p, step->params, sizeof p);
    EMBER_RETURN_IF_ERROR(encode_conv_halo_maps(executor->driver, &p));
    memcpy(step->params, &p, sizeof p);
  }
  return NULL;
}

static ember_k_unary_op unary_op_of(const ember_plan* plan, const ember_op_desc* op) {
  switch (op->opcode) {
    case EMBER_OP_RELU: return EMBER_K_UNARY_RELU;
    case EMBER_OP_GELU:
      return ember_plan_op_attr(plan, op, EMBER_ATTR_GELU_APPROXIMATE) == 0
                 ? EMBER_K_UNARY_GELU_ERF
                 : EMBER_K_UNARY_GELU_TANH;
    case EMBER_OP_SIGMOID: return EMBER_K_UNARY_SIGMOID;
    case EMBER_OP_TANH: return EMBER_K_UNARY_TANH;
    case EMBER_OP_NEG: return EMBER_K_UNARY_NEG;
    case EMBER_OP_EXP: return EMBER_K_UNARY_EXP;
    case EMBER_OP_LOG: return EMBER_K_UNARY_LOG;
    case EMBER_OP_SQRT: return EMBER_K_UNARY_SQRT;
    case EMBER_OP_RSQRT: return EMBER_K_UNARY_RSQRT;
    case EMBER_OP_ABS: return EMBER_K_UNARY_ABS;
    case EMBER_OP_RECIPROCAL: return EMBER_K_UNARY_RECIPROCAL;
    case EMBER_OP_CLAMP: return EMBER_K_UNARY_CLAMP;
    default: return EMBER_K_UNARY_SILU;
  }
}

static float attr_f64_as_float(const ember_plan* plan, const ember_op_desc* op, uint32_t i) {
  const int64_t bits = ember_plan_op_attr(plan, op, i);
  double value;
  memcpy(&value, &bits, sizeof value);
  return (float)value;
}

static void build_unary(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  ember_k_unary_params p = {0};
  p.count = y->numel;
  p.op = (int32_t)unary_op_of(plan, op);
  if (op->opcode == EMBER_OP_CLAMP) {
    p.clamp_min = attr_f64_as_float(plan, op, EMBER_ATTR_CLAMP_MIN_F64);
    p.clamp_max = attr_f64_as_float(plan, op, EMBER_ATTR_CLAMP_MAX_F64);
  }
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_UNARY + ember_cuda_dtype_index(y->dtype),
      grid_for_vectors(executor, y->nbytes), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_unary_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_unary_params, y));
}

/* Element strides of `t` broadcast to `rank` output dims (0 where broadcast). */
static void broadcast_strides(const ember_tensor_desc* t, uint32_t rank, int64_t* out) {
  int64_t stride = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    const uint32_t d = rank - 1 - i;
    if (i < t->rank && t->dims[t->rank - 1 - i] != 1) {
      out[d] = stride;
      stride *= t->dims[t->rank - 1 - i];
    } else {
      out[d] = 0;
    }
  }
}

static ember_k_binary_op binary_op_of(ember_opcode opcode) {
  switch (opcode) {
    case EMBER_OP_SUB: return EMBER_K_BINARY_SUB;
    case EMBER_OP_MUL: return EMBER_K_BINARY_MUL;
    case EMBER_OP_DIV: return EMBER_K_BINARY_DIV;
    case EMBER_OP_POW: return EMBER_K_BINARY_POW;
    case EMBER_OP_MAXIMUM: return EMBER_K_BINARY_MAXIMUM;
    case EMBER_OP_MINIMUM: return EMBER_K_BINARY_MINIMUM;
    default: return EMBER_K_BINARY_ADD;
  }
}

/* Whether the binary kernel's 16-byte path takes this shape (the kernel checks the same,
 * and the pointers' alignment, itself; this only sizes the grid): rank 1, or rank 2 with
 * rows of whole vectors; each operand contiguous or broadcast along the last dim. */
static bool binary_vectorizable(const ember_k_binary_params* p, uint64_t lanes) {
  if (p->count > INT32_MAX || (p->rank != 1 && (p->rank != 2 || p->dims[1] % (int64_t)lanes != 0))) {
    return false;
  }
  const int64_t* strides[2] = {p->a_strides, p->b_strides};
  for (int k = 0; k < 2; ++k) {
    const int64_t inner = strides[k][p->rank - 1];
    if (inner != 0 && (inner != 1 || (p->rank == 2 && strides[k][0] % (int64_t)lanes != 0))) {
      return false;
    }
  }
  return true;
}

/* Binary op i, and the RELU `fused` (an op, or EMBER_PLAN_NO_INDEX) whose output it then
 * writes. */
static void build_binary(ember_cuda_executor* executor, uint32_t i, uint32_t fused) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* a = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* b = ember_plan_op_input_tensor(plan, op, 1);
  const uint32_t y_index = fused == EMBER_PLAN_NO_INDEX
                               ? ember_plan_op_output(plan, op, 0)
                               : ember_plan_op_output(plan, &plan->ops[fused], 0);
  const ember_tensor_desc* y = &plan->tensors[y_index];
  if (y->numel == 0) return;
  int64_t as[EMBER_MAX_RANK], bs[EMBER_MAX_RANK];
  broadcast_strides(a, y->rank, as);
  broadcast_strides(b, y->rank, bs);
  ember_k_binary_params p = {0};
  p.count = y->numel;
  p.op = (int32_t)binary_op_of(op->opcode);
  p.relu = fused != EMBER_PLAN_NO_INDEX;
  /* Collapse: drop size-1 dims, merge a dim into the one before it when both inputs
   * step through the pair as through one dim. */
  uint32_t rank = 0;
  for (uint32_t d = 0; d < y->rank; ++d) {
    if (y->dims[d] == 1) continue;
    if (rank > 0 && p.a_strides[rank - 1] == as[d] * y->dims[d] &&
        p.b_strides[rank - 1] == bs[d] * y->dims[d]) {
      p.dims[rank - 1] *= y->dims[d];
      p.a_strides[rank - 1] = as[d];
      p.b_strides[rank - 1] = bs[d];
      continue;
    }
    p.dims[rank] = y->dims[d];
    p.a_strides[rank] = as[d];
    p.b_strides[rank] = bs[d];
    ++rank;
  }
  if (rank == 0) { /* one element */
    p.dims[0] = 1;
    rank = 1;
  }
  p.rank = rank;
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_BINARY + ember_cuda_dtype_index(y->dtype),
      binary_vectorizable(&p, 16u / ember_dtype_size(y->dtype))
          ? grid_for_vectors(executor, y->nbytes)
          : grid_for_elements(executor, y->numel),
      &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_binary_params, a));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1), offsetof(ember_k_binary_params, b));
  add_ref(executor, step, y_index, offsetof(ember_k_binary_params, y));
}

static void build_copy(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->nbytes == 0) return;
  ember_k_copy_params p = {0};
  p.nbytes = y->nbytes;
  ember_cuda_step* step =
      add_kernel_step(executor, i, EMBER_CUDA_KERNEL_COPY_BYTES,
                      grid_for_elements(executor, (y->nbytes + 15u) / 16u), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_copy_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_copy_params, y));
}

/* A RESHAPE whose output the plan put on its input's bytes is a view (docs/plan-format.md,
 * "Memory plan"): no step. The addresses are compared, not the plan's offsets, since
 * plan_fusions may have moved the input (a fused activation's output) elsewhere; bound
 * inputs and outputs are not in the arena and keep the copy. */
static void build_reshape(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const uint32_t x = ember_plan_op_input(plan, op, 0);
  const uint32_t y = ember_plan_op_output(plan, op, 0);
  if (plan->tensors[x].storage == EMBER_STORAGE_INTERMEDIATE &&
      plan->tensors[y].storage == EMBER_STORAGE_INTERMEDIATE &&
      tensor_address(executor, x) == tensor_address(executor, y)) {
    return;
  }
  build_copy(executor, i);
}

static void add_gather_step(ember_cuda_executor* executor, uint32_t i, uint32_t rank,
                            const int64_t* dims, const int64_t* x_strides, int64_t x_offset);

static void build_permute(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  int64_t x_strides[EMBER_MAX_RANK], strides[EMBER_MAX_RANK];
  int64_t stride = 1;
  for (uint32_t d = x->rank; d-- > 0;) {
    x_strides[d] = stride;
    stride *= x->dims[d];
  }
  for (uint32_t d = 0; d < y->rank; ++d) strides[d] = x_strides[ember_plan_op_attr(plan, op, d)];
  add_gather_step(executor, i, y->rank, y->dims, strides, 0);
}

static void build_softmax(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  const uint32_t dim = (uint32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_SOFTMAX_DIM);
  ember_k_softmax_params p = {0};
  p.outer = 1;
  p.inner = 1;
  for (uint32_t d = 0; d < dim; ++d) p.outer *= y->dims[d];
  p.dim = y->dims[dim];
  for (uint32_t d = dim + 1; d < y->rank; ++d) p.inner *= y->dims[d];
  const uint32_t dt = ember_cuda_dtype_index(y->dtype);
  ember_cuda_step* step =
      p.inner == 1
          ? add_kernel_step(executor, i, EMBER_CUDA_KERNEL_SOFTMAX_ROWS + dt,
                            grid_for_rows(executor, (uint64_t)p.outer), &p, sizeof p)
          : add_kernel_step(executor, i, EMBER_CUDA_KERNEL_SOFTMAX_STRIDED + dt,
                            grid_for_elements(executor, (uint64_t)(p.outer * p.inner)), &p,
                            sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_softmax_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_softmax_params, y));
}

static void build_layer_norm(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  const uint32_t nd = (uint32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_LAYER_NORM_NORMALIZED_NDIM);
  const int64_t eps_bits = ember_plan_op_attr(plan, op, EMBER_ATTR_LAYER_NORM_EPS_F64);
  double eps;
  memcpy(&eps, &eps_bits, sizeof eps);
  ember_k_layer_norm_params p = {0};
  p.cols = 1;
  for (uint32_t d = y->rank - nd; d < y->rank; ++d) p.cols *= y->dims[d];
  p.rows = (int64_t)(y->numel / (uint64_t)p.cols);
  p.eps = (float)eps;
  p.has_weight = ember_plan_op_attr(plan, op, EMBER_ATTR_LAYER_NORM_HAS_WEIGHT) != 0;
  p.has_bias = ember_plan_op_attr(plan, op, EMBER_ATTR_LAYER_NORM_HAS_BIAS) != 0;
  p.has_residual = i > 0 && executor->add_into_norm[i - 1];
  /* Short rows take a warp each (kernel_params.h), so a block holds several. */
  const uint64_t rows_per_block = p.cols <= EMBER_K_LAYER_NORM_WARP_COLS ? EMBER_K_BLOCK / 32u : 1u;
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_LAYER_NORM + ember_cuda_dtype_index(y->dtype),
      grid_for_rows(executor, ((uint64_t)p.rows + rows_per_block - 1) / rows_per_block), &p,
      sizeof p);
  if (p.has_residual) { /* x + r: the ADD's inputs (can_fuse_add_into_norm) */
    add_ref(executor, step, ember_plan_op_input(plan, &plan->ops[i - 1], 0),
            offsetof(ember_k_layer_norm_params, x));
    add_ref(executor, step, ember_plan_op_input(plan, &plan->ops[i - 1], 1),
            offsetof(ember_k_layer_norm_params, r));
  } else {
    add_ref(executor, step, ember_plan_op_input(plan, op, 0),
            offsetof(ember_k_layer_norm_params, x));
  }
  if (p.has_weight) {
    add_ref(executor, step, ember_plan_op_input(plan, op, 1),
            offsetof(ember_k_layer_norm_params, w));
  }
  if (p.has_bias) {
    add_ref(executor, step, ember_plan_op_input(plan, op, 1u + (uint32_t)p.has_weight),
            offsetof(ember_k_layer_norm_params, b));
  }
  add_ref(executor, step, ember_plan_op_output(plan, op, 0),
          offsetof(ember_k_layer_norm_params, y));
}

static void add_bias_act_step(ember_cuda_executor* executor, uint32_t op_index,
                              uint32_t y_tensor, uint32_t bias_tensor, int32_t activation,
                              bool zero_input) {
  const ember_tensor_desc* y = &executor->plan->tensors[y_tensor];
  ember_k_bias_act_params p = {0};
  p.cols = y->dims[y->rank - 1];
  p.rows = (int64_t)(y->numel / (uint64_t)p.cols);
  p.act = activation;
  p.has_bias = bias_tensor != EMBER_PLAN_NO_INDEX;
  p.zero_input = zero_input;
  ember_cuda_step* step = add_kernel_step(
      executor, op_index, EMBER_CUDA_KERNEL_BIAS_ACT + ember_cuda_dtype_index(y->dtype),
      grid_for_vectors(executor, y->nbytes), &p, sizeof p);
  add_ref(executor, step, y_tensor, offsetof(ember_k_bias_act_params, y));
  if (p.has_bias) add_ref(executor, step, bias_tensor, offsetof(ember_k_bias_act_params, bias));
}

/* Whether a LINEAR runs as the gemv kernel instead of a cuBLASLt GEMM: weight [N, K],
 * K > 0, and at most EMBER_K_GEMV_MAX_ROWS rows of x, or at most
 * EMBER_K_GEMV_GROUPED_MAX_ROWS of a product of at most EMBER_K_GEMV_GROUPED_MAX_MACS
 * multiply-adds (kernel_params.h says why), counted at the plan's dims (a dynamic batch's
 * largest, as everything here). */
static bool linear_takes_gemv(const ember_plan* plan, const ember_op_desc* op) {
  if (op->opcode != EMBER_OP_LINEAR ||
      ember_plan_op_attr(plan, op, EMBER_ATTR_LINEAR_WEIGHT_LAYOUT) != 0) {
    return false;
  }
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const int64_t k = x->dims[x->rank - 1];
  if (y->numel == 0 || k <= 0) return false;
  const uint64_t rows = x->numel / (uint64_t)k;
  if (rows <= EMBER_K_GEMV_MAX_ROWS) return true;
  /* y is [rows, N]: rows * N * K is y's numel times K, and rows <= 64 bounds it. */
  return rows <= EMBER_K_GEMV_GROUPED_MAX_ROWS &&
         y->numel <= EMBER_K_GEMV_GROUPED_MAX_MACS / (uint64_t)k;
}

static bool is_binary(ember_opcode opcode) {
  return opcode == EMBER_OP_ADD || opcode == EMBER_OP_SUB || opcode == EMBER_OP_MUL ||
         opcode == EMBER_OP_DIV || opcode == EMBER_OP_POW || opcode == EMBER_OP_MAXIMUM ||
         opcode == EMBER_OP_MINIMUM;
}

static bool is_activation(ember_opcode opcode) {
  return opcode == EMBER_OP_RELU || opcode == EMBER_OP_GELU || opcode == EMBER_OP_SIGMOID ||
         opcode == EMBER_OP_TANH || opcode == EMBER_OP_SILU;
}

/* Whether cuBLASLt's epilogue computes activation op: RELU, or GELU in the tanh form (what
 * CUBLASLT_EPILOGUE_GELU computes). */
static bool cublaslt_epilogue_has(const ember_plan* plan, const ember_op_desc* op) {
  return op->opcode == EMBER_OP_RELU ||
         (op->opcode == EMBER_OP_GELU &&
          ember_plan_op_attr(plan, op, EMBER_ATTR_GELU_APPROXIMATE) == 1);
}

/* Whether op i (LINEAR or MATMUL) can take op i + 1 into its epilogue: RELU, or GELU in
 * the tanh form (what CUBLASLT_EPILOGUE_GELU computes), or any activation for a LINEAR
 * that runs as the gemv kernel, the narrow GEMM kernel or with it on the gemm_wgmma
 * kernel (which apply activate()); a CONV2D takes a RELU (in its GEMM's epilogue, or a
 * ReLU in place after it), and so does a binary op (its kernel's `relu`). The activation
 * reads only the op's output, and nothing else reads that. */
static bool linear_takes_gemm_wgmma(const ember_cuda_executor* executor, const ember_op_desc* op,
                                    const ember_op_desc* next);
typedef struct gemm_narrow_shape gemm_narrow_shape;
static bool linear_takes_gemm_narrow(const ember_cuda_executor* executor, const ember_op_desc* op,
                                     gemm_narrow_shape* out);

static bool can_fuse_activation(const ember_cuda_executor* executor, uint32_t i,
                                const uint32_t* readers) {
  const ember_plan* plan = executor->plan;
  if (i + 1 >= plan->num_ops) return false;
  const ember_op_desc* op = &plan->ops[i];
  const ember_op_desc* next = &plan->ops[i + 1];
  if (op->num_outputs == 0 || next->num_inputs == 0) return false;
  const uint32_t t = ember_plan_op_output(plan, op, 0);
  if (ember_plan_op_input(plan, next, 0) != t ||
      plan->tensors[t].storage != EMBER_STORAGE_INTERMEDIATE || readers[t] != 1 ||
      plan->tensors[t].numel == 0) {
    return false;
  }
  if (op->opcode == EMBER_OP_CONV2D || is_binary(op->opcode)) return next->opcode == EMBER_OP_RELU;
  if (op->opcode != EMBER_OP_LINEAR && op->opcode != EMBER_OP_MATMUL) return false;
  if (!cublaslt_epilogue_has(plan, next) &&
      !(is_activation(next->opcode) &&
        (linear_takes_gemv(plan, op) || linear_takes_gemm_narrow(executor, op, NULL))) &&
      !linear_takes_gemm_wgmma(executor, op, next)) {
    return false;
  }
  /* A GEMM with nothing to compute (K == 0) is not a cuBLASLt call. */
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  return x->dims[x->rank - 1] != 0;
}

/* Whether a and b have the same rank and dims: an elementwise operand that needs no
 * broadcast. */
static bool same_dims(const ember_tensor_desc* a, const ember_tensor_desc* b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d) {
    if (a->dims[d] != b->dims[d]) return false;
  }
  return true;
}

static bool executor_conv_runs_igemm(const ember_cuda_executor* executor, const ember_op_desc* op);
static bool executor_conv_folds(const ember_cuda_executor* executor, const ember_op_desc* op);
static bool executor_conv_may_run_gemm_nhwc(const ember_cuda_executor* executor,
                                            const ember_op_desc* op);
static bool conv_gemm_sizes(const ember_plan* plan, const ember_op_desc* op,
                            uint64_t* out_col_bytes, uint64_t* out_weight_bytes,
                            uint64_t* out_flat_bytes);

/* Whether CONV2D op i takes the ADD after it (a resnet block's residual) into the
 * implicit-GEMM kernel's epilogue, or into its cuBLASLt GEMM as C (one GEMM per image,
 * which writes NCHW y directly; resnet18 at batch 1 ran its 8 ADDs as kernels of their
 * own): the conv runs one of those ways, its output is read only by the ADD, and the
 * ADD's other input has the output's dtype and dims (no broadcast). */
static bool can_fuse_residual(const ember_cuda_executor* executor, uint32_t i,
                              const uint32_t* readers) {
  const ember_plan* plan = executor->plan;
  if (i + 1 >= plan->num_ops) return false;
  const ember_op_desc* op = &plan->ops[i];
  const ember_op_desc* next = &plan->ops[i + 1];
  if (op->opcode != EMBER_OP_CONV2D || next->opcode != EMBER_OP_ADD || next->num_inputs != 2) {
    return false;
  }
  uint64_t col, weight, flat;
  if (!executor_conv_runs_igemm(executor, op) &&
      !(executor->lt_handle != NULL && conv_gemm_sizes(plan, op, &col, &weight, &flat) &&
        flat == 0)) {
    return false;
  }
  const uint32_t t = ember_plan_op_output(plan, op, 0);
  const uint32_t a = ember_plan_op_input(plan, next, 0), b = ember_plan_op_input(plan, next, 1);
  if ((a != t) == (b != t) || plan->tensors[t].storage != EMBER_STORAGE_INTERMEDIATE ||
      readers[t] != 1) {
    return false;
  }
  const ember_tensor_desc* y = &plan->tensors[t];
  const ember_tensor_desc* other = &plan->tensors[a == t ? b : a];
  const ember_tensor_desc* sum = ember_plan_op_output_tensor(plan, next, 0);
  return other->dtype == y->dtype && same_dims(other, y) && same_dims(sum, y);
}

/* Whether ADD op i is done by the LAYER_NORM right after it, which then normalizes the
 * ADD's inputs summed (build_layer_norm): the ADD's output is an intermediate that only
 * that LAYER_NORM reads, as its input, and both ADD inputs have its dtype and dims (no
 * broadcast). The encoder's post-norm layers, x = norm(x + sublayer(x)), had 8 ADD
 * kernels of their own. */
static bool can_fuse_add_into_norm(const ember_plan* plan, uint32_t i, const uint32_t* readers) {
  if (i + 1 >= plan->num_ops) return false;
  const ember_op_desc* op = &plan->ops[i];
  const ember_op_desc* next = &plan->ops[i + 1];
  if (op->opcode != EMBER_OP_ADD || next->opcode != EMBER_OP_LAYER_NORM || op->num_inputs != 2) {
    return false;
  }
  const uint32_t t = ember_plan_op_output(plan, op, 0);
  const ember_tensor_desc* sum = &plan->tensors[t];
  if (ember_plan_op_input(plan, next, 0) != t || readers[t] != 1 ||
      sum->storage != EMBER_STORAGE_INTERMEDIATE) {
    return false;
  }
  for (uint32_t k = 0; k < 2; ++k) {
    const ember_tensor_desc* in = ember_plan_op_input_tensor(plan, op, k);
    if (in->dtype != sum->dtype || !same_dims(in, sum)) return false;
  }
  return true;
}

/* The ADD input of a fused residual that is not the conv's output. */
static uint32_t residual_input(const ember_plan* plan, uint32_t conv) {
  const ember_op_desc* add = &plan->ops[conv + 1];
  const uint32_t t = ember_plan_op_output(plan, &plan->ops[conv], 0);
  const uint32_t a = ember_plan_op_input(plan, add, 0);
  return a == t ? ember_plan_op_input(plan, add, 1) : a;
}

/* The op whose output CONV2D op i writes: itself, or the residual ADD and the RELU it
 * takes (conv_residual, fuse_next). */
static uint32_t conv_last_fused(const ember_cuda_executor* executor, uint32_t i) {
  uint32_t last = executor->conv_residual[i] ? i + 1 : i;
  if (executor->fuse_next[last]) ++last;
  return last;
}

/* Decides which tensors stay channels last between convs that read and write that
 * layout, so that the conv that reads one needs no pack (resnet18 at batch 64 packed 19
 * inputs, ~200 us). Those convs: the implicit-GEMM kernel's, and the ones too small for
 * it that may run as im2col from channels last + cuBLASLt (executor_conv_may_run_gemm_nhwc:
 * resnet18 at batch 1, whose GEMMs with the output channels as M ran 30-50% faster in
 * layer3 and layer4 on the H200). Tensor t qualifies when such a conv writes it (after
 * what it fuses) or a MAX_POOL2D does, every op that reads it is such a conv reading it
 * as input, or the ADD such a conv fuses, reading it as residual, or a REDUCE (which walks
 * any strides: resnet's global average pool), or a MAX_POOL2D, it is an intermediate of 4
 * dims whose channels are a multiple of 8 (so channels last takes the same bytes as NCHW)
 * at a 16-byte aligned offset, and the layout rules below hold. Runs after plan_fusions;
 * sets conv_gemm_nhwc. */
static ember_status* relocate_tensor(ember_cuda_executor* executor, uint32_t t,
                                     uint64_t* in_out_extra);

/* Sets tensor t to NCHW; whether it was channels last. */
static bool drop_channels_last(ember_cuda_executor* executor, uint32_t t) {
  const bool was = executor->channels_last[t];
  executor->channels_last[t] = false;
  return was;
}

/* Whether tensor t may be stored channels last: an intermediate of 4 dims whose channels
 * are a multiple of 8 (the same bytes as NCHW), at a 16-byte aligned offset (the kernels
 * move 8 channels as 16 aligned bytes). */
static bool may_be_channels_last(const ember_tensor_desc* t) {
  return t->storage == EMBER_STORAGE_INTERMEDIATE && t->rank == 4 && t->dims[1] % 8 == 0 &&
         t->data_offset % 16 == 0;
}

static bool is_reduce(ember_opcode opcode) {
  return opcode == EMBER_OP_REDUCE_SUM || opcode == EMBER_OP_REDUCE_MEAN ||
         opcode == EMBER_OP_REDUCE_MAX;
}

static ember_status* plan_channels_last(ember_cuda_executor* executor, uint64_t* in_out_extra) {
  const ember_plan* plan = executor->plan;
  executor->channels_last = calloc(plan->num_tensors, sizeof(bool));
  executor->conv_gemm_nhwc = calloc(plan->num_ops == 0 ? 1 : plan->num_ops, sizeof(bool));
  bool* read_otherwise = calloc(plan->num_tensors, sizeof(bool));
  bool* may_nhwc = calloc(plan->num_ops == 0 ? 1 : plan->num_ops, sizeof(bool));
  if (executor->channels_last == NULL || executor->conv_gemm_nhwc == NULL ||
      read_otherwise == NULL || may_nhwc == NULL) {
    free(read_otherwise);
    free(may_nhwc);
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    const ember_op_desc* op = &plan->ops[i];
    if (op->opcode == EMBER_OP_CONV2D) may_nhwc[i] = executor_conv_may_run_gemm_nhwc(executor, op);
    if (op->opcode == EMBER_OP_CONV2D && (may_nhwc[i] || executor_conv_runs_igemm(executor, op))) {
      const uint32_t last = conv_last_fused(executor, i);
      if (may_be_channels_last(ember_plan_op_output_tensor(plan, &plan->ops[last], 0))) {
        executor->channels_last[ember_plan_op_output(plan, &plan->ops[last], 0)] = true;
      }
      /* What the conv and the ops it fuses read: its input, the residual; not its weights,
       * nor its own output (which the fused ADD reads and nothing stores). A conv that
       * folds its input space-to-depth reads it NCHW. */
      for (uint32_t k = executor_conv_folds(executor, op) ? 0 : 1; k < op->num_inputs; ++k) {
        read_otherwise[ember_plan_op_input(plan, op, k)] = true;
      }
      i = last;
      continue;
    }
    if (is_reduce(op->opcode) && ember_plan_op_input_tensor(plan, op, 0)->rank == 4) continue;
    /* A MAX_POOL2D reads and writes either layout (channels last in 32-bit math); the
     * rules below give x and y one. */
    if (op->opcode == EMBER_OP_MAX_POOL2D &&
        ember_plan_op_input_tensor(plan, op, 0)->numel <= (uint64_t)INT32_MAX &&
        ember_plan_op_output_tensor(plan, op, 0)->numel <= (uint64_t)INT32_MAX) {
      const uint32_t y = ember_plan_op_output(plan, op, 0);
      executor->channels_last[y] = may_be_channels_last(&plan->tensors[y]);
      continue;
    }
    for (uint32_t k = 0; k < op->num_inputs; ++k) read_otherwise[ember_plan_op_input(plan, op, k)] = true;
  }
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    if (read_otherwise[t]) executor->channels_last[t] = false;
  }
  free(read_otherwise);
  /* Layout rules, applied until none changes anything (each only drops a tensor to NCHW
   * or moves one, so this ends):
   * - A conv that may run as im2col + cuBLASLt channels last does so only when its output
   *   and its residual (cuBLASLt's C, which has D's layout) are both channels last; else
   *   it runs im2col + GEMM in NCHW, which reads its input and residual NCHW.
   * - A conv on the implicit-GEMM kernel whose output shares its residual's bytes needs
   *   both in one layout. An output that is channels last over an NCHW residual moves to
   *   bytes of its own (resnet18 at batch 64: the first block's residual is the max
   *   pool's output, and dropping the block's output to NCHW cascaded through every block
   *   whose residual shares bytes with its output, 3 packs of ~22 us); otherwise the
   *   residual, channels last, drops to NCHW with the output.
   * - A MAX_POOL2D's input and output are both channels last or both NCHW (resnet's max
   *   pool between the stem and layer1: channels last, it needs no pack after it, and the
   *   first block's residual is channels last). */
  ember_status* status = NULL;
  for (bool changed = true; changed && status == NULL;) {
    changed = false;
    for (uint32_t i = 0; i < plan->num_ops; ++i) {
      if (plan->ops[i].opcode == EMBER_OP_MAX_POOL2D) {
        const uint32_t x = ember_plan_op_input(plan, &plan->ops[i], 0);
        const uint32_t y = ember_plan_op_output(plan, &plan->ops[i], 0);
        if (executor->channels_last[x] != executor->channels_last[y]) {
          changed |= drop_channels_last(executor, x);
          changed |= drop_channels_last(executor, y);
        }
        continue;
      }
      if (plan->ops[i].opcode != EMBER_OP_CONV2D) continue;
      const uint32_t y = ember_plan_op_output(plan, &plan->ops[conv_last_fused(executor, i)], 0);
      const uint32_t r = executor->conv_residual[i] ? residual_input(plan, i) : EMBER_PLAN_NO_INDEX;
      if (may_nhwc[i]) {
        if (!executor->channels_last[y] || (r != EMBER_PLAN_NO_INDEX && !executor->channels_last[r])) {
          changed |= drop_channels_last(executor, y);
          changed |= drop_channels_last(executor, ember_plan_op_input(plan, &plan->ops[i], 0));
          if (r != EMBER_PLAN_NO_INDEX) changed |= drop_channels_last(executor, r);
        }
        continue;
      }
      if (r == EMBER_PLAN_NO_INDEX) continue;
      const ember_tensor_desc* yd = &plan->tensors[y];
      const ember_tensor_desc* rd = &plan->tensors[r];
      const bool shared = yd->storage == EMBER_STORAGE_INTERMEDIATE &&
                          rd->storage == EMBER_STORAGE_INTERMEDIATE &&
                          executor->relocated[y] == UINT64_MAX &&
                          ember_ranges_overlap(yd->data_offset, yd->nbytes, rd->data_offset, rd->nbytes);
      if (shared && executor->channels_last[y] != executor->channels_last[r]) {
        if (executor->channels_last[y]) {
          status = relocate_tensor(executor, y, in_out_extra);
          if (status != NULL) break;
        } else {
          executor->channels_last[r] = false;
        }
        changed = true;
      }
    }
  }
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    executor->conv_gemm_nhwc[i] =
        may_nhwc[i] &&
        executor->channels_last[ember_plan_op_output(plan, &plan->ops[conv_last_fused(executor, i)], 0)];
  }
  free(may_nhwc);
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    if (executor->channels_last[t]) ++executor->channels_last_tensors;
  }
  return status;
}

/* Per tensor, how many op inputs read it (calloc'ed; NULL when out of memory). */
static uint32_t* count_readers(const ember_plan* plan) {
  uint32_t* readers = calloc(plan->num_tensors, sizeof(uint32_t));
  for (uint32_t i = 0; i < plan->num_ops && readers != NULL; ++i) {
    for (uint32_t k = 0; k < plan->ops[i].num_inputs; ++k) {
      ++readers[ember_plan_op_input(plan, &plan->ops[i], k)];
    }
  }
  return readers;
}

/* Decides, before memory is allocated, which GEMMs take the next op into their epilogue
 * (fuse_next), and which activation outputs move to a slot of their own past the plan's
 * arena (relocated). A fused GEMM writes the activation's output while it still reads
 * its inputs, earlier than the plan says that output is written; the memory plan may
 * have put that output on the bytes of an input whose life ends at the GEMM (an MLP's
 * hidden layers always are), so such an output gets bytes no other tensor uses.
 * readers: count_readers's. *out_extra is the bytes the arena needs past
 * plan->arena_size (rounded up). */
static ember_status* plan_fusions(ember_cuda_executor* executor, const uint32_t* readers,
                                  uint64_t* out_extra) {
  const ember_plan* plan = executor->plan;
  *out_extra = 0;
  executor->fuse_next = calloc(plan->num_ops, sizeof(bool));
  executor->pool_counts = calloc(plan->num_ops, sizeof(CUdeviceptr));
  executor->conv_residual = calloc(plan->num_ops, sizeof(bool));
  executor->add_into_norm = calloc(plan->num_ops, sizeof(bool));
  executor->relocated = malloc(plan->num_tensors * sizeof(uint64_t));
  if (executor->fuse_next == NULL || executor->pool_counts == NULL ||
      executor->conv_residual == NULL ||
      executor->add_into_norm == NULL || executor->relocated == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  for (uint32_t t = 0; t < plan->num_tensors; ++t) executor->relocated[t] = UINT64_MAX;
  ember_status* status = NULL;
  for (uint32_t i = 0; i + 1 < plan->num_ops && status == NULL; ++i) {
    /* A conv that takes its residual ADD (and the RELU after that) writes the last one's
     * output; the residual may share its bytes exactly (each element is read by the
     * thread that then writes it), but no other way. */
    uint32_t last = i + 1, residual = EMBER_PLAN_NO_INDEX;
    if (can_fuse_residual(executor, i, readers)) {
      executor->conv_residual[i] = true;
      residual = residual_input(plan, i);
      if (can_fuse_activation(executor, i + 1, readers)) {
        executor->fuse_next[i + 1] = true;
        last = i + 2;
      }
    } else if (can_fuse_activation(executor, i, readers)) {
      executor->fuse_next[i] = true;
    } else if (can_fuse_add_into_norm(plan, i, readers)) {
      /* The LAYER_NORM reads the ADD's inputs while it writes its output. */
      executor->add_into_norm[i] = true;
      ++executor->norm_adds;
    } else {
      continue;
    }
    const ember_op_desc* op = &plan->ops[i];
    const uint32_t y_index = ember_plan_op_output(plan, &plan->ops[last], 0);
    const ember_tensor_desc* y = &plan->tensors[y_index];
    bool overlaps = false;
    for (uint32_t k = 0; k < op->num_inputs && y->storage == EMBER_STORAGE_INTERMEDIATE; ++k) {
      const ember_tensor_desc* in = ember_plan_op_input_tensor(plan, op, k);
      /* The LAYER_NORM reads each row of the ADD's inputs whole before it writes that row
       * of its output, so it may write over an input's exact bytes (the encoder's arena
       * puts each norm's output there; moved, three RESHAPEs of it stopped being views). */
      const bool same_bytes = executor->add_into_norm[i] && in->data_offset == y->data_offset &&
                              in->nbytes == y->nbytes;
      if (in->storage == EMBER_STORAGE_INTERMEDIATE && !same_bytes &&
          ember_ranges_overlap(in->data_offset, in->nbytes, y->data_offset, y->nbytes)) {
        overlaps = true;
      }
    }
    if (residual != EMBER_PLAN_NO_INDEX && y->storage == EMBER_STORAGE_INTERMEDIATE) {
      const ember_tensor_desc* r = &plan->tensors[residual];
      if (r->storage == EMBER_STORAGE_INTERMEDIATE &&
          ember_ranges_overlap(r->data_offset, r->nbytes, y->data_offset, y->nbytes) &&
          (r->data_offset != y->data_offset || r->nbytes != y->nbytes)) {
        overlaps = true;
      }
    }
    if (overlaps) status = relocate_tensor(executor, y_index, out_extra);
    i = last; /* the ops fused into op i are taken */
  }
  return status;
}

/* Moves intermediate t to bytes of its own past the plan's arena: *in_out_extra is the
 * bytes the arena needs past plan->arena_size, before and after. */
static ember_status* relocate_tensor(ember_cuda_executor* executor, uint32_t t,
                                     uint64_t* in_out_extra) {
  const ember_plan* plan = executor->plan;
  uint64_t offset, size, end;
  if (!ember_checked_add_u64(plan->arena_size, *in_out_extra, &offset) ||
      !ember_checked_align_u64(offset, EMBER_CUDA_ALIGNMENT, &offset) ||
      !ember_checked_align_u64(plan->tensors[t].nbytes, EMBER_CUDA_ALIGNMENT, &size) ||
      !ember_checked_add_u64(offset, size, &end)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: arena size overflows");
  }
  executor->relocated[t] = offset;
  *in_out_extra = end - plan->arena_size;
  ++executor->relocations;
  return NULL;
}

static bool is_16bit_float(ember_dtype dtype) {
  return dtype == EMBER_DTYPE_FLOAT16 || dtype == EMBER_DTYPE_BFLOAT16;
}

/* LINEAR op i as the gemv kernel (linear_takes_gemv) with its bias and, when `fused` is
 * an op, that activation, whose output it then writes. The kernel picks 16-byte or
 * element loads from the addresses it is given, so bound pointers need no alignment
 * beyond their element's. */
static void add_gemv_step(ember_cuda_executor* executor, uint32_t i, uint32_t fused) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  ember_k_gemv_params p = {0};
  p.k = x->dims[x->rank - 1];
  p.cols = y->dims[y->rank - 1];
  p.rows = (int64_t)(y->numel / (uint64_t)p.cols);
  p.act = fused != EMBER_PLAN_NO_INDEX ? (int32_t)unary_op_of(plan, &plan->ops[fused])
                                       : EMBER_K_UNARY_IDENTITY;
  p.has_bias = op->num_inputs == 3;
  /* A warp per column of each group of rows; past EMBER_K_GEMV_MAX_ROWS in 16-bit types
   * with K even, the tensor-core form, a block per tile of y. */
  uint32_t kernel = EMBER_CUDA_KERNEL_GEMV + ember_cuda_dtype_index(y->dtype);
  uint64_t threads = ceil_div_u64((uint64_t)p.rows, (uint64_t)EMBER_K_GEMV_GROUP_ROWS) *
                     (uint64_t)p.cols * 32u;
  if (is_16bit_float(y->dtype) && p.rows > EMBER_K_GEMV_MAX_ROWS && p.k % 2 == 0) {
    kernel = EMBER_CUDA_KERNEL_GEMV_MMA + ember_cuda_half_index(y->dtype);
    threads = ceil_div_u64((uint64_t)p.rows, EMBER_K_GEMV_MMA_ROWS) *
              ceil_div_u64((uint64_t)p.cols, EMBER_K_GEMV_MMA_COLS) * EMBER_K_BLOCK;
  }
  ember_cuda_step* step = add_kernel_step(executor, i, kernel,
                                          grid_for_elements(executor, threads), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_gemv_params, x));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1), offsetof(ember_k_gemv_params, w));
  if (p.has_bias) {
    add_ref(executor, step, ember_plan_op_input(plan, op, 2), offsetof(ember_k_gemv_params, bias));
  }
  const uint32_t out = fused != EMBER_PLAN_NO_INDEX
                           ? ember_plan_op_output(plan, &plan->ops[fused], 0)
                           : ember_plan_op_output(plan, op, 0);
  add_ref(executor, step, out, offsetof(ember_k_gemv_params, y));
}

/* ---- LINEAR + activation on the gemm_wgmma kernel ------------------------------------ */

/* Fewer output tiles than this leave most of the GPU idle, where cuBLASLt's smaller tiles
 * (or split K) and a separate activation kernel do better; the conv kernel's bound. */
#define EMBER_CUDA_GEMM_WGMMA_MIN_TILES 64u

/* Whether this executor runs LINEARs with the activations cuBLASLt lacks on gemm_wgmma:
 * compute capability 9.0, EMBER_CUDA_GEMM_WGMMA not 0 and EMBER_CUDA_WGMMA not 0 (which
 * LINEARs: linear_takes_gemm_wgmma). */
static bool uses_gemm_wgmma(const ember_cuda_executor* executor) {
  const ember_settings* settings = ember_settings_get();
  return executor->kernels.gemm_wgmma && settings->cuda_wgmma &&
         settings->cuda_gemm_wgmma != EMBER_MODE_OFF;
}

/* Whether LINEAR op fits Ember's TMA GEMM kernels (gemm_wgmma, gemm_narrow), with its
 * sizes: weight [N, K], more rows than the gemv kernel takes, float16 or bfloat16
 * throughout, K and N multiples of 8 (the tensor maps' row pitch, the 16-byte vectors the
 * epilogues store), K, N and the rows within int32. */
static bool linear_fits_tma_gemm(const ember_plan* plan, const ember_op_desc* op,
                                 int64_t* out_k, int64_t* out_n, uint64_t* out_rows) {
  if (op->opcode != EMBER_OP_LINEAR ||
      ember_plan_op_attr(plan, op, EMBER_ATTR_LINEAR_WEIGHT_LAYOUT) != 0 ||
      linear_takes_gemv(plan, op)) {
    return false;
  }
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (!is_16bit_float(y->dtype) || x->dtype != y->dtype || w->dtype != y->dtype ||
      (op->num_inputs == 3 && ember_plan_op_input_tensor(plan, op, 2)->dtype != y->dtype)) {
    return false;
  }
  const int64_t k = x->dims[x->rank - 1], n = y->dims[y->rank - 1];
  if (k <= 0 || n <= 0 || k % 8 != 0 || n % 8 != 0 || k > INT32_MAX || n > INT32_MAX) return false;
  const uint64_t rows = x->numel / (uint64_t)k;
  if (rows > INT32_MAX) return false;
  *out_k = k;
  *out_n = n;
  *out_rows = rows;
  return true;
}

/* gemm_wgmma's columns a tile for a LINEAR of `rows` rows and n outputs:
 * EMBER_K_GEMM_WGMMA_BN_SMALL where its waves of tiles take less time (waves times a
 * tile's columns), else EMBER_K_GEMM_WGMMA_BN. The encoder's 768 outputs at 4096 rows
 * make 128 tiles of 192 columns in one wave, where 96 of 256 left 36 SMs idle; its QKV's
 * 2304, three waves of 192 against three of 256; the MLP's 1024, one wave of 256 against
 * two of 192. */
static uint32_t gemm_wgmma_columns(const ember_cuda_executor* executor, uint64_t rows,
                                   int64_t n) {
  static const uint32_t kColumns[2] = {EMBER_K_GEMM_WGMMA_BN, EMBER_K_GEMM_WGMMA_BN_SMALL};
  const uint64_t m_tiles = ceil_div_u64(rows, EMBER_K_GEMM_WGMMA_BM);
  uint32_t best = kColumns[0];
  uint64_t best_cost = UINT64_MAX;
  for (int c = 0; c < 2; ++c) {
    const uint64_t tiles = m_tiles * ceil_div_u64((uint64_t)n, kColumns[c]);
    const uint64_t cost = ceil_div_u64(tiles, (uint64_t)executor->sm_count) * kColumns[c];
    if (cost < best_cost) {
      best = kColumns[c];
      best_cost = cost;
    }
  }
  return best;
}

/* Whether LINEAR op runs on the gemm_wgmma kernel (kernel_params.h) with activation `next`
 * (which reads its output; NULL: none): a LINEAR that fits the TMA kernels
 * (linear_fits_tma_gemm) with enough tiles (gemm_wgmma_columns'), on an executor that
 * uses the kernel (uses_gemm_wgmma). Under EMBER_CUDA_GEMM_WGMMA=1 with any activation
 * of its dtype or none, whatever its tiles, and so under auto in a program that then
 * needs no cuBLASLt at all (executor->tma_gemms_only). Else, under auto, with an
 * activation cuBLASLt's epilogue lacks (GELU's erf form, SIGMOID, TANH, SILU) where its
 * tiles fit in one wave (no more than the SMs).
 *
 * In one wave the activation costs less in its epilogue than as a kernel of its own: on
 * an H100 the MLP at batch 4096 (four 4096 x 1024 x 1024 LINEAR + erf GELU pairs, 128
 * tiles each) ran in 77.4-77.7 us on it against 84.0 on cuBLASLt and the GELU kernel, and
 * created in 16 ms instead of 146 (same device call). Elsewhere cuBLASLt's GEMMs are
 * faster (its persistent kernels most of all in several waves), but a program that loads
 * no cuBLASLt creates in a fraction of the time, where the init bound leaves 50 ms beside
 * the weights' upload. On an H100, same calls: mlp_tanh at batch 4096 (GELU's tanh form,
 * which cuBLASLt fuses) ran 71.8-73.5 us against 71.3 and created in 19.4-25.8 ms against
 * 229.9 (bound 50.6-51.1); the encoder at batch 32 (4096 rows, QKV in three waves of 192
 * columns) ran 580.1-582.4 us against 558.3, within its 600 us target, and created in
 * 30.2-45.5 ms against 192.4 (bound 54.3-57.6). In tiles of 256 columns alone it had run
 * 642.0 us against 554.4. */
static bool linear_takes_gemm_wgmma(const ember_cuda_executor* executor, const ember_op_desc* op,
                                    const ember_op_desc* next) {
  const ember_plan* plan = executor->plan;
  const ember_mode mode = ember_settings_get()->cuda_gemm_wgmma;
  const bool forced =
      mode == EMBER_MODE_ON || (mode == EMBER_MODE_AUTO && executor->tma_gemms_only);
  const bool lacking =
      next != NULL && is_activation(next->opcode) && !cublaslt_epilogue_has(plan, next);
  int64_t k, n;
  uint64_t rows;
  if (!uses_gemm_wgmma(executor) || !(lacking || forced) ||
      !linear_fits_tma_gemm(plan, op, &k, &n, &rows)) {
    return false;
  }
  if (next != NULL && (!is_activation(next->opcode) ||
                       ember_plan_op_output_tensor(plan, next, 0)->dtype !=
                           ember_plan_op_output_tensor(plan, op, 0)->dtype)) {
    return false;
  }
  const uint64_t tiles = ceil_div_u64(rows, EMBER_K_GEMM_WGMMA_BM) *
                         ceil_div_u64((uint64_t)n, gemm_wgmma_columns(executor, rows, n));
  return tiles >= EMBER_CUDA_GEMM_WGMMA_MIN_TILES && tiles <= INT32_MAX &&
         (forced || tiles <= (uint64_t)executor->sm_count);
}

/* One 2-D tensor map of `rows` rows of k 2-byte elements at `address`, boxes of box_k x
 * box_rows with `swizzle`, zeros outside (what gemm_wgmma.cu and conv_halo.cu read). */
static ember_status* encode_tiled_map(const ember_cuda_driver* driver, uint64_t* out,
                                      uint64_t address, int64_t rows, int64_t k, uint32_t box_k,
                                      uint32_t box_rows, CUtensorMapSwizzle swizzle,
                                      const char* what) {
  _Static_assert(sizeof(CUtensorMap) == 16 * sizeof(uint64_t), "a tensor map is 128 bytes");
  CUtensorMap map;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows};
  const cuuint64_t strides[1] = {(cuuint64_t)k * 2u};
  const cuuint32_t box[2] = {box_k, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  CUresult result = driver->cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, (void*)(uintptr_t)address, dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) return ember_cuda_status(driver, result, what);
  memcpy(out, &map, sizeof map);
  return NULL;
}

/* The tensor maps of a LINEAR on a TMA GEMM kernel (ember_k_linear_tma_params), from
 * the addresses now in p. */
static ember_status* encode_linear_tma_maps(const ember_cuda_driver* driver,
                                            ember_k_linear_tma_params* p) {
  EMBER_RETURN_IF_ERROR(encode_tiled_map(driver, p->x_map, p->x, p->rows, p->k,
                                         EMBER_K_GEMM_WGMMA_BK, (uint32_t)p->x_box_rows,
                                         CU_TENSOR_MAP_SWIZZLE_128B,
                                         "cuTensorMapEncodeTiled(LINEAR x)"));
  return encode_tiled_map(driver, p->w_map, p->w, p->n, p->k, EMBER_K_GEMM_WGMMA_BK,
                          (uint32_t)p->w_box_rows, CU_TENSOR_MAP_SWIZZLE_128B,
                          "cuTensorMapEncodeTiled(LINEAR weight)");
}

/* The bytes of one row (input pixel) of the halo kernel's halo: 16 channels (resnet's
 * stem, read space-to-depth) are one K step of 32 bytes; more are copied 64 at a time. */
static int32_t conv_halo_row_bytes(int64_t channels) { return channels == 16 ? 32 : 128; }

/* The halo kernel's maps: x [n, h, w, c] channels last, boxes of min(c, 64) channels x
 * pitch x (rows + KH - 1) x strip_images, with the swizzle of the halo's rows (128 bytes, or 32
 * for 16 channels); the implicit GEMM's weights [o][k_stride], boxes of 64 x 64·groups
 * with the 128-byte swizzle. Zeros outside (what conv_halo.cu reads). */
static ember_status* encode_conv_halo_maps(const ember_cuda_driver* driver,
                                           ember_k_conv_halo_params* p) {
  const ember_k_conv_igemm_params* c = &p->conv;
  const cuuint64_t channels = (cuuint64_t)c->c;
  const cuuint64_t dims[4] = {channels, (cuuint64_t)c->w_in, (cuuint64_t)c->h,
                              (cuuint64_t)p->images};
  const cuuint64_t strides[3] = {channels * 2u, channels * 2u * (cuuint64_t)c->w_in,
                                 channels * 2u * (cuuint64_t)c->w_in * (cuuint64_t)c->h};
  const int32_t row_bytes = conv_halo_row_bytes(c->c);
  const int32_t box_pixels = p->halo_box_bytes / row_bytes / p->strip_images;
  const cuuint32_t box[4] = {(cuuint32_t)row_bytes / 2u, (cuuint32_t)p->pitch,
                             (cuuint32_t)(box_pixels / p->pitch), (cuuint32_t)p->strip_images};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  CUresult result = driver->cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void*)(uintptr_t)c->x, dims, strides, box,
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      row_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B : CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return ember_cuda_status(driver, result, "cuTensorMapEncodeTiled(CONV2D x halo)");
  }
  memcpy(p->x_map, &map, sizeof map);
  return encode_tiled_map(driver, p->w_map, c->w, c->o, c->k_stride, 64,
                          (uint32_t)(64 * p->groups), CU_TENSOR_MAP_SWIZZLE_128B,
                          "cuTensorMapEncodeTiled(CONV2D weight)");
}

/* A step needs `tensor`, when it is a bound input or output, at least `bytes`-aligned: a
 * bound pointer that is less aligned is staged at run time. Raises, never lowers, what
 * other steps asked of the same slot. */
static void require_io_alignment(ember_cuda_executor* executor, uint32_t tensor, uint32_t bytes) {
  const ember_tensor_desc* t = &executor->plan->tensors[tensor];
  if (!is_io(t)) return;
  uint32_t* alignment = &executor->io_alignment[io_slot(executor, t)];
  if (*alignment < bytes) *alignment = bytes;
}

/* Whether LINEAR op's weight and bias (if any) are the plan's constants, which no kernel
 * of a run writes: its TMA kernels (gemm_wgmma, gemm_narrow) copy them before they wait
 * for the kernel before (PDL). */
static bool linear_operands_constant(const ember_plan* plan, const ember_op_desc* op) {
  return ember_plan_op_input_tensor(plan, op, 1)->storage == EMBER_STORAGE_CONSTANT &&
         (op->num_inputs != 3 ||
          ember_plan_op_input_tensor(plan, op, 2)->storage == EMBER_STORAGE_CONSTANT);
}

/* What a LINEAR op i and activation op `fused` (EMBER_PLAN_NO_INDEX: none) give a TMA
 * GEMM kernel (ember_k_linear_tma_params), but the addresses; maps of boxes x_box_rows and
 * w_box_rows. */
static ember_k_linear_tma_params linear_tma_params(const ember_plan* plan, uint32_t i,
                                                   uint32_t fused, int32_t x_box_rows,
                                                   int32_t w_box_rows) {
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  ember_k_linear_tma_params p;
  memset(&p, 0, sizeof p);
  p.k = (int32_t)x->dims[x->rank - 1];
  p.n = (int32_t)y->dims[y->rank - 1];
  p.rows = (int32_t)(x->numel / (uint64_t)p.k);
  p.x_box_rows = x_box_rows;
  p.w_box_rows = w_box_rows;
  p.act = fused == EMBER_PLAN_NO_INDEX ? EMBER_K_UNARY_IDENTITY
                                       : (int32_t)unary_op_of(plan, &plan->ops[fused]);
  p.has_bias = op->num_inputs == 3;
  p.constant_operands = linear_operands_constant(plan, op);
  return p;
}

/* LINEAR op i (and activation op `fused`, or EMBER_PLAN_NO_INDEX) as one step of a TMA
 * GEMM kernel, `blocks` blocks of `threads` with `shared_bytes`, params (which start with
 * the ember_k_linear_tma_params) writing the last op's output: refs to x, w, the bias if
 * any and the output, each 16-byte aligned where it is bound; then its maps encoded now
 * too, so that one the driver refuses fails in create, not in a run. */
static ember_status* add_linear_tma_step(ember_cuda_executor* executor, uint32_t i, uint32_t fused,
                                         uint32_t kernel, uint64_t blocks, uint32_t threads,
                                         uint32_t shared_bytes, const void* params,
                                         size_t params_size) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  ember_cuda_step* step = add_kernel_step(executor, i, kernel, (unsigned int)blocks, params,
                                          params_size);
  step->block = threads;
  step->shared_bytes = shared_bytes;
  step->tensor_maps = TENSOR_MAPS_LINEAR;
  static const size_t kOffsets[3] = {offsetof(ember_k_linear_tma_params, x),
                                     offsetof(ember_k_linear_tma_params, w),
                                     offsetof(ember_k_linear_tma_params, bias)};
  for (uint32_t k = 0; k < op->num_inputs && k < 3; ++k) {
    add_ref(executor, step, ember_plan_op_input(plan, op, k), (uint32_t)kOffsets[k]);
  }
  const uint32_t out =
      ember_plan_op_output(plan, fused == EMBER_PLAN_NO_INDEX ? op : &plan->ops[fused], 0);
  add_ref(executor, step, out, (uint32_t)offsetof(ember_k_linear_tma_params, y));
  for (uint32_t r = 0; r < step->num_refs; ++r) require_io_alignment(executor, step->refs[r].tensor, 16);
  return patch_kernel_params(executor, step);
}

/* LINEAR op i (and activation op `fused`, or EMBER_PLAN_NO_INDEX) as one gemm_wgmma step
 * (linear_takes_gemm_wgmma). */
static ember_status* add_gemm_wgmma_step(ember_cuda_executor* executor, uint32_t i,
                                         uint32_t fused) {
  const ember_plan* plan = executor->plan;
  ember_k_gemm_wgmma_params p;
  memset(&p, 0, sizeof p);
  p.linear = linear_tma_params(plan, i, fused, EMBER_K_GEMM_WGMMA_BM, 0);
  const uint32_t columns = gemm_wgmma_columns(executor, (uint64_t)p.linear.rows, p.linear.n);
  p.linear.w_box_rows = (int32_t)columns / EMBER_K_GEMM_WGMMA_CLUSTER;
  p.k_tiles = (int32_t)ceil_div_u64((uint64_t)p.linear.k, EMBER_K_GEMM_WGMMA_BK);
  p.n_tiles = (int32_t)ceil_div_u64((uint64_t)p.linear.n, columns);
  /* Whole clusters: a block past the last row tile still copies its share of w's tiles
   * for the others, and writes nothing. */
  const uint64_t m_tiles =
      ceil_div_u64(ceil_div_u64((uint64_t)p.linear.rows, EMBER_K_GEMM_WGMMA_BM),
                   EMBER_K_GEMM_WGMMA_CLUSTER) *
      EMBER_K_GEMM_WGMMA_CLUSTER;
  ++executor->gemm_wgmmas;
  const bool small = columns == EMBER_K_GEMM_WGMMA_BN_SMALL;
  if (small) ++executor->gemm_wgmmas_small;
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, &plan->ops[i], 0);
  const uint32_t kernel =
      (small ? EMBER_CUDA_KERNEL_GEMM_WGMMA_SMALL : EMBER_CUDA_KERNEL_GEMM_WGMMA) +
      ember_cuda_half_index(y->dtype);
  return add_linear_tma_step(executor, i, fused, kernel, m_tiles * (uint64_t)p.n_tiles,
                             EMBER_K_GEMM_WGMMA_THREADS, EMBER_K_GEMM_WGMMA_SMEM_BYTES, &p,
                             sizeof p);
}

/* ---- LINEAR of few rows (and the activation after it) on the narrow GEMM kernel ------- */

/* The narrow kernel's grid for one LINEAR: R (rows of x a block; index r: R = 16 << r), B
 * (K tiles a stage), and the counts of kernel_params.h's ember_k_gemm_narrow_params. */
struct gemm_narrow_shape {
  uint32_t r;
  uint32_t boxes;
  int32_t block_rows;
  int32_t n_tiles;
  int32_t k_stages;
  int32_t stages;
  uint64_t blocks;
};

/* Fewer blocks than this leave most of an H100's or H200's SMs idle; R is the largest that
 * makes at least this many (the encoder's 128-row LINEARs: 64 rows for QKV's 2304 outputs
 * and the FFN's 3072, 72 and 96 blocks; 16 rows for its 768, 96 blocks; the decoder's LM
 * head of 8192 outputs: 128 rows, 128 blocks, one wave where 64 rows made two), else 16. */
#define EMBER_CUDA_GEMM_NARROW_MIN_BLOCKS 64u

/* Whether this executor runs LINEARs of few rows on the narrow GEMM kernel: the
 * gemm_wgmma module's conditions (uses_gemm_wgmma), its kernels' shared memory, and
 * EMBER_CUDA_GEMM_NARROW not 0. */
static bool uses_gemm_narrow(const ember_cuda_executor* executor) {
  return uses_gemm_wgmma(executor) && executor->kernels.gemm_narrow &&
         ember_settings_get()->cuda_gemm_narrow != EMBER_MODE_OFF;
}

/* Whether LINEAR op runs on the narrow GEMM kernel (with the activation after it, if
 * can_fuse_activation takes it; out may be NULL): a LINEAR that fits the TMA kernels
 * (linear_fits_tma_gemm), on an executor that uses the kernel; under
 * EMBER_CUDA_GEMM_NARROW=auto, also its blocks no more than the SMs (one wave: past
 * that, cuBLASLt's persistent kernels or gemm_wgmma's wide tiles). B
 * is the first of 3, 4, 2, 1 (R = 64) or 4, 3, 2, 1 (smaller R) that divides the K tiles,
 * so that every stage runs the same MMAs: the order the thirty-sixth session's probe found
 * fastest for the encoder's four LINEARs; at R = 128, 2 or 1, which keep 4 or 8 stages in
 * the ring (3 or 4 would keep 2). */
static bool linear_takes_gemm_narrow(const ember_cuda_executor* executor, const ember_op_desc* op,
                                     gemm_narrow_shape* out) {
  int64_t k, n;
  uint64_t rows;
  if (!uses_gemm_narrow(executor) || !linear_fits_tma_gemm(executor->plan, op, &k, &n, &rows)) {
    return false;
  }
  gemm_narrow_shape shape;
  const uint64_t n_tiles = ceil_div_u64((uint64_t)n, EMBER_K_GEMM_NARROW_BM);
  shape.r = 0;
  for (uint32_t r = EMBER_K_GEMM_NARROW_ROWS_COUNT; r-- > 0;) {
    if (n_tiles * ceil_div_u64(rows, 16u << r) >= EMBER_CUDA_GEMM_NARROW_MIN_BLOCKS) {
      shape.r = r;
      break;
    }
  }
  shape.block_rows = (int32_t)(16u << shape.r);
  shape.blocks = n_tiles * ceil_div_u64(rows, (uint64_t)shape.block_rows);
  if (shape.blocks > INT32_MAX ||
      (ember_settings_get()->cuda_gemm_narrow == EMBER_MODE_AUTO &&
       shape.blocks > (uint64_t)executor->sm_count)) {
    return false;
  }
  const uint64_t k_tiles = ceil_div_u64((uint64_t)k, EMBER_K_GEMM_NARROW_BK);
  static const uint32_t kBoxes128[4] = {2, 1, 1, 1}, kBoxes64[4] = {3, 4, 2, 1},
                        kBoxesFewer[4] = {4, 3, 2, 1};
  const uint32_t* order = shape.block_rows == 128 ? kBoxes128
                          : shape.block_rows == 64 ? kBoxes64
                                                   : kBoxesFewer;
  shape.boxes = 1;
  for (int b = 0; b < 4; ++b) {
    if (k_tiles % order[b] == 0) {
      shape.boxes = order[b];
      break;
    }
  }
  const uint32_t stage_bytes = shape.boxes * (uint32_t)(EMBER_K_GEMM_NARROW_BM + shape.block_rows) *
                               EMBER_K_GEMM_NARROW_BK * 2u;
  const uint32_t stages = EMBER_K_GEMM_NARROW_RING_BYTES / stage_bytes;
  shape.stages = (int32_t)(stages < EMBER_K_GEMM_NARROW_MAX_STAGES ? stages
                                                                  : EMBER_K_GEMM_NARROW_MAX_STAGES);
  shape.n_tiles = (int32_t)n_tiles;
  shape.k_stages = (int32_t)(k_tiles / shape.boxes);
  if (out != NULL) *out = shape;
  return true;
}

/* LINEAR op i (linear_takes_gemm_narrow) as one narrow GEMM step, with activation op
 * `fused` (EMBER_PLAN_NO_INDEX: none). */
static ember_status* add_gemm_narrow_step(ember_cuda_executor* executor, uint32_t i,
                                          uint32_t fused, const gemm_narrow_shape* shape) {
  const ember_plan* plan = executor->plan;
  ember_k_gemm_narrow_params p;
  memset(&p, 0, sizeof p);
  p.linear = linear_tma_params(plan, i, fused, shape->block_rows, EMBER_K_GEMM_NARROW_BM);
  p.n_tiles = shape->n_tiles;
  p.k_stages = shape->k_stages;
  p.stages = shape->stages;
  ++executor->gemm_narrows;
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, &plan->ops[i], 0);
  const uint32_t kernel = EMBER_CUDA_KERNEL_GEMM_NARROW +
                          2u * (EMBER_K_GEMM_NARROW_MAX_BOXES * shape->r + shape->boxes - 1u) +
                          ember_cuda_half_index(y->dtype);
  return add_linear_tma_step(executor, i, fused, kernel, shape->blocks,
                             EMBER_K_GEMM_NARROW_THREADS, EMBER_K_GEMM_NARROW_SMEM_BYTES, &p,
                             sizeof p);
}

static ember_status* build_gemm(ember_cuda_executor* executor, uint32_t i, uint32_t fused,
                                size_t* max_workspace) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  if (y->numel == 0) return NULL;
  if (x->dims[x->rank - 1] == 0) {
    /* K == 0: the product is zeros; only the bias (if any) is left. */
    const uint32_t bias = op->opcode == EMBER_OP_LINEAR && op->num_inputs == 3
                              ? ember_plan_op_input(plan, op, 2)
                              : EMBER_PLAN_NO_INDEX;
    add_bias_act_step(executor, i, ember_plan_op_output(plan, op, 0), bias,
                      EMBER_K_UNARY_IDENTITY, true);
    return NULL;
  }
  if (linear_takes_gemv(plan, op)) {
    add_gemv_step(executor, i, fused);
    return NULL;
  }
  if (linear_takes_gemm_wgmma(executor, op,
                              fused == EMBER_PLAN_NO_INDEX ? NULL : &plan->ops[fused])) {
    return add_gemm_wgmma_step(executor, i, fused);
  }
  gemm_narrow_shape narrow;
  if (linear_takes_gemm_narrow(executor, op, &narrow)) {
    return add_gemm_narrow_step(executor, i, fused, &narrow);
  }
  ember_cuda_gemm_request request = {
      .plan = plan,
      .op_index = i,
      .fused_op_index = fused,
      .address = tensor_address_callback,
      .address_context = executor,
      .max_workspace = EMBER_CUDA_MAX_WORKSPACE,
      .device = executor->device_ordinal,
  };
  ember_cuda_gemm* gemm = &executor->gemms[executor->num_gemms];
  EMBER_RETURN_IF_ERROR(ember_cuda_gemm_prepare(executor->lt, executor->lt_handle, &request, gemm));
  ++executor->num_gemms;
  if (gemm->workspace_size > *max_workspace) *max_workspace = gemm->workspace_size;
  ember_cuda_step* step = add_step(executor, i);
  step->is_gemm = true;
  step->gemm = executor->num_gemms - 1;
  add_ref(executor, step, gemm->a_tensor, GEMM_A);
  add_ref(executor, step, gemm->b_tensor, GEMM_B);
  if (gemm->bias_fused) add_ref(executor, step, gemm->bias_tensor, GEMM_BIAS);
  add_ref(executor, step, gemm->d_tensor, GEMM_D);
  /* Bound inputs and outputs that a GEMM touches must be as aligned as its algorithm
   * assumes (cuda_gemm.h); others are staged at run time. */
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    require_io_alignment(executor, step->refs[r].tensor, EMBER_CUDA_GEMM_IO_ALIGNMENT);
  }
  if (gemm->needs_bias_act) {
    add_bias_act_step(executor, i, gemm->d_tensor,
                      gemm->bias_fused ? EMBER_PLAN_NO_INDEX : gemm->bias_tensor,
                      gemm->bias_act_activation, false);
  }
  return NULL;
}

/* ---- ops of plan format issue 5: layout, selection, reductions, attention, conv, pools -- */

/* Element strides of a contiguous tensor. */
static void contiguous_strides(const ember_tensor_desc* t, int64_t* out) {
  int64_t stride = 1;
  for (uint32_t d = t->rank; d-- > 0;) {
    out[d] = stride;
    stride *= t->dims[d];
  }
}

/* Collapses y's dims for a kernel that walks them with `n` strided inputs: size-1 dims
 * are dropped and a dim merges into the one before it when every input steps through
 * the pair as through one dim. in[k] are input k's strides per y dim; out[k] receives
 * the collapsed ones. Returns the rank, at least 1 (a single element is [1]). */
static uint32_t collapse_dims(uint32_t y_rank, const int64_t* y_dims, uint32_t n,
                              const int64_t* const* in, int64_t* dims, int64_t* const* out) {
  uint32_t rank = 0;
  for (uint32_t d = 0; d < y_rank; ++d) {
    if (y_dims[d] == 1) continue;
    bool merge = rank > 0;
    for (uint32_t k = 0; k < n && merge; ++k) merge = out[k][rank - 1] == in[k][d] * y_dims[d];
    if (merge) {
      dims[rank - 1] *= y_dims[d];
      for (uint32_t k = 0; k < n; ++k) out[k][rank - 1] = in[k][d];
      continue;
    }
    dims[rank] = y_dims[d];
    for (uint32_t k = 0; k < n; ++k) out[k][rank] = in[k][d];
    ++rank;
  }
  if (rank == 0) {
    dims[0] = 1;
    for (uint32_t k = 0; k < n; ++k) out[k][0] = 0;
    rank = 1;
  }
  return rank;
}

/* A copy of `rows` rows (CAT's inputs, SLICE with step 1, a shifted contiguous block). */
static void add_copy_rows_step(ember_cuda_executor* executor, uint32_t i, uint32_t x_tensor,
                               uint32_t y_tensor, const ember_k_copy_rows_params* p) {
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_COPY_ROWS,
      grid_for_elements(executor, (uint64_t)(p->rows * ((p->row_bytes + 15) / 16))), p,
      sizeof *p);
  add_ref(executor, step, x_tensor, offsetof(ember_k_copy_rows_params, x));
  add_ref(executor, step, y_tensor, offsetof(ember_k_copy_rows_params, y));
}

static void fast_divisor(uint64_t d, uint32_t* mul, uint32_t* shift);

/* Whether a gather can move units of w elements: its innermost dim is a multiple of w,
 * and every other stride and the offset are too (the innermost stride is 1). */
static bool gather_widens(const ember_k_gather_params* p, int64_t w) {
  if (p->dims[p->rank - 1] % w != 0 || p->x_offset % w != 0) return false;
  for (uint32_t d = 0; d + 1 < p->rank; ++d) {
    if (p->x_strides[d] % w != 0) return false;
  }
  return true;
}

/* Fills everything of a gather's parameters but the addresses (p->x and p->y are left as
 * they are): y[i] = x[x_offset + offset(i)] for the `count` elements of y, whose dims
 * are `dims` (rank of them, row-major), offset(i) adding x_strides[d] (elements, >= 0)
 * per step of y dim d. The dims are collapsed; where the innermost one is contiguous,
 * elements are widened to units of 16, 8 or 4 bytes (the widest that its size, the other
 * strides and x_offset allow; the kernel checks the addresses at run time); the 32-bit
 * index path is set when the units and x offsets fit in int32. Returns the collapsed
 * rank: rank 1 with x_strides[0] == 1 is one contiguous block (a copy would do). Launch
 * with grid_for_elements(gather_launch_count(p)): units, not elements. */
static uint32_t fill_gather_params(ember_k_gather_params* p, uint32_t rank, const int64_t* dims,
                                   const int64_t* x_strides, int64_t x_offset,
                                   size_t element_size, uint64_t count) {
  const uint64_t x = p->x, y = p->y;
  memset(p, 0, sizeof *p);
  p->x = x;
  p->y = y;
  p->count = count;
  p->x_offset = x_offset;
  p->vector = 1;
  const int64_t* in[1] = {x_strides};
  int64_t* out[1] = {p->x_strides};
  p->rank = collapse_dims(rank, dims, 1, in, p->dims, out);
  if (p->x_strides[p->rank - 1] == 1) {
    int64_t w = 16 / (int64_t)element_size;
    while (w > 1 && w * (int64_t)element_size >= 4 && !gather_widens(p, w)) w /= 2;
    if (w > 1 && w * (int64_t)element_size >= 4) {
      /* In units; collapsed again, since an innermost dim of one unit drops out. */
      int64_t unit_dims[EMBER_K_MAX_RANK], unit_strides[EMBER_K_MAX_RANK];
      for (uint32_t d = 0; d < p->rank; ++d) {
        unit_dims[d] = p->dims[d];
        unit_strides[d] = d + 1 < p->rank ? p->x_strides[d] / w : 1;
      }
      unit_dims[p->rank - 1] /= w;
      const int64_t* unit_in[1] = {unit_strides};
      p->rank = collapse_dims(p->rank, unit_dims, 1, unit_in, p->dims, out);
      p->x_offset = x_offset / w;
      p->count = count / (uint64_t)w;
      p->vector = (uint32_t)w;
    }
  }
  /* 32-bit indices: the units, and the largest x offset a unit can have. */
  uint64_t reach = (uint64_t)p->x_offset, step;
  bool fits = p->count > 0 && p->count <= INT32_MAX && p->x_offset >= 0;
  for (uint32_t d = 0; d < p->rank && fits; ++d) {
    fits = p->x_strides[d] >= 0 &&
           ember_checked_mul_u64((uint64_t)(p->dims[d] - 1), (uint64_t)p->x_strides[d], &step) &&
           ember_checked_add_u64(reach, step, &reach) && reach <= INT32_MAX;
  }
  if (fits) {
    p->index32 = 1;
    for (uint32_t d = 1; d < p->rank; ++d) {
      fast_divisor((uint64_t)p->dims[d], &p->div_mul[d], &p->div_shift[d]);
    }
  }
  return p->rank;
}

/* The threads a gather needs: one per unit of y. */
static uint64_t gather_launch_count(const ember_k_gather_params* p) { return p->count; }

/* y[i] = x[x_offset + offset(i)] over y's dims (PERMUTE, EXPAND, SLICE); one that moves
 * a contiguous block is a copy. */
static void add_gather_step(ember_cuda_executor* executor, uint32_t i, uint32_t rank,
                            const int64_t* dims, const int64_t* x_strides, int64_t x_offset) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const uint32_t x_tensor = ember_plan_op_input(plan, op, 0);
  const uint32_t y_tensor = ember_plan_op_output(plan, op, 0);
  const ember_tensor_desc* y = &plan->tensors[y_tensor];
  const size_t element_size = ember_dtype_size(y->dtype);
  ember_k_gather_params p = {0};
  fill_gather_params(&p, rank, dims, x_strides, x_offset, element_size, y->numel);
  if (p.rank == 1 && (p.x_strides[0] == 1 || p.dims[0] == 1)) {
    if (x_offset == 0) {
      build_copy(executor, i);
      return;
    }
    ember_k_copy_rows_params c = {0};
    c.rows = 1;
    c.row_bytes = (int64_t)y->nbytes;
    c.x_pitch = c.y_pitch = c.row_bytes;
    c.x_offset = x_offset * (int64_t)element_size;
    add_copy_rows_step(executor, i, x_tensor, y_tensor, &c);
    return;
  }
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_GATHER + ember_cuda_size_index(element_size),
      grid_for_elements(executor, gather_launch_count(&p)), &p, sizeof p);
  add_ref(executor, step, x_tensor, offsetof(ember_k_gather_params, x));
  add_ref(executor, step, y_tensor, offsetof(ember_k_gather_params, y));
}

static void build_expand(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  int64_t strides[EMBER_MAX_RANK];
  broadcast_strides(x, y->rank, strides);
  add_gather_step(executor, i, y->rank, y->dims, strides, 0);
}

static void build_slice(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  const uint32_t dim = (uint32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_SLICE_DIM);
  const int64_t start = ember_plan_op_attr(plan, op, EMBER_ATTR_SLICE_START);
  const int64_t step = ember_plan_op_attr(plan, op, EMBER_ATTR_SLICE_STEP);
  int64_t strides[EMBER_MAX_RANK];
  contiguous_strides(x, strides);
  if (step == 1) {
    /* Rows of y.dims[dim] * inner contiguous elements. */
    const int64_t element_size = (int64_t)ember_dtype_size(y->dtype);
    const int64_t inner = strides[dim] * element_size;
    ember_k_copy_rows_params c = {0};
    c.rows = (int64_t)(y->numel / (uint64_t)(y->dims[dim] * strides[dim]));
    c.row_bytes = y->dims[dim] * inner;
    c.x_pitch = x->dims[dim] * inner;
    c.y_pitch = c.row_bytes;
    c.x_offset = start * inner;
    add_copy_rows_step(executor, i, ember_plan_op_input(plan, op, 0),
                       ember_plan_op_output(plan, op, 0), &c);
    return;
  }
  const int64_t offset = start * strides[dim];
  strides[dim] *= step;
  add_gather_step(executor, i, y->rank, y->dims, strides, offset);
}

static void build_cat(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  const uint32_t dim = (uint32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CAT_DIM);
  int64_t outer = 1, inner = (int64_t)ember_dtype_size(y->dtype);
  for (uint32_t d = 0; d < dim; ++d) outer *= y->dims[d];
  for (uint32_t d = dim + 1; d < y->rank; ++d) inner *= y->dims[d];
  int64_t column = 0;
  for (uint32_t k = 0; k < op->num_inputs; ++k) {
    const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, k);
    const int64_t x_row = x->dims[dim] * inner;
    if (x_row != 0) {
      ember_k_copy_rows_params c = {0};
      c.rows = outer;
      c.row_bytes = x_row;
      c.x_pitch = x_row;
      c.y_pitch = y->dims[dim] * inner;
      c.y_offset = column;
      add_copy_rows_step(executor, i, ember_plan_op_input(plan, op, k),
                         ember_plan_op_output(plan, op, 0), &c);
    }
    column += x_row;
  }
}

static void build_where(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  int64_t cs[EMBER_MAX_RANK], as[EMBER_MAX_RANK], bs[EMBER_MAX_RANK];
  broadcast_strides(ember_plan_op_input_tensor(plan, op, 0), y->rank, cs);
  broadcast_strides(ember_plan_op_input_tensor(plan, op, 1), y->rank, as);
  broadcast_strides(ember_plan_op_input_tensor(plan, op, 2), y->rank, bs);
  ember_k_where_params p = {0};
  p.count = y->numel;
  const int64_t* in[3] = {cs, as, bs};
  int64_t* out[3] = {p.cond_strides, p.a_strides, p.b_strides};
  p.rank = collapse_dims(y->rank, y->dims, 3, in, p.dims, out);
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_WHERE + ember_cuda_size_index(ember_dtype_size(y->dtype)),
      grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_where_params, cond));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1), offsetof(ember_k_where_params, a));
  add_ref(executor, step, ember_plan_op_input(plan, op, 2), offsetof(ember_k_where_params, b));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_where_params, y));
}

static void build_cast(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  if (x->dtype == y->dtype) {
    build_copy(executor, i);
    return;
  }
  ember_k_cast_params p = {0};
  p.count = y->numel;
  p.x_dtype = (int32_t)x->dtype;
  p.y_dtype = (int32_t)y->dtype;
  ember_cuda_step* step = add_kernel_step(executor, i, EMBER_CUDA_KERNEL_CAST,
                                          grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_cast_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_cast_params, y));
}

static void build_embedding(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* indices = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  ember_k_embedding_params p = {0};
  p.error = executor->embedding_error;
  p.count = (int64_t)indices->numel;
  p.rows = w->dims[0];
  p.cols = w->dims[1];
  p.index_is_64 = indices->dtype == EMBER_DTYPE_INT64;
  p.op_index = i;
  const uint32_t kernel = ember_dtype_size(y->dtype) == 2 ? EMBER_CUDA_KERNEL_EMBEDDING_2
                                                          : EMBER_CUDA_KERNEL_EMBEDDING_4;
  ember_cuda_step* step = add_kernel_step(executor, i, kernel,
                                          grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_embedding_params, w));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1),
          offsetof(ember_k_embedding_params, indices));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_embedding_params, y));
}

/* Appends dim (size, stride) to a group of dims, merging it into the group's last dim
 * when the pair is contiguous (row-major: outer stride = inner stride x inner size). */
static void group_append(uint32_t* rank, int64_t* dims, int64_t* strides, int64_t size,
                         int64_t stride) {
  if (size == 1) return;
  if (*rank > 0 && strides[*rank - 1] == stride * size) {
    dims[*rank - 1] *= size;
    strides[*rank - 1] = stride;
    return;
  }
  dims[*rank] = size;
  strides[*rank] = stride;
  ++*rank;
}

static void build_reduce(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  const int64_t mask = ember_plan_op_attr(plan, op, EMBER_ATTR_REDUCE_DIM_MASK);
  int64_t strides[EMBER_MAX_RANK];
  contiguous_strides(x, strides);
  if (executor->channels_last[ember_plan_op_input(plan, op, 0)]) {
    /* [N, C, H, W] stored [N, H, W, C] (plan_channels_last): the walks take any strides. */
    strides[3] = x->dims[1];
    strides[2] = x->dims[3] * x->dims[1];
    strides[1] = 1;
  }
  ember_k_reduce_params p = {0};
  p.op = op->opcode == EMBER_OP_REDUCE_SUM    ? EMBER_K_REDUCE_SUM
         : op->opcode == EMBER_OP_REDUCE_MEAN ? EMBER_K_REDUCE_MEAN
                                              : EMBER_K_REDUCE_MAX;
  p.out_count = (int64_t)y->numel;
  p.red_count = 1;
  for (uint32_t d = 0; d < x->rank; ++d) {
    if (((mask >> d) & 1) != 0) {
      p.red_count *= x->dims[d];
      group_append(&p.red_rank, p.red_dims, p.red_strides, x->dims[d], strides[d]);
    } else {
      group_append(&p.kept_rank, p.kept_dims, p.kept_strides, x->dims[d], strides[d]);
    }
  }
  if (p.red_rank == 0) { /* every reduced dim has size 1 */
    p.red_rank = 1;
    p.red_dims[0] = 1;
  }
  const uint32_t dt = ember_cuda_dtype_index(y->dtype);
  const bool short_reduction = p.red_count <= 32;
  const uint64_t warps_per_block = EMBER_K_BLOCK / 32u;
  uint64_t blocks = y->numel; /* EMBER_K_REDUCE_BLOCKS */
  if (!short_reduction && p.red_count <= EMBER_K_REDUCE_WARP_MAX) {
    const int64_t cols = p.kept_rank > 0 ? p.kept_dims[p.kept_rank - 1] : 0;
    if (cols >= EMBER_K_REDUCE_COLUMNS_MIN && p.kept_strides[p.kept_rank - 1] == 1) {
      /* 16 bytes of columns a lane where every vector stays whole and aligned. */
      const int64_t v = 16 / (int64_t)ember_dtype_size(x->dtype);
      bool vectors = cols % v == 0;
      for (uint32_t d = 0; d + 1 < p.kept_rank; ++d) vectors = vectors && p.kept_strides[d] % v == 0;
      for (uint32_t d = 0; d < p.red_rank; ++d) vectors = vectors && p.red_strides[d] % v == 0;
      p.form = vectors ? EMBER_K_REDUCE_COLUMN_VECTORS : EMBER_K_REDUCE_COLUMNS;
      blocks = (y->numel / (uint64_t)cols) * ceil_div_u64((uint64_t)cols, vectors ? 32u * (uint64_t)v : 32u);
    } else {
      p.form = EMBER_K_REDUCE_WARPS;
      blocks = ceil_div_u64(y->numel, warps_per_block);
    }
  }
  ember_cuda_step* step =
      short_reduction
          ? add_kernel_step(executor, i, EMBER_CUDA_KERNEL_REDUCE_THREAD + dt,
                            grid_for_elements(executor, y->numel), &p, sizeof p)
          : add_kernel_step(executor, i, EMBER_CUDA_KERNEL_REDUCE_BLOCK + dt,
                            grid_for_rows(executor, blocks), &p, sizeof p);
  if (p.form == EMBER_K_REDUCE_COLUMNS || p.form == EMBER_K_REDUCE_COLUMN_VECTORS) {
    ++executor->reduce_columns;
  }
  if (p.form == EMBER_K_REDUCE_COLUMN_VECTORS) ++executor->reduce_column_vectors;
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_reduce_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_reduce_params, y));
}

/* The largest power of two (at most 256) dividing `value`. */
static uint32_t address_alignment(uint64_t value) {
  if (value == 0) return 256u;
  const uint64_t lowest = value & (~value + 1u);
  return lowest >= 256u ? 256u : (uint32_t)lowest;
}

/* An SDPA the flash kernel takes: its sizes with the batch dims collapsed to
 * (batch, heads) (the last batch dim is the heads, 1 at rank 2). */
typedef struct sdpa_flash_shape {
  int64_t batch;
  int64_t heads;
  int64_t l;
  int64_t s;
  int64_t e;
} sdpa_flash_shape;

/* How the flash kernel reads or writes one operand: the bytes of `tensor`, from `offset`
 * elements past its address, stepping strides[0], [1], [2] elements per batch, head and
 * row. An operand read in place is its own tensor, contiguous. */
typedef struct sdpa_view {
  uint32_t tensor;
  int64_t offset;
  int64_t strides[3];
} sdpa_view;

/* Whether SDPA op `op` runs on the flash kernel (ember_sdpa_flash_<f16, bf16>): float16 or
 * bfloat16, no mask tensor (is_causal is fine), e == ev of 64 or 128, L, S and every batch
 * dim at least 1, the block count (and every size) within int32, and every operand 16-byte
 * aligned (the plan's offsets are multiples of 64; a bound input or output that is not
 * aligned is staged). Decided from the plan alone, so that executor_needs_cublaslt knows,
 * before any step is built, whether the plan's SDPAs need cuBLASLt. */
static bool sdpa_takes_flash(const ember_plan* plan, const ember_op_desc* op,
                             sdpa_flash_shape* out) {
  if (op->num_inputs != 3) return false;
  const ember_tensor_desc* q = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* k = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* v = ember_plan_op_input_tensor(plan, op, 2);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (!is_16bit_float(q->dtype)) return false;
  const uint32_t rank = q->rank;
  if (rank < 2 || k->rank != rank || v->rank != rank) return false;
  const int64_t l = q->dims[rank - 2], e = q->dims[rank - 1], s = k->dims[rank - 2];
  /* The kernel's row and key indices are int32, with room past the last tile. */
  const int64_t most = INT32_MAX - 2 * EMBER_K_SDPA_FLASH_ROWS;
  if ((e != 64 && e != 128) || k->dims[rank - 1] != e || v->dims[rank - 1] != e ||
      v->dims[rank - 2] != s || l < 1 || s < 1 || l > most || s > most) {
    return false;
  }
  const int64_t heads = rank >= 3 ? q->dims[rank - 3] : 1;
  uint64_t batch = 1, blocks;
  for (uint32_t d = 0; d + 3 < rank; ++d) {
    if (q->dims[d] < 1 || !ember_checked_mul_u64(batch, (uint64_t)q->dims[d], &batch)) return false;
  }
  const uint64_t tiles = ((uint64_t)l + EMBER_K_SDPA_FLASH_ROWS - 1) / EMBER_K_SDPA_FLASH_ROWS;
  if (heads < 1 || heads > INT32_MAX || batch > INT32_MAX ||
      !ember_checked_mul_u64(tiles, (uint64_t)heads, &blocks) ||
      !ember_checked_mul_u64(blocks, batch, &blocks) || blocks > INT32_MAX) {
    return false;
  }
  const ember_tensor_desc* operands[4] = {q, k, v, y};
  for (int n = 0; n < 4; ++n) {
    if (!is_io(operands[n]) && operands[n]->data_offset % 16u != 0) return false;
  }
  out->batch = (int64_t)batch;
  out->heads = heads;
  out->l = l;
  out->s = s;
  out->e = e;
  return true;
}

/* An operand read or written in place: `rows` rows of e elements per (batch, head). */
static sdpa_view sdpa_contiguous_view(uint32_t tensor, const sdpa_flash_shape* shape,
                                      int64_t rows) {
  sdpa_view view;
  view.tensor = tensor;
  view.offset = 0;
  view.strides[2] = shape->e;
  view.strides[1] = rows * shape->e;
  view.strides[0] = shape->heads * rows * shape->e;
  return view;
}

/* SDPA op i on the flash kernel, reading q, k, v and writing y through views[0..3]. */
static void add_sdpa_flash_step(ember_cuda_executor* executor, uint32_t i,
                                const sdpa_flash_shape* shape, const sdpa_view* views) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const int64_t scale_bits = ember_plan_op_attr(plan, op, EMBER_ATTR_SDPA_SCALE_F64);
  double scale;
  memcpy(&scale, &scale_bits, sizeof scale);
  ember_k_sdpa_flash_params p = {0};
  p.batch = (int32_t)shape->batch;
  p.heads = (int32_t)shape->heads;
  p.l = (int32_t)shape->l;
  p.s = (int32_t)shape->s;
  p.e = (int32_t)shape->e;
  p.scale_log2 = (float)(scale * 1.4426950408889634074); /* log2(e) */
  p.is_causal = ember_plan_op_attr(plan, op, EMBER_ATTR_SDPA_IS_CAUSAL) != 0;
  int64_t* strides[4] = {p.q_strides, p.k_strides, p.v_strides, p.y_strides};
  for (int n = 0; n < 4; ++n) memcpy(strides[n], views[n].strides, sizeof views[n].strides);
  const uint64_t tiles =
      (uint64_t)(shape->l + EMBER_K_SDPA_FLASH_ROWS - 1) / EMBER_K_SDPA_FLASH_ROWS;
  const uint64_t blocks = tiles * (uint64_t)shape->heads * (uint64_t)shape->batch;
  const ember_dtype dtype = plan->tensors[views[0].tensor].dtype;
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_SDPA_FLASH + ember_cuda_half_index(dtype),
      (unsigned int)blocks, &p, sizeof p);
  step->block = EMBER_K_SDPA_FLASH_THREADS;
  step->shared_bytes = EMBER_K_SDPA_FLASH_SMEM_BYTES(shape->e);
  const uint32_t slots[4] = {offsetof(ember_k_sdpa_flash_params, q),
                             offsetof(ember_k_sdpa_flash_params, k),
                             offsetof(ember_k_sdpa_flash_params, v),
                             offsetof(ember_k_sdpa_flash_params, y)};
  for (int n = 0; n < 4; ++n) {
    add_ref_at(executor, step, views[n].tensor, slots[n],
               (uint64_t)views[n].offset * ember_dtype_size(dtype));
    /* The kernel's 16-byte loads and stores. */
    require_io_alignment(executor, views[n].tensor, EMBER_CUDA_GEMM_IO_ALIGNMENT);
  }
  ++executor->sdpa_flash;
}

/* ---- SDPA through views: the layout ops around it folded into the flash kernel's strides
 *
 * An encoder's attention moves q, k and v into place with copies: the in-projection's
 * [L, B, 3E] is permuted into [3, L, B, E], sliced three ways, reshaped and permuted to
 * [B, H, L, hd]; y is permuted back to [L, B, H, hd] for the out-projection. The flash
 * kernel takes each operand as an address and strides, so at prepare each chain of
 * PERMUTE, SLICE and RESHAPE (where a reshape is expressible as strides) between a base
 * tensor and the SDPA is composed into one strided view of the base, and the chain's ops
 * run no step (plan_sdpa_folds says when that is allowed). */

/* Layout ops of one chain at most (an encoder's q has 10, most of them reshape views). */
#define EMBER_CUDA_MAX_FOLD 16u
/* Pieces a view may hold (below). */
#define EMBER_CUDA_VIEW_PIECES 16u

/* A tensor's elements as a view of another tensor's elements. Each dim is a run of
 * pieces, outermost first, each piece a size and an element stride: dim d's index i_d is
 * split into one digit per piece (mixed radix by the pieces' sizes), and the element is at
 * offset + sum over all pieces of digit * stride. A dim of size 1 has no pieces. Plain
 * strides are one piece a dim; more arise where a reshape merges dims that are not
 * contiguous with each other: the encoder's q, [L, B, E] with stride 3E on B, reshaped to
 * [L, B * H, hd], whose B * H is the pieces (B, 3E) and (H, hd); the next reshape to
 * [B, H, L, hd] takes them apart again, and the result is plain strides. */
typedef struct view_piece {
  int64_t size;
  int64_t stride;
} view_piece;

typedef struct strided_view {
  uint32_t rank;
  uint32_t num_pieces;
  int64_t dims[EMBER_MAX_RANK];
  uint32_t first_piece[EMBER_MAX_RANK + 1]; /* dim d: pieces[first_piece[d] .. [d + 1]) */
  view_piece pieces[EMBER_CUDA_VIEW_PIECES];
  int64_t offset;
} strided_view;

/* a * b and a + b when they fit in int64 (a, b >= 0). */
static bool mul_i64(int64_t a, int64_t b, int64_t* out) {
  uint64_t product;
  if (!ember_checked_mul_u64((uint64_t)a, (uint64_t)b, &product) || product > INT64_MAX) {
    return false;
  }
  *out = (int64_t)product;
  return true;
}

static bool add_i64(int64_t a, int64_t b, int64_t* out) {
  uint64_t sum;
  if (!ember_checked_add_u64((uint64_t)a, (uint64_t)b, &sum) || sum > INT64_MAX) return false;
  *out = (int64_t)sum;
  return true;
}

/* Appends a piece to the dim being built (the last one), merging it into the piece before
 * when the two step as one (outer stride = inner size x inner stride). */
static bool view_push(strided_view* v, int64_t size, int64_t stride) {
  if (size == 1) return true;
  const uint32_t dim_first = v->first_piece[v->rank];
  if (v->num_pieces > dim_first) {
    view_piece* last = &v->pieces[v->num_pieces - 1];
    int64_t step;
    if (mul_i64(size, stride, &step) && last->stride == step) {
      last->size *= size;
      last->stride = stride;
      return true;
    }
  }
  if (v->num_pieces == EMBER_CUDA_VIEW_PIECES) return false;
  v->pieces[v->num_pieces].size = size;
  v->pieces[v->num_pieces].stride = stride;
  ++v->num_pieces;
  return true;
}

/* Closes the dim being built: it gets `size` and the pieces pushed since the last close. */
static void view_close_dim(strided_view* v, int64_t size) {
  v->dims[v->rank] = size;
  ++v->rank;
  v->first_piece[v->rank] = v->num_pieces;
}

static void view_begin(strided_view* v, int64_t offset) {
  memset(v, 0, sizeof *v);
  v->offset = offset;
}

static void view_contiguous(const ember_tensor_desc* t, strided_view* v) {
  int64_t strides[EMBER_MAX_RANK];
  contiguous_strides(t, strides);
  view_begin(v, 0);
  for (uint32_t d = 0; d < t->rank; ++d) {
    view_push(v, t->dims[d], strides[d]); /* one piece a dim: cannot run out */
    view_close_dim(v, t->dims[d]);
  }
}

/* `in` with dims `dims` (the same element count), no element moved: the pieces, in order,
 * dealt out to the new dims, outermost first; a piece larger than what a dim still needs
 * is split (its outer part to this dim, its inner part on) when the sizes divide. False
 * when they do not (then the reshape moves elements in a way no view can follow). */
static bool view_reshape(const strided_view* in, uint32_t rank, const int64_t* dims,
                         strided_view* out) {
  strided_view v;
  view_begin(&v, in->offset);
  uint32_t next = 0;
  view_piece front = {1, 0}; /* what is left of pieces[next - 1] */
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t need = dims[d];
    while (need > 1) {
      if (front.size == 1) {
        if (next == in->num_pieces) return false;
        front = in->pieces[next++];
      }
      if (need % front.size == 0) { /* the whole piece */
        if (!view_push(&v, front.size, front.stride)) return false;
        need /= front.size;
        front.size = 1;
      } else if (front.size % need == 0) { /* its outer part */
        const int64_t inner = front.size / need;
        int64_t outer_stride;
        if (!mul_i64(front.stride, inner, &outer_stride) || !view_push(&v, need, outer_stride)) {
          return false;
        }
        front.size = inner;
        need = 1;
      } else {
        return false;
      }
    }
    view_close_dim(&v, dims[d]);
  }
  if (front.size != 1 || next != in->num_pieces) return false;
  *out = v;
  return true;
}

/* `in` with its dims in the order `order` (new dim d is in's dim order[d]). */
static bool view_reorder(const strided_view* in, const uint32_t* order, strided_view* out) {
  strided_view v;
  view_begin(&v, in->offset);
  for (uint32_t d = 0; d < in->rank; ++d) {
    const uint32_t from = order[d];
    for (uint32_t k = in->first_piece[from]; k < in->first_piece[from + 1]; ++k) {
      if (!view_push(&v, in->pieces[k].size, in->pieces[k].stride)) return false;
    }
    view_close_dim(&v, in->dims[from]);
  }
  *out = v;
  return true;
}

/* SLICE of `in` along dim: a dim of one piece takes the step into its stride; a dim of
 * several only a step-1 slice of whole runs of its outermost piece. */
static bool view_slice(const strided_view* in, uint32_t dim, int64_t start, int64_t step,
                       int64_t length, strided_view* out) {
  const uint32_t first = in->first_piece[dim], count = in->first_piece[dim + 1] - first;
  int64_t offset = in->offset, shift, stride = 0, inner = 1;
  view_piece outer = {length, 0};
  if (count == 0) {
    if (start != 0 || length > 1) return false; /* a dim of size 1 */
  } else {
    for (uint32_t k = first + 1; k < first + count; ++k) inner *= in->pieces[k].size;
    if (count > 1 && (step != 1 || start % inner != 0 || length % inner != 0)) return false;
    if (!mul_i64(in->pieces[first].stride, count == 1 ? step : 1, &stride) ||
        !mul_i64(start / inner, in->pieces[first].stride, &shift) ||
        !add_i64(offset, shift, &offset)) {
      return false;
    }
    outer.size = length / inner;
    outer.stride = stride;
  }
  strided_view v;
  view_begin(&v, offset);
  for (uint32_t d = 0; d < in->rank; ++d) {
    for (uint32_t k = in->first_piece[d]; k < in->first_piece[d + 1]; ++k) {
      const view_piece piece = d == dim && k == first ? outer : in->pieces[k];
      if (!view_push(&v, piece.size, piece.stride)) return false;
    }
    view_close_dim(&v, d == dim ? length : in->dims[d]);
  }
  *out = v;
  return true;
}

/* The view of layout op `op`'s output, given the view of its input. */
static bool view_forward(const ember_plan* plan, const ember_op_desc* op, const strided_view* in,
                         strided_view* out) {
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (op->opcode == EMBER_OP_RESHAPE) return view_reshape(in, y->rank, y->dims, out);
  if (op->opcode == EMBER_OP_PERMUTE) {
    uint32_t order[EMBER_MAX_RANK];
    for (uint32_t d = 0; d < y->rank; ++d) order[d] = (uint32_t)ember_plan_op_attr(plan, op, d);
    return view_reorder(in, order, out);
  }
  const uint32_t dim = (uint32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_SLICE_DIM);
  return view_slice(in, dim, ember_plan_op_attr(plan, op, EMBER_ATTR_SLICE_START),
                    ember_plan_op_attr(plan, op, EMBER_ATTR_SLICE_STEP), y->dims[dim], out);
}

/* The view of layout op `op`'s input (a RESHAPE or PERMUTE), given the view of its output:
 * y's chain, walked back from the tensor it ends in. */
static bool view_backward(const ember_plan* plan, const ember_op_desc* op, const strided_view* out,
                          strided_view* in) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  if (op->opcode == EMBER_OP_RESHAPE) return view_reshape(out, x->rank, x->dims, in);
  uint32_t order[EMBER_MAX_RANK];
  for (uint32_t d = 0; d < x->rank; ++d) order[ember_plan_op_attr(plan, op, d)] = d;
  return view_reorder(out, order, in);
}

/* A view of an SDPA operand [..., rows, e] in the flash kernel's form: e contiguous (one
 * piece of stride 1), rows and heads (the dim before; none at rank 2) one piece each, the
 * batch dims before them one piece together; every stride and the offset a multiple of 8
 * elements (16-byte aligned rows). A dim of size 1 takes stride 0. */
static bool flash_form(const strided_view* v, uint32_t tensor, sdpa_view* out) {
  const uint32_t r = v->rank;
  if (r < 2) return false;
  const uint32_t* first = v->first_piece;
  if (first[r] - first[r - 1] != 1 || v->pieces[first[r - 1]].stride != 1) return false;
  int64_t strides[3] = {0, 0, 0}; /* batch, heads, rows */
  const uint32_t heads_dim = r >= 3 ? r - 3 : r;
  for (uint32_t k = 0; k < 2; ++k) {
    const uint32_t d = k == 0 ? heads_dim : r - 2;
    if (d == r || first[d + 1] == first[d]) continue;
    if (first[d + 1] - first[d] != 1) return false;
    strides[k + 1] = v->pieces[first[d]].stride;
  }
  /* The batch dims' pieces, merged as one dim. */
  strided_view batch;
  view_begin(&batch, 0);
  for (uint32_t k = 0; k < first[heads_dim == r ? 0 : heads_dim]; ++k) {
    if (!view_push(&batch, v->pieces[k].size, v->pieces[k].stride)) return false;
  }
  if (batch.num_pieces > 1) return false;
  if (batch.num_pieces == 1) strides[0] = batch.pieces[0].stride;
  out->tensor = tensor;
  out->offset = v->offset;
  memcpy(out->strides, strides, sizeof strides);
  if (out->offset % 8 != 0) return false;
  for (int k = 0; k < 3; ++k) {
    if (out->strides[k] % 8 != 0) return false;
  }
  return true;
}

/* What plan_sdpa_folds decides for one SDPA. Operand n (q, k, v) is reached from its base
 * through ops[n][len[n] - 1], ..., ops[n][0] (ops[n][0] writes the operand); the first
 * m[n] of them are folded, so the base is the input of ops[n][m[n] - 1] (the operand
 * itself when m[n] is 0). y goes through yops[0] (which reads it), yops[1], ...; the first
 * ylen are folded and the SDPA writes where they end. views: q, k, v, y as the kernel
 * reads and writes them. */
typedef struct sdpa_fold {
  uint32_t len[3];
  uint32_t m[3];
  uint32_t ops[3][EMBER_CUDA_MAX_FOLD];
  uint32_t ylen;
  uint32_t yops[EMBER_CUDA_MAX_FOLD];
  sdpa_view views[4];
} sdpa_fold;

typedef struct fold_context {
  ember_cuda_executor* executor;
  uint32_t* producer;     /* per tensor: the op that writes it, or EMBER_PLAN_NO_INDEX */
  uint32_t* reader_first; /* tensor t's readers: reader_ops[reader_first[t] .. [t + 1]) */
  uint32_t* reader_ops;
  uint32_t* writes;       /* per op: the tensor its step writes (an SDPA's: where y's chain ends) */
  uint8_t* mark;          /* per op: folded by the SDPA being decided */
  uint64_t next_offset;   /* arena offset of the next relocated tensor */
} fold_context;

static bool is_foldable_layout_op(ember_opcode opcode) {
  return opcode == EMBER_OP_PERMUTE || opcode == EMBER_OP_SLICE || opcode == EMBER_OP_RESHAPE;
}

/* Where intermediate t's bytes are in the arena (after any relocation). */
static uint64_t arena_offset(const ember_cuda_executor* executor, uint32_t t) {
  return executor->relocated[t] != UINT64_MAX ? executor->relocated[t]
                                              : executor->plan->tensors[t].data_offset;
}

/* Whether tensors a and b share arena bytes (constants and bound tensors share none). */
static bool arena_overlap(const ember_cuda_executor* executor, uint32_t a, uint32_t b) {
  const ember_tensor_desc* ta = &executor->plan->tensors[a];
  const ember_tensor_desc* tb = &executor->plan->tensors[b];
  return ta->storage == EMBER_STORAGE_INTERMEDIATE && tb->storage == EMBER_STORAGE_INTERMEDIATE &&
         ember_ranges_overlap(arena_offset(executor, a), ta->nbytes, arena_offset(executor, b),
                              tb->nbytes);
}

/* Whether RESHAPE op is a view (no step: build_reshape). */
static bool reshape_is_view(const ember_cuda_executor* executor, const ember_op_desc* op) {
  const ember_plan* plan = executor->plan;
  const uint32_t x = ember_plan_op_input(plan, op, 0), y = ember_plan_op_output(plan, op, 0);
  return plan->tensors[x].storage == EMBER_STORAGE_INTERMEDIATE &&
         plan->tensors[y].storage == EMBER_STORAGE_INTERMEDIATE &&
         arena_offset(executor, x) == arena_offset(executor, y);
}

/* The tensor op j's step writes, or EMBER_PLAN_NO_INDEX when it runs none (folded, or a
 * reshape view). */
static uint32_t op_writes(const fold_context* ctx, uint32_t j) {
  const ember_cuda_executor* executor = ctx->executor;
  const ember_op_desc* op = &executor->plan->ops[j];
  if (executor->folded[j] || ctx->mark[j] ||
      (op->opcode == EMBER_OP_RESHAPE && reshape_is_view(executor, op))) {
    return EMBER_PLAN_NO_INDEX;
  }
  return ctx->writes[j];
}

/* Sets views[n] for the longest fold of operand n's chain, up to m[n] ops, that composes
 * into one view of the flash kernel's form (shortening m[n] until one does). */
static void settle_chain(const ember_plan* plan, const sdpa_flash_shape* shape, uint32_t operand,
                         uint32_t n, sdpa_fold* f) {
  for (; f->m[n] > 0; --f->m[n]) {
    const uint32_t base = ember_plan_op_input(plan, &plan->ops[f->ops[n][f->m[n] - 1]], 0);
    strided_view v, next;
    view_contiguous(&plan->tensors[base], &v);
    bool ok = true;
    for (uint32_t k = f->m[n]; k-- > 0 && ok;) {
      ok = view_forward(plan, &plan->ops[f->ops[n][k]], &v, &next);
      v = next;
    }
    if (ok && flash_form(&v, base, &f->views[n])) return;
  }
  f->views[n] = sdpa_contiguous_view(operand, shape, n == 0 ? shape->l : shape->s);
}

/* The same for y: the longest fold of its chain, up to ylen ops, that ends in an
 * intermediate, holds a PERMUTE (reshapes alone are views already) and composes. */
static void settle_y(const ember_plan* plan, const sdpa_flash_shape* shape, uint32_t y,
                     sdpa_fold* f) {
  for (; f->ylen > 0; --f->ylen) {
    const uint32_t end = ember_plan_op_output(plan, &plan->ops[f->yops[f->ylen - 1]], 0);
    bool permutes = false;
    for (uint32_t k = 0; k < f->ylen; ++k) {
      permutes = permutes || plan->ops[f->yops[k]].opcode == EMBER_OP_PERMUTE;
    }
    if (!permutes) break;
    if (plan->tensors[end].storage != EMBER_STORAGE_INTERMEDIATE) continue;
    strided_view v, next;
    view_contiguous(&plan->tensors[end], &v);
    bool ok = true;
    for (uint32_t k = f->ylen; k-- > 0 && ok;) {
      ok = view_backward(plan, &plan->ops[f->yops[k]], &v, &next);
      v = next;
    }
    if (ok && flash_form(&v, end, &f->views[3])) return;
  }
  f->ylen = 0;
  f->views[3] = sdpa_contiguous_view(y, shape, shape->l);
}

/* ctx->mark: the ops folded now. An op on the folded part of one chain and the kept part of
 * another (it writes that one's base) runs. */
static void mark_folds(fold_context* ctx, const sdpa_fold* f) {
  for (int pass = 0; pass < 2; ++pass) {
    for (uint32_t n = 0; n < 3; ++n) {
      for (uint32_t k = pass == 0 ? 0 : f->m[n]; k < (pass == 0 ? f->m[n] : f->len[n]); ++k) {
        ctx->mark[f->ops[n][k]] = pass == 0;
      }
    }
  }
  for (uint32_t k = 0; k < f->ylen; ++k) ctx->mark[f->yops[k]] = 1;
}

static void clear_marks(fold_context* ctx, const sdpa_fold* f) {
  for (uint32_t n = 0; n < 3; ++n) {
    for (uint32_t k = 0; k < f->len[n]; ++k) ctx->mark[f->ops[n][k]] = 0;
  }
  for (uint32_t k = 0; k < f->ylen; ++k) ctx->mark[f->yops[k]] = 0;
}

/* One pass of plan_sdpa_folds' conditions on q, k and v; shortens a chain and returns true
 * at the first that fails. */
static bool shorten_a_chain(fold_context* ctx, uint32_t i, const sdpa_flash_shape* shape,
                            sdpa_fold* f) {
  const ember_cuda_executor* executor = ctx->executor;
  const ember_plan* plan = executor->plan;
  const ember_op_desc* sdpa = &plan->ops[i];
  /* A folded op's output is read by folded ops and this SDPA only; else it must exist. */
  for (uint32_t n = 0; n < 3; ++n) {
    for (uint32_t k = 0; k < f->m[n]; ++k) {
      const uint32_t o = f->ops[n][k];
      if (!ctx->mark[o]) continue;
      const uint32_t t = ember_plan_op_output(plan, &plan->ops[o], 0);
      bool outside = false;
      for (uint32_t r = ctx->reader_first[t]; r < ctx->reader_first[t + 1]; ++r) {
        outside = outside || (ctx->reader_ops[r] != i && !ctx->mark[ctx->reader_ops[r]]);
      }
      if (!outside) continue;
      for (uint32_t c = 0; c < 3; ++c) { /* every chain that folds o keeps it now */
        for (uint32_t kk = 0; kk < f->m[c]; ++kk) {
          if (f->ops[c][kk] != o) continue;
          f->m[c] = kk;
          settle_chain(plan, shape, ember_plan_op_input(plan, sdpa, c), c, f);
          break;
        }
      }
      return true;
    }
  }
  /* A base is read at the SDPA, not where its chain began: no step in between may write
   * its bytes (the memory plan may have given them away after the chain's first op). */
  for (uint32_t n = 0; n < 3; ++n) {
    const uint32_t base = f->views[n].tensor;
    if (f->m[n] == 0 || plan->tensors[base].storage != EMBER_STORAGE_INTERMEDIATE) continue;
    for (uint32_t j = ctx->producer[base] + 1; j < i; ++j) {
      const uint32_t w = op_writes(ctx, j);
      if (w == EMBER_PLAN_NO_INDEX || !arena_overlap(executor, w, base)) continue;
      --f->m[n];
      settle_chain(plan, shape, ember_plan_op_input(plan, sdpa, n), n, f);
      return true;
    }
  }
  return false;
}

/* Whether the tensor the SDPA writes (`w`: where y's chain ends, or y) must move to bytes of
 * its own: it shares bytes with what the SDPA reads, or (y's chain folded, so it is written
 * at the SDPA rather than at the chain's end) with what a step in between reads or writes. */
static bool output_needs_own_bytes(const fold_context* ctx, uint32_t i, const sdpa_fold* f,
                                   uint32_t w) {
  const ember_cuda_executor* executor = ctx->executor;
  const ember_plan* plan = executor->plan;
  if (plan->tensors[w].storage != EMBER_STORAGE_INTERMEDIATE) return false;
  for (uint32_t n = 0; n < 3; ++n) {
    if (arena_overlap(executor, w, f->views[n].tensor)) return true;
  }
  if (f->ylen == 0) return false;
  for (uint32_t j = i + 1; j < ctx->producer[w]; ++j) {
    if (executor->folded[j] || ctx->mark[j]) continue;
    const ember_op_desc* op = &plan->ops[j];
    for (uint32_t k = 0; k < op->num_inputs; ++k) {
      if (arena_overlap(executor, w, ember_plan_op_input(plan, op, k))) return true;
    }
    const uint32_t written = op_writes(ctx, j);
    if (written != EMBER_PLAN_NO_INDEX && arena_overlap(executor, w, written)) return true;
  }
  return false;
}

/* Op j, if marked, runs no step from now on; counted when that saves a copy (a PERMUTE or
 * SLICE, or a RESHAPE that is not a view). */
static void commit_fold(fold_context* ctx, uint32_t j) {
  ember_cuda_executor* executor = ctx->executor;
  if (!ctx->mark[j] || executor->folded[j]) return;
  ctx->mark[j] = 0;
  executor->folded[j] = true;
  const ember_op_desc* op = &executor->plan->ops[j];
  if (op->opcode != EMBER_OP_RESHAPE || !reshape_is_view(executor, op)) {
    ++executor->folded_layout_ops;
  }
}

/* Decides SDPA op i's folds (flash kernel taken), records them and its views. */
static void fold_sdpa(fold_context* ctx, uint32_t i, const sdpa_flash_shape* shape) {
  ember_cuda_executor* executor = ctx->executor;
  const ember_plan* plan = executor->plan;
  const ember_op_desc* sdpa = &plan->ops[i];
  const uint32_t y = ember_plan_op_output(plan, sdpa, 0);
  sdpa_fold f;
  memset(&f, 0, sizeof f);
  for (uint32_t n = 0; n < 3; ++n) {
    uint32_t t = ember_plan_op_input(plan, sdpa, n);
    while (f.len[n] < EMBER_CUDA_MAX_FOLD &&
           plan->tensors[t].storage == EMBER_STORAGE_INTERMEDIATE) {
      const uint32_t p = ctx->producer[t];
      if (p == EMBER_PLAN_NO_INDEX || !is_foldable_layout_op(plan->ops[p].opcode) ||
          executor->folded[p]) {
        break;
      }
      f.ops[n][f.len[n]++] = p;
      t = ember_plan_op_input(plan, &plan->ops[p], 0);
    }
    f.m[n] = f.len[n];
    settle_chain(plan, shape, ember_plan_op_input(plan, sdpa, n), n, &f);
  }
  for (uint32_t t = y; f.ylen < EMBER_CUDA_MAX_FOLD;) {
    if (plan->tensors[t].storage != EMBER_STORAGE_INTERMEDIATE ||
        ctx->reader_first[t + 1] - ctx->reader_first[t] != 1) {
      break;
    }
    const uint32_t r = ctx->reader_ops[ctx->reader_first[t]];
    const ember_opcode opcode = plan->ops[r].opcode;
    if (opcode != EMBER_OP_PERMUTE && opcode != EMBER_OP_RESHAPE) break;
    f.yops[f.ylen++] = r;
    t = ember_plan_op_output(plan, &plan->ops[r], 0);
  }
  settle_y(plan, shape, y, &f);
  bool changed = true;
  while (changed) {
    clear_marks(ctx, &f);
    mark_folds(ctx, &f);
    changed = shorten_a_chain(ctx, i, shape, &f);
  }
  const uint32_t w = f.views[3].tensor;
  uint64_t move_to = UINT64_MAX, size, end;
  if (output_needs_own_bytes(ctx, i, &f, w)) {
    if (ember_checked_align_u64(plan->tensors[w].nbytes, EMBER_CUDA_ALIGNMENT, &size) &&
        ember_checked_add_u64(ctx->next_offset, size, &end)) {
      move_to = ctx->next_offset;
      ctx->next_offset = end;
    } else {
      /* No room to move it: fold nothing (y then shares no bytes with q, k, v). */
      clear_marks(ctx, &f);
      for (uint32_t n = 0; n < 3; ++n) {
        f.m[n] = 0;
        settle_chain(plan, shape, ember_plan_op_input(plan, sdpa, n), n, &f);
      }
      f.ylen = 0;
      settle_y(plan, shape, y, &f);
    }
  }
  for (uint32_t n = 0; n < 3; ++n) {
    for (uint32_t k = 0; k < f.len[n]; ++k) commit_fold(ctx, f.ops[n][k]);
  }
  for (uint32_t k = 0; k < f.ylen; ++k) commit_fold(ctx, f.yops[k]);
  if (move_to != UINT64_MAX) executor->relocated[f.views[3].tensor] = move_to;
  ctx->writes[i] = f.views[3].tensor;
  memcpy(&executor->sdpa_views[4u * i], f.views, sizeof f.views);
}

/* For every SDPA on the flash kernel: the layout ops between its operands and their bases,
 * and between y and the tensor its layout ops end in, that fold into the kernel's views.
 * A chain folds where every tensor it skips is an intermediate read by nothing but the
 * chain and the SDPA (the [3, L, B, E] copy that three SLICEs of q, k, v read is fine), the
 * composed view has the kernel's form (kernel_params.h), and memory stays valid: a base's
 * bytes are written by no step between its writer and the SDPA; the SDPA's output shares
 * no bytes with what it reads, nor (y's chain folded) with what the steps between the SDPA
 * and the chain's end touch, else it moves to bytes of its own past the arena (*in_out_extra
 * grows, as plan_fusions' relocations). A chain that fails is shortened from its base end
 * until it holds; what is not folded keeps its steps. Runs after plan_fusions. */
static ember_status* plan_sdpa_folds(ember_cuda_executor* executor, uint64_t* in_out_extra) {
  const ember_plan* plan = executor->plan;
  sdpa_flash_shape shape;
  bool any = false;
  for (uint32_t i = 0; i < plan->num_ops && !any; ++i) {
    any = plan->ops[i].opcode == EMBER_OP_SDPA && sdpa_takes_flash(plan, &plan->ops[i], &shape);
  }
  if (!any) return NULL;
  fold_context ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.executor = executor;
  executor->folded = calloc(plan->num_ops, sizeof(bool));
  executor->sdpa_views = calloc(4u * (size_t)plan->num_ops, sizeof(sdpa_view));
  ctx.producer = malloc(plan->num_tensors * sizeof(uint32_t));
  ctx.reader_first = calloc((size_t)plan->num_tensors + 1u, sizeof(uint32_t));
  ctx.reader_ops = malloc(((size_t)plan->num_operands + 1u) * sizeof(uint32_t));
  ctx.writes = malloc(plan->num_ops * sizeof(uint32_t));
  ctx.mark = calloc(plan->num_ops, 1);
  ember_status* status = NULL;
  if (executor->folded == NULL || executor->sdpa_views == NULL || ctx.producer == NULL ||
      ctx.reader_first == NULL || ctx.reader_ops == NULL || ctx.writes == NULL ||
      ctx.mark == NULL) {
    status = ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  } else {
    for (uint32_t t = 0; t < plan->num_tensors; ++t) ctx.producer[t] = EMBER_PLAN_NO_INDEX;
    for (uint32_t j = 0; j < plan->num_ops; ++j) {
      const ember_op_desc* op = &plan->ops[j];
      for (uint32_t k = 0; k < op->num_inputs; ++k) {
        ++ctx.reader_first[ember_plan_op_input(plan, op, k) + 1];
      }
      ctx.producer[ember_plan_op_output(plan, op, 0)] = j;
      ctx.writes[j] = ember_plan_op_output(plan, op, 0);
    }
    for (uint32_t t = 0; t < plan->num_tensors; ++t) ctx.reader_first[t + 1] += ctx.reader_first[t];
    uint32_t* cursor = calloc(plan->num_tensors + 1u, sizeof(uint32_t));
    if (cursor == NULL) {
      status = ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
    } else {
      memcpy(cursor, ctx.reader_first, plan->num_tensors * sizeof(uint32_t));
      for (uint32_t j = 0; j < plan->num_ops; ++j) {
        const ember_op_desc* op = &plan->ops[j];
        for (uint32_t k = 0; k < op->num_inputs; ++k) {
          ctx.reader_ops[cursor[ember_plan_op_input(plan, op, k)]++] = j;
        }
      }
      free(cursor);
      if (*in_out_extra > 0) {
        ctx.next_offset = plan->arena_size + *in_out_extra;
      } else if (!ember_checked_align_u64(plan->arena_size, EMBER_CUDA_ALIGNMENT,
                                          &ctx.next_offset)) {
        ctx.next_offset = UINT64_MAX; /* nothing can move */
      }
      const uint64_t start = ctx.next_offset;
      for (uint32_t i = 0; i < plan->num_ops; ++i) {
        if (plan->ops[i].opcode == EMBER_OP_SDPA && sdpa_takes_flash(plan, &plan->ops[i], &shape)) {
          fold_sdpa(&ctx, i, &shape);
        }
      }
      if (ctx.next_offset != start) *in_out_extra = ctx.next_offset - plan->arena_size;
    }
  }
  free(ctx.producer);
  free(ctx.reader_first);
  free(ctx.reader_ops);
  free(ctx.writes);
  free(ctx.mark);
  return status;
}

/* The most bytes SDPA's scores and probabilities may take; a larger SDPA runs fused. */
#define EMBER_CUDA_MAX_SDPA_SCRATCH (1ull << 30)

/* Whether SDPA op `op` runs as GEMM, softmax, GEMM: no mask tensor (is_causal is fine), a
 * float dtype, q, k and v with the same batch dims, every size > 0, and scratch within
 * bounds. *out_p_offset: where the probabilities start in the scratch; *out_bytes: the
 * scratch it needs. */
static bool sdpa_gemm_sizes(const ember_plan* plan, const ember_op_desc* op,
                            uint64_t* out_p_offset, uint64_t* out_bytes) {
  if (op->num_inputs != 3) return false;
  const ember_tensor_desc* q = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* k = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* v = ember_plan_op_input_tensor(plan, op, 2);
  const uint32_t rank = q->rank;
  if (rank < 2 || k->rank != rank || v->rank != rank) return false;
  if (q->dtype != EMBER_DTYPE_FLOAT32 && q->dtype != EMBER_DTYPE_FLOAT16 &&
      q->dtype != EMBER_DTYPE_BFLOAT16) {
    return false;
  }
  uint64_t batches = 1;
  for (uint32_t d = 0; d + 2 < rank; ++d) {
    if (k->dims[d] != q->dims[d] || v->dims[d] != q->dims[d] || q->dims[d] <= 0) return false;
    batches *= (uint64_t)q->dims[d];
  }
  const int64_t l = q->dims[rank - 2], e = q->dims[rank - 1], s = k->dims[rank - 2];
  if (l <= 0 || e <= 0 || s <= 0 || v->dims[rank - 2] != s || v->dims[rank - 1] <= 0) return false;
  const uint64_t entries = batches * (uint64_t)l * (uint64_t)s;
  uint64_t p_offset;
  if (entries > EMBER_CUDA_MAX_SDPA_SCRATCH ||
      !ember_checked_align_u64(entries * 4u, EMBER_CUDA_ALIGNMENT, &p_offset)) {
    return false;
  }
  *out_p_offset = p_offset;
  *out_bytes = p_offset + entries * ember_dtype_size(q->dtype);
  return *out_bytes <= EMBER_CUDA_MAX_SDPA_SCRATCH;
}

static ember_status* prepare_sdpa_scratch(ember_cuda_executor* executor) {
  const ember_plan* plan = executor->plan;
  uint64_t largest = 0, p_offset, bytes;
  sdpa_flash_shape shape;
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    if (plan->ops[i].opcode == EMBER_OP_SDPA && !sdpa_takes_flash(plan, &plan->ops[i], &shape) &&
        sdpa_gemm_sizes(plan, &plan->ops[i], &p_offset, &bytes) && bytes > largest) {
      largest = bytes;
    }
  }
  return allocate(executor, (size_t)largest, "SDPA scores", &executor->sdpa_scratch);
}

/* The address alignment a GEMM operand may assume: bound inputs and outputs are staged
 * unless EMBER_CUDA_GEMM_IO_ALIGNMENT-aligned (and the slot is marked so). */
static uint32_t gemm_operand_alignment(ember_cuda_executor* executor, uint32_t tensor) {
  const ember_tensor_desc* t = &executor->plan->tensors[tensor];
  if (is_io(t)) {
    require_io_alignment(executor, tensor, EMBER_CUDA_GEMM_IO_ALIGNMENT);
    return EMBER_CUDA_GEMM_IO_ALIGNMENT;
  }
  return address_alignment(tensor_address(executor, tensor));
}

/* SDPA on tensor cores: per batch, scores [L, S] = q·kᵀ (cuBLASLt, float32 out), the
 * softmax kernel writes p [L, S] in the dtype, y [L, Ev] = p·v (cuBLASLt). Row-major
 * [R, C] is column-major [C, R], so scoresᵀ = op(kᵀ)·qᵀ with A = k stored [E, S] used
 * transposed, and yᵀ = vᵀ·pᵀ. *out_done is false when cuBLASLt has no algorithm (the
 * fused kernel runs instead). */
static ember_status* build_sdpa_gemm(ember_cuda_executor* executor, uint32_t i,
                                     size_t* max_workspace, bool* out_done) {
  *out_done = false;
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  uint64_t p_offset, bytes;
  if (executor->sdpa_scratch == 0 || !sdpa_gemm_sizes(plan, op, &p_offset, &bytes)) return NULL;
  const ember_tensor_desc* q = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* k = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* v = ember_plan_op_input_tensor(plan, op, 2);
  const uint32_t q_index = ember_plan_op_input(plan, op, 0);
  const uint32_t k_index = ember_plan_op_input(plan, op, 1);
  const uint32_t v_index = ember_plan_op_input(plan, op, 2);
  const uint32_t y_index = ember_plan_op_output(plan, op, 0);
  const uint32_t rank = q->rank;
  int64_t batches = 1;
  for (uint32_t d = 0; d + 2 < rank; ++d) batches *= q->dims[d];
  const int64_t l = q->dims[rank - 2], e = q->dims[rank - 1], s = k->dims[rank - 2];
  const int64_t ev = v->dims[rank - 1];
  const uint64_t scores = executor->sdpa_scratch, probabilities = scores + p_offset;
  const ember_cuda_gemm_plain score_request = {
      .dtype = q->dtype, .d_dtype = EMBER_DTYPE_FLOAT32, .transpose_a = true,
      .m = (uint64_t)s, .n = (uint64_t)l, .k = (uint64_t)e,
      .lda = e, .ldb = e, .ldd = s,
      .batch = (int32_t)batches,
      .strides = {s * e, l * e, l * s},
      .alignments = {gemm_operand_alignment(executor, k_index),
                     gemm_operand_alignment(executor, q_index), EMBER_CUDA_ALIGNMENT},
      .max_workspace = EMBER_CUDA_MAX_WORKSPACE,
      .device = executor->device_ordinal,
  };
  const ember_cuda_gemm_plain value_request = {
      .dtype = q->dtype, .d_dtype = q->dtype,
      .m = (uint64_t)ev, .n = (uint64_t)l, .k = (uint64_t)s,
      .lda = ev, .ldb = s, .ldd = ev,
      .batch = (int32_t)batches,
      .strides = {s * ev, l * s, l * ev},
      .alignments = {gemm_operand_alignment(executor, v_index), address_alignment(probabilities),
                     gemm_operand_alignment(executor, y_index)},
      .max_workspace = EMBER_CUDA_MAX_WORKSPACE,
      .device = executor->device_ordinal,
  };
  if (batches > INT32_MAX) return NULL;
  ember_cuda_gemm* gemms = &executor->gemms[executor->num_gemms];
  ember_status* status = ember_cuda_gemm_prepare_plain(executor->lt, executor->lt_handle,
                                                       &score_request, &gemms[0]);
  if (status == NULL) {
    status = ember_cuda_gemm_prepare_plain(executor->lt, executor->lt_handle, &value_request,
                                           &gemms[1]);
    if (status != NULL) ember_cuda_gemm_release(executor->lt, &gemms[0]);
  }
  if (status != NULL) {
    if (ember_status_code_of(status) != EMBER_UNAVAILABLE) {
      return ember_cuda_annotate(status, "op %" PRIu32 " (SDPA)", i);
    }
    ember_status_free(status);
    return NULL;
  }
  for (uint32_t g = 0; g < 2; ++g) {
    if (gemms[g].workspace_size > *max_workspace) *max_workspace = gemms[g].workspace_size;
  }
  executor->num_gemms += 2;

  ember_cuda_step* score_step = add_step(executor, i);
  score_step->is_gemm = true;
  score_step->gemm = executor->num_gemms - 2;
  add_ref(executor, score_step, k_index, GEMM_A);
  add_ref(executor, score_step, q_index, GEMM_B);
  score_step->fixed[GEMM_D] = scores;

  ember_k_sdpa_softmax_params p = {0};
  p.scores = scores; /* scratch, never patched */
  p.p = probabilities;
  p.rows = batches * l;
  p.l = l;
  p.s = s;
  p.scale = attr_f64_as_float(plan, op, EMBER_ATTR_SDPA_SCALE_F64);
  p.is_causal = ember_plan_op_attr(plan, op, EMBER_ATTR_SDPA_IS_CAUSAL) != 0;
  const uint64_t warps_per_block = EMBER_K_BLOCK / 32u;
  add_kernel_step(executor, i, EMBER_CUDA_KERNEL_SDPA_SOFTMAX + ember_cuda_dtype_index(q->dtype),
                  grid_for_rows(executor, ceil_div_u64((uint64_t)p.rows, warps_per_block)),
                  &p, sizeof p);

  ember_cuda_step* value_step = add_step(executor, i);
  value_step->is_gemm = true;
  value_step->gemm = executor->num_gemms - 1;
  add_ref(executor, value_step, v_index, GEMM_A);
  value_step->fixed[GEMM_B] = probabilities;
  add_ref(executor, value_step, y_index, GEMM_D);
  *out_done = true;
  return NULL;
}

static void build_sdpa_fused(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* q = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* k = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* v = ember_plan_op_input_tensor(plan, op, 2);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  const uint32_t rank = q->rank;
  ember_k_sdpa_params p = {0};
  p.batches = 1;
  p.batch_rank = rank - 2;
  for (uint32_t d = 0; d + 2 < rank; ++d) {
    p.batches *= q->dims[d];
    p.batch_dims[d] = q->dims[d];
  }
  p.l = q->dims[rank - 2];
  p.e = q->dims[rank - 1];
  p.s = k->dims[rank - 2];
  p.ev = v->dims[rank - 1];
  p.scale = attr_f64_as_float(plan, op, EMBER_ATTR_SDPA_SCALE_F64);
  p.is_causal = ember_plan_op_attr(plan, op, EMBER_ATTR_SDPA_IS_CAUSAL) != 0;
  const ember_tensor_desc* mask = op->num_inputs == 4 ? ember_plan_op_input_tensor(plan, op, 3)
                                                      : NULL;
  if (mask != NULL) {
    p.mask_kind = mask->dtype == EMBER_DTYPE_BOOL ? 2 : 1;
    const uint32_t mr = mask->rank;
    const int64_t cols = mr >= 1 ? mask->dims[mr - 1] : 1;
    const int64_t rows = mr >= 2 ? mask->dims[mr - 2] : 1;
    p.mask_col_stride = cols != 1 ? 1 : 0;
    p.mask_row_stride = rows != 1 ? cols : 0;
    int64_t mask_strides[EMBER_MAX_RANK];
    contiguous_strides(mask, mask_strides);
    /* The mask's batch dims align with q's at the right. */
    for (uint32_t d = 0; d + 2 < rank; ++d) {
      const int64_t md = (int64_t)d - ((int64_t)rank - (int64_t)mr);
      p.mask_batch_strides[d] =
          md >= 0 && md + 2 < (int64_t)mr && mask->dims[md] != 1 ? mask_strides[md] : 0;
    }
  }
  const uint64_t rows = (uint64_t)(p.batches * p.l);
  const uint64_t warps_per_block = EMBER_K_BLOCK / 32u;
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_SDPA + ember_cuda_dtype_index(y->dtype),
      grid_for_rows(executor, ceil_div_u64(rows, warps_per_block)), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_sdpa_params, q));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1), offsetof(ember_k_sdpa_params, k));
  add_ref(executor, step, ember_plan_op_input(plan, op, 2), offsetof(ember_k_sdpa_params, v));
  if (mask != NULL) {
    add_ref(executor, step, ember_plan_op_input(plan, op, 3), offsetof(ember_k_sdpa_params, mask));
  }
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_sdpa_params, y));
}

static ember_status* build_sdpa(ember_cuda_executor* executor, uint32_t i, size_t* max_workspace) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  sdpa_flash_shape shape;
  if (sdpa_takes_flash(plan, op, &shape)) {
    /* plan_sdpa_folds chose the views (the operands in place, or through folded layout
     * ops). */
    add_sdpa_flash_step(executor, i, &shape, &executor->sdpa_views[4u * i]);
    return NULL;
  }
  bool done;
  EMBER_RETURN_IF_ERROR(build_sdpa_gemm(executor, i, max_workspace, &done));
  if (!done) build_sdpa_fused(executor, i);
  return NULL;
}

/* CONV2D op i on the direct kernel, into tensor y_index (the op's output, or that of the
 * RELU fused after it). */
static void build_conv2d_direct(ember_cuda_executor* executor, uint32_t i, uint32_t y_index) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = &plan->tensors[y_index];
  ember_k_conv2d_params p = {0};
  p.n = x->dims[0], p.c = x->dims[1], p.h = x->dims[2], p.w_in = x->dims[3];
  p.o = w->dims[0], p.kh = w->dims[2], p.kw = w->dims[3];
  p.oh = y->dims[2], p.ow = y->dims[3];
  p.stride_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_H);
  p.stride_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_W);
  p.pad_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_H);
  p.pad_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_W);
  p.dilation_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_H);
  p.dilation_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_W);
  p.groups = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_GROUPS);
  p.has_bias = op->num_inputs == 3;
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_CONV2D + ember_cuda_dtype_index(y->dtype),
      grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_conv2d_params, x));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1), offsetof(ember_k_conv2d_params, w));
  if (p.has_bias) {
    add_ref(executor, step, ember_plan_op_input(plan, op, 2), offsetof(ember_k_conv2d_params, b));
  }
  add_ref(executor, step, y_index, offsetof(ember_k_conv2d_params, y));
}

/* The most bytes CONV2D's im2col buffer may take; a conv that needs more runs direct. */
#define EMBER_CUDA_MAX_IM2COL ((uint64_t)256u << 20)

/* The elements between two rows of a conv's augmented weights, and the rows of its im2col
 * buffer per image (the GEMM's K): taps (with the bias) rounded up to a multiple of 8, so
 * that every row starts 16-byte aligned and K is too. An odd K or leading dimension (a
 * 3x3x64 conv has 577 taps with the bias) leaves cuBLASLt only its slowest kernels: 3.4x
 * slower on resnet18's layer1 on the H200. */
static uint64_t conv_weight_stride(uint64_t taps) { return (taps + 7u) & ~(uint64_t)7u; }

/* Output positions per image below which a batch of images runs as one GEMM over all of
 * them (then a move into NCHW) rather than one GEMM per image: per-image products that
 * small leave most of the GPU idle (resnet18's layer4 at batch 64: 49 positions, 7x
 * slower per image), while for large images the extra move costs more than it saves
 * (measured on the H200). */
#define EMBER_CUDA_CONV_FLAT_POSITIONS 2048

static bool conv_runs_flat(const ember_tensor_desc* y) {
  return y->dims[0] > 1 && y->dims[2] * y->dims[3] < EMBER_CUDA_CONV_FLAT_POSITIONS;
}

/* A conv that runs one GEMM per image and whose im2col buffer for the whole batch would
 * pass EMBER_CUDA_MAX_IM2COL takes its images a chunk at a time (im2col, then the GEMM,
 * per chunk, on one col buffer), so that a larger batch does not fall back to the direct
 * kernel (resnet18's stem: 3.8 MB of col an image in float16, over the bound past 67
 * images). Smaller chunks did not pay: 16 MiB chunks, meant to keep the col in L2, made
 * resnet18 at batch 64 slower on the H200 (bench, 1229 -> 1282 us). Images per chunk: the most whose col fits
 * EMBER_CUDA_MAX_IM2COL and that divide the batch evenly (so one cuBLASLt GEMM, of that
 * batch count, serves every chunk), at least one; all of them when the conv runs flat. */
static uint64_t conv_chunk_images(const ember_tensor_desc* y, uint64_t image_col_bytes) {
  const uint64_t images = (uint64_t)y->dims[0];
  if (conv_runs_flat(y)) return images;
  uint64_t chunk = EMBER_CUDA_MAX_IM2COL / (image_col_bytes == 0 ? 1u : image_col_bytes);
  if (chunk > images) chunk = images;
  while (chunk > 1 && images % chunk != 0) --chunk;
  return chunk == 0 ? 1u : chunk;
}

/* What every GEMM form of a conv needs: groups 1, constant weight and bias (both are
 * rearranged once, at prepare), an output. */
static bool conv_takes_gemm(const ember_plan* plan, const ember_op_desc* op) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  return ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_GROUPS) == 1 && y->numel > 0 &&
         w->storage == EMBER_STORAGE_CONSTANT && x->dims[0] <= INT32_MAX &&
         (op->num_inputs != 3 ||
          ember_plan_op_input_tensor(plan, op, 2)->storage == EMBER_STORAGE_CONSTANT);
}

/* conv_chunk_images of CONV2D op, for which conv_gemm_sizes holds (no overflow). */
static uint64_t conv_gemm_chunk_images(const ember_plan* plan, const ember_op_desc* op) {
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const uint64_t rows = conv_weight_stride((uint64_t)(w->dims[1] * w->dims[2] * w->dims[3]) + 1u);
  return conv_chunk_images(y, rows * (uint64_t)(y->dims[2] * y->dims[3]) * ember_dtype_size(y->dtype));
}

/* Whether op (a CONV2D) runs as im2col + cuBLASLt GEMM: conv_takes_gemm, and an im2col
 * buffer (one chunk's: conv_chunk_images) of at most EMBER_CUDA_MAX_IM2COL bytes. Sizes
 * in bytes; *out_flat_bytes is the product's buffer when the conv runs as one GEMM over
 * all images (conv_runs_flat), else 0. */
static bool conv_gemm_sizes(const ember_plan* plan, const ember_op_desc* op,
                            uint64_t* out_col_bytes, uint64_t* out_weight_bytes,
                            uint64_t* out_flat_bytes) {
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (!conv_takes_gemm(plan, op)) return false;
  const uint64_t es = ember_dtype_size(y->dtype);
  const uint64_t rows = conv_weight_stride((uint64_t)(w->dims[1] * w->dims[2] * w->dims[3]) + 1u);
  const uint64_t positions = (uint64_t)(y->dims[2] * y->dims[3]);
  uint64_t col, weight;
  if (!ember_checked_mul_u64(rows, positions, &col) || !ember_checked_mul_u64(col, es, &col) ||
      !ember_checked_mul_u64(col, conv_chunk_images(y, col), &col) ||
      col > EMBER_CUDA_MAX_IM2COL ||
      !ember_checked_mul_u64(rows, (uint64_t)w->dims[0], &weight) ||
      !ember_checked_mul_u64(weight, es, &weight) || rows > INT32_MAX) {
    return false;
  }
  *out_col_bytes = col;
  *out_weight_bytes = weight;
  *out_flat_bytes = conv_runs_flat(y) ? y->nbytes : 0;
  return true;
}

/* Output tiles below which a conv keeps im2col + cuBLASLt GEMM rather than the
 * implicit-GEMM kernel: that kernel has no split over K, so a grid of fewer tiles than
 * the GPU has SMs (resnet18 at batch 1) leaves SMs idle, where cuBLASLt splits. Fixed
 * counts, not the device's. The wgmma kernel finishes a tile in about half the time, so
 * half a wave of it (resnet18's layer4 at batch 64: 100 tiles) still beats im2col + GEMM. */
#define EMBER_CUDA_CONV_IGEMM_MIN_TILES 128u
#define EMBER_CUDA_CONV_WGMMA_MIN_TILES 64u

/* The implicit-GEMM kernel's channel tile: 64 rows for convs of at most 64 output
 * channels (resnet's first stage), else 128 (conv_igemm.cu picks the same). */
static int64_t conv_igemm_bm(int64_t channels) { return channels <= 64 ? 64 : 128; }

/* The implicit-GEMM kernel's blocks for output y [N, O, OH, OW]: position tiles times
 * channel tiles (blockIdx.x % channel tiles is a block's channel tile). */
static uint64_t conv_igemm_channel_tiles(const ember_tensor_desc* y) {
  return ceil_div_u64((uint64_t)y->dims[1], (uint64_t)conv_igemm_bm(y->dims[1]));
}
static uint64_t conv_igemm_tiles(const ember_tensor_desc* y) {
  const uint64_t positions = (uint64_t)(y->dims[0] * y->dims[2] * y->dims[3]);
  return ceil_div_u64(positions, EMBER_K_CONV_IGEMM_BN) * conv_igemm_channel_tiles(y);
}

/* The implicit GEMM's view of a CONV2D (conv_igemm_shape_of): the packed input it reads,
 * [n, h, w, cp] (cp a multiple of 8, so that 8 channels of a pixel are one 16-byte copy),
 * and the conv over it. fold 1: x packed channels last (cp: its channels padded), the
 * conv's own taps, strides and padding. fold 2: x packed space-to-depth
 * (ember_space_to_depth_pack: pixel (u, v) holds the 2 x 2 pixels at (2u, 2v) of x
 * padded, 4·c channels padded to cp), and a conv of ceil(kh/2) x ceil(kw/2) taps,
 * stride 1 and no padding over it (conv_folds says which convs). */
typedef struct conv_igemm_shape {
  int64_t n, h, w, cp;
  int64_t kh, kw;
  int64_t stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  int64_t fold;
} conv_igemm_shape;

static int64_t conv_packed_channels(int64_t c) { return (c + 7) & ~(int64_t)7; }

static conv_igemm_shape conv_igemm_shape_of(const ember_plan* plan, const ember_op_desc* op,
                                            bool fold) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  conv_igemm_shape shape = {
      .n = x->dims[0], .h = x->dims[2], .w = x->dims[3], .cp = conv_packed_channels(x->dims[1]),
      .kh = w->dims[2], .kw = w->dims[3],
      .stride_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_H),
      .stride_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_W),
      .pad_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_H),
      .pad_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_W),
      .dil_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_H),
      .dil_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_W),
      .fold = 1};
  if (fold) {
    shape.fold = 2;
    shape.cp = conv_packed_channels(4 * x->dims[1]);
    shape.kh = (w->dims[2] + 1) / 2, shape.kw = (w->dims[3] + 1) / 2;
    shape.h = y->dims[2] + shape.kh - 1, shape.w = y->dims[3] + shape.kw - 1;
    shape.stride_h = shape.stride_w = 1;
    shape.pad_h = shape.pad_w = 0;
  }
  return shape;
}

/* The implicit GEMM's K: the packed channels times the taps; the bias column after it,
 * rows rounded up to a multiple of 8; whole BK tiles to cover it. */
static int64_t conv_igemm_k_taps(const conv_igemm_shape* shape) {
  return shape->kh * shape->kw * shape->cp;
}
static int64_t conv_igemm_k_stride(const conv_igemm_shape* shape) {
  return (int64_t)conv_weight_stride((uint64_t)conv_igemm_k_taps(shape) + 1u);
}
static int64_t conv_igemm_k_tiles(const conv_igemm_shape* shape) {
  return (int64_t)ceil_div_u64((uint64_t)conv_igemm_k_taps(shape), EMBER_K_CONV_IGEMM_BK);
}

/* Whether the implicit-GEMM kernel can run CONV2D op in `shape`: what im2col + GEMM takes
 * (conv_gemm_sizes) in float16 or bfloat16, every element offset in int32, tap offsets
 * that fit the table's 16-bit fields with room for its EMBER_K_CONV_IGEMM_NO_TAP marker,
 * and at least min_tiles output tiles. */
static bool conv_igemm_fits(const ember_plan* plan, const ember_op_desc* op,
                            const conv_igemm_shape* shape, uint64_t min_tiles) {
  if (!conv_takes_gemm(plan, op)) return false; /* no im2col buffer: its bound is not ours */
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (!is_16bit_float(y->dtype)) return false;
  const int64_t limit = INT32_MAX - 2 * EMBER_K_CONV_IGEMM_NO_TAP;
  const int64_t reach_h = (shape->kh - 1) * shape->dil_h, reach_w = (shape->kw - 1) * shape->dil_w;
  const int64_t packed = shape->n * shape->h * shape->w * shape->cp;
  const int64_t rows = conv_igemm_k_stride(shape);
  /* The tap table's element offsets are int32 (fill_conv_igemm_table): the farthest tap,
   * past x's size where the padding exceeds the input, must fit too. */
  if (x->numel > (uint64_t)limit || y->numel > (uint64_t)limit || packed > limit ||
      rows * w->dims[0] > limit || shape->h + shape->pad_h >= EMBER_K_CONV_IGEMM_NO_TAP ||
      shape->w + shape->pad_w >= EMBER_K_CONV_IGEMM_NO_TAP ||
      reach_h >= EMBER_K_CONV_IGEMM_NO_TAP || reach_w >= EMBER_K_CONV_IGEMM_NO_TAP ||
      rows > limit || (reach_h * shape->w + reach_w) * shape->cp > limit) {
    return false;
  }
  return conv_igemm_tiles(y) >= min_tiles;
}

/* Whether CONV2D op runs on the implicit-GEMM kernel with its input packed channels last:
 * conv_igemm_fits, with few padded channels. Padding the channels to a multiple of 8 may
 * add at most a quarter to K: resnet's stem (3 channels padded to 8, K 392 for 147 taps)
 * ran 1.9x slower this way than as im2col + GEMM on the H200 (conv_folds runs it). */
static bool conv_runs_igemm(const ember_plan* plan, const ember_op_desc* op, uint64_t min_tiles) {
  if (!conv_takes_gemm(plan, op)) return false;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  if (conv_packed_channels(x->dims[1]) * 4 > x->dims[1] * 5) return false;
  const conv_igemm_shape shape = conv_igemm_shape_of(plan, op, false);
  return conv_igemm_fits(plan, op, &shape, min_tiles);
}

/* Whether CONV2D op runs on the wgmma kernel with its input packed space-to-depth
 * (conv_igemm_shape fold 2): stride 2 in both dims, no dilation, at most 4 input channels
 * (4·c of them fill one or two 16-byte copies a pixel), and enough tiles for that kernel.
 * resnet's stem (3 channels, 7 x 7): 16 taps of 16 channels, K 256 for its 147, where the
 * plain pack takes 49 taps of 8 (K 392), and im2col + GEMM writes and reads a col of K
 * 152 a position. */
static bool conv_folds(const ember_plan* plan, const ember_op_desc* op) {
  if (!conv_takes_gemm(plan, op)) return false;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  if (x->rank != 4 || x->dims[1] > 4 ||
      ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_H) != 2 ||
      ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_W) != 2 ||
      ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_H) != 1 ||
      ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_W) != 1) {
    return false;
  }
  const conv_igemm_shape shape = conv_igemm_shape_of(plan, op, true);
  return conv_igemm_fits(plan, op, &shape, EMBER_CUDA_CONV_WGMMA_MIN_TILES);
}

/* Whether this executor runs the implicit-GEMM convs on the wgmma kernel (compute
 * capability 9.0, unless EMBER_CUDA_WGMMA=0). */
static bool uses_conv_wgmma(const ember_cuda_executor* executor) {
  return executor->kernels.conv_wgmma && ember_settings_get()->cuda_wgmma;
}

/* Whether CONV2D op runs on the wgmma kernel with its input space-to-depth on this
 * executor's GPU (conv_folds). */
static bool executor_conv_folds(const ember_cuda_executor* executor, const ember_op_desc* op) {
  return executor->kernels.conv_igemm && uses_conv_wgmma(executor) &&
         ember_settings_get()->cuda_conv_fold && conv_folds(executor->plan, op);
}

/* Whether this executor runs convs of too few tiles for the wgmma kernel on it anyway,
 * their K split over blocks (executor_conv_splits_k; unless EMBER_CUDA_CONV_SPLIT_K=0). */
static bool uses_conv_split_k(const ember_cuda_executor* executor) {
  return executor->kernels.conv_igemm && uses_conv_wgmma(executor) &&
         ember_settings_get()->cuda_conv_split_k;
}

/* Whether CONV2D op runs on the wgmma kernel with fewer output tiles than that kernel
 * needs to fill the GPU (EMBER_CUDA_CONV_WGMMA_MIN_TILES: resnet18 at batch 1), its K
 * split over blocks (conv_k_splits) so that they do, rather than as im2col + cuBLASLt
 * GEMM: a conv the kernel could run (conv_runs_igemm's other rules), on an executor that
 * takes this (uses_conv_split_k), that does not fold its input. Such a program needs no
 * cuBLASLt for its convs, whose load and first calls took resnet18 b1's init to 4x its
 * bound. */
static bool executor_conv_splits_k(const ember_cuda_executor* executor, const ember_op_desc* op) {
  return uses_conv_split_k(executor) && !executor_conv_folds(executor, op) &&
         conv_runs_igemm(executor->plan, op, 0) &&
         !conv_runs_igemm(executor->plan, op, EMBER_CUDA_CONV_WGMMA_MIN_TILES);
}

/* Whether CONV2D op runs on an implicit-GEMM kernel on this executor's GPU. */
static bool executor_conv_runs_igemm(const ember_cuda_executor* executor, const ember_op_desc* op) {
  return executor->kernels.conv_igemm &&
         (executor_conv_folds(executor, op) || executor_conv_splits_k(executor, op) ||
          conv_runs_igemm(executor->plan, op,
                          uses_conv_wgmma(executor) ? EMBER_CUDA_CONV_WGMMA_MIN_TILES
                                                    : EMBER_CUDA_CONV_IGEMM_MIN_TILES));
}

/* The fewest K tiles a split takes: a block's sums (128 positions by its channels, float32)
 * are written once and read once, about two K tiles' copies. resnet18 at batch 1 ran
 * 178.3-178.5 us with 2, 185.0-186.8 with 4, 196.6-196.7 with 8 (H100, same call). */
#define EMBER_CUDA_CONV_SPLIT_MIN_K_TILES 2

/* How many splits over K CONV2D op of output y, read in `shape`, takes on the wgmma kernel
 * (executor_conv_splits_k), each of *out_per K tiles (the last of what is left): enough
 * blocks that every SM holds as many as fit (3 of 64 channels, 2 of 128:
 * EMBER_K_CONV_WGMMA_SMEM_BYTES), with at least EMBER_CUDA_CONV_SPLIT_MIN_K_TILES each.
 * 1: no split (resnet18's 1x1 downsampling convs at batch 1, of 1 to 4 K tiles). */
static int64_t conv_k_splits(const ember_cuda_executor* executor, const ember_tensor_desc* y,
                             const conv_igemm_shape* shape, int64_t* out_per) {
  const int64_t k_tiles = conv_igemm_k_tiles(shape);
  const int64_t tiles = (int64_t)conv_igemm_tiles(y);
  const int64_t resident = (conv_igemm_bm(y->dims[1]) == 64 ? 3 : 2) * (int64_t)executor->sm_count;
  int64_t splits = (resident + tiles - 1) / tiles;
  if (splits > k_tiles / EMBER_CUDA_CONV_SPLIT_MIN_K_TILES) {
    splits = k_tiles / EMBER_CUDA_CONV_SPLIT_MIN_K_TILES;
  }
  if (splits < 1) splits = 1;
  *out_per = (k_tiles + splits - 1) / splits;
  return (k_tiles + *out_per - 1) / *out_per;
}

/* The bytes of the splits' sums of CONV2D op of output y on the wgmma kernel with K split
 * (kernel_params.h: [splits][positions][o rounded up to 8] float32); 0 without a split. */
static uint64_t conv_split_bytes(const ember_cuda_executor* executor, const ember_op_desc* op,
                                 const conv_igemm_shape* shape) {
  if (!executor_conv_splits_k(executor, op)) return 0;
  const ember_tensor_desc* y = ember_plan_op_output_tensor(executor->plan, op, 0);
  int64_t per;
  const int64_t splits = conv_k_splits(executor, y, shape, &per);
  if (splits < 2) return 0;
  const uint64_t positions = (uint64_t)(y->dims[0] * y->dims[2] * y->dims[3]);
  return (uint64_t)splits * positions * (uint64_t)EMBER_K_CONV_SPLIT_ROW(y->dims[1]) * 4u;
}

/* The implicit GEMM's view of CONV2D op on this executor (one it runs on that kernel). */
static conv_igemm_shape executor_conv_shape(const ember_cuda_executor* executor,
                                            const ember_op_desc* op) {
  return conv_igemm_shape_of(executor->plan, op, executor_conv_folds(executor, op));
}

/* ---- CONV2D on the halo kernel (conv_halo.cu) ----------------------------------------- */

/* How a CONV2D runs on the halo kernel (kernel_params.h, ember_k_conv_halo_params): wgmma's
 * N (the kernel: width_index into EMBER_K_CONV_HALO_WIDTHS, or into
 * EMBER_K_CONV_HALO_UNITS_WIDTHS where `units`), the strips of `rows` output rows `pitch`
 * positions apart (or of strip_images whole images, image_rows rows apart), the tiles,
 * the rings and the shared memory they take. */
typedef struct conv_halo_plan {
  int64_t n, rows, pitch, strips, strip_images, image_rows;
  int64_t strips_per_block, groups, o_tiles, halo_stages, halo_bytes, halo_box_bytes;
  int64_t w_stages, tiles, shared_bytes;
  int64_t width_index;
  bool units; /* on ember_conv_halo_units<n> */
} conv_halo_plan;

/* The strip of `rows` output rows (at most oh) that n positions `pitch` apart hold, if
 * its halo's rows fit the tensor copy's box (at most 256); 0 if n < ow. */
static int64_t conv_halo_rows(int64_t n, int64_t oh, int64_t ow, int64_t pitch, int64_t kh) {
  if (n < ow) return 0;
  int64_t rows = (n - ow) / pitch + 1;
  if (rows > oh) rows = oh;
  return rows + kh - 1 <= 256 ? rows : 0;
}

/* Sets halo's halo_box_bytes (what one copy delivers: image_rows·pitch rows of
 * conv_halo_row_bytes for each of the strip's images) and halo_bytes (a buffer of n
 * positions' taps: those rows, and the rows the last position's last tap reads, n - 1 +
 * (kh - 1)·pitch + kw - 1 at most, in whole 1024-byte blocks, so that every halo buffer
 * starts on the swizzle's pattern). */
static void conv_halo_size_buffers(conv_halo_plan* halo, const conv_igemm_shape* shape) {
  const int64_t row_bytes = conv_halo_row_bytes(shape->cp);
  const int64_t box_rows = halo->image_rows * halo->pitch * halo->strip_images;
  int64_t rows = halo->n + (shape->kh - 1) * halo->pitch + shape->kw - 1;
  if (rows < box_rows) rows = box_rows;
  halo->halo_box_bytes = box_rows * row_bytes;
  halo->halo_bytes = (rows * row_bytes + 1023) / 1024 * 1024;
}

/* Whether the conv (of `channels` outputs, in `shape`, to oh x ow) runs on the
 * resident-weights form (kernel_params.h, ember_conv_halo_units<n>), and how (*out): one
 * group of 64 output channels over 64 input channels or 16 (resnet's stem, read
 * space-to-depth: 16 taps of 16; a multiple of 4 taps, the kernel's MMA groups), weights
 * of at most EMBER_K_CONV_HALO_UNITS_MAX_W_TILES tiles of K 64, and strips of the width
 * (EMBER_K_CONV_HALO_UNITS_WIDTHS, the larger on a tie) that computes fewest positions,
 * if they keep 80% of them; with 16 channels, at least two strips for each of the GPU's
 * sm_count SMs (one a consumer): resnet18's stem at batch 1 (56 strips) took 11.3-12.8 us
 * on this form on the H200, against 8.9-9.6 on conv_wgmma; at batch 64, 97.5 against
 * 134.5. */
static bool conv_halo_units_plan_of(const conv_igemm_shape* shape, int64_t channels, int64_t oh,
                                    int64_t ow, int64_t sm_count, conv_halo_plan* out) {
  const int64_t pitch = ow + shape->kw - 1, taps = shape->kh * shape->kw;
  const int64_t w_tiles = (taps * shape->cp + 63) / 64;
  const bool narrow = shape->cp == 16; /* halo rows of 32 bytes */
  if (channels > 64 || (shape->cp != 64 && !narrow) || (narrow && taps % 4 != 0) ||
      w_tiles > EMBER_K_CONV_HALO_UNITS_MAX_W_TILES) {
    return false;
  }
  static const int64_t kWidths[] = EMBER_K_CONV_HALO_UNITS_WIDTHS;
  conv_halo_plan u = {0};
  for (int64_t k = 0; k < EMBER_K_CONV_HALO_UNITS_WIDTH_COUNT; ++k) {
    const int64_t rows = conv_halo_rows(kWidths[k], oh, ow, pitch, shape->kh);
    if (rows == 0) continue;
    const int64_t strips = (oh + rows - 1) / rows;
    if (u.n != 0 && u.strips * u.n < strips * kWidths[k]) continue;
    u.n = kWidths[k], u.rows = rows, u.strips = strips, u.width_index = k;
  }
  if (u.n == 0 || oh * ow * 5 < u.strips * u.n * 4) return false;
  u.pitch = pitch, u.strip_images = 1, u.image_rows = u.rows + shape->kh - 1;
  u.strips_per_block = 1, u.groups = 1, u.o_tiles = 1, u.w_stages = w_tiles;
  u.tiles = shape->n * u.strips;
  if (u.tiles > INT32_MAX || (narrow && u.tiles < 2 * sm_count)) return false;
  conv_halo_size_buffers(&u, shape);
  /* A slot also holds its consumer's epilogue tile (and starts on 1024 bytes). */
  const int64_t tile_bytes = (EMBER_K_CONV_HALO_UNITS_TILE_BYTES(u.n) + 1023) / 1024 * 1024;
  if (u.halo_bytes < tile_bytes) u.halo_bytes = tile_bytes;
  /* Three slots where they fit (resnet18's 56-wide convs: 200 KB; its stem: 141 KB), so
   * that a unit's halo is copied while the two before it compute; else two. */
  for (u.halo_stages = 3;; --u.halo_stages) {
    u.shared_bytes = u.halo_stages * u.halo_bytes + w_tiles * 64 * 128 +
                     EMBER_K_CONV_HALO_BARRIER_BYTES + 1024;
    if (u.shared_bytes <= EMBER_K_CONV_HALO_MAX_SMEM_BYTES) break;
    if (u.halo_stages == 2) return false;
  }
  u.units = true;
  *out = u;
  return true;
}

/* The strip of width n that CONV2D y [images, ·, oh, ow] (pitch, image_rows and kh in
 * `out` and the arguments) takes on the streaming halo form, into *out (n, rows, strips,
 * strip_images): whole images stacked where one fits (all of them, or as many as n
 * holds), else `rows` of an image. Returns how many positions it computes in all (0 if no
 * strip fits). */
static int64_t conv_halo_strip_of(int64_t n, int64_t images, int64_t oh, int64_t ow, int64_t kh,
                                  conv_halo_plan* out) {
  const int64_t pitch = out->pitch, image = (oh - 1) * pitch + ow; /* to its last kept */
  out->n = n;
  if (image <= n && out->image_rows <= 256) {
    int64_t stacked = 1 + (n - image) / (out->image_rows * pitch);
    if (stacked > images) stacked = images;
    out->rows = oh, out->strips = 1, out->strip_images = stacked;
    return (images + stacked - 1) / stacked * n;
  }
  out->rows = conv_halo_rows(n, oh, ow, pitch, kh);
  if (out->rows == 0) return 0;
  out->image_rows = out->rows + kh - 1;
  out->strips = (oh + out->rows - 1) / out->rows, out->strip_images = 1;
  return images * out->strips * n;
}

/* Whether CONV2D op (one the implicit-GEMM kernel takes, read in `shape`) fits the halo
 * kernel, and how (*out): stride 1 and no dilation over its packed input, a pitch and a
 * halo that the tensor copy's boxes (at most 256 a dimension) and shared memory hold, and
 * enough of the positions computed kept: the resident-weights form where it takes the
 * conv (conv_halo_units_plan_of: resnet18's 56-wide convs, strips of 4 rows, and its
 * stem, read space-to-depth in 16 channels, strips of 2), else, for packed channels a
 * multiple of 64 (halo rows of 128 bytes), the strip width (EMBER_K_CONV_HALO_WIDTHS, the
 * larger on a tie; conv_halo_strip_of) that computes fewest positions, if it keeps two
 * thirds of them. Its rows are W + pad_w apart, each one's right padding the next one's
 * left, and stacked images H + pad_h rows apart, where that holds a row's positions and an
 * image's rows (padding at most KW - 1 and KH - 1), else OW + KW - 1 and OH + KH - 1:
 * resnet18's 56, 28 and 14-wide convs keep 96.6% (N 232), 94.2% (N 208) and 90.7% (N 216),
 * its 7 x 7 ones 81.7% (two images in N 120); with a row's padding on both sides, two 7 x
 * 7 images took N 144 and kept 68% (41.6-42.9 us each at batch 64 on the H200, against
 * 53.9-55.4 on conv_wgmma). The stem ran slower on that streaming form with 32-byte halo
 * rows than on conv_wgmma: 211 against 151 us at batch 64 on the H200. */
static bool conv_halo_plan_of(const ember_plan* plan, const ember_op_desc* op,
                              const conv_igemm_shape* shape_in, int64_t sm_count,
                              conv_halo_plan* out) {
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const conv_igemm_shape shape = *shape_in;
  if (shape.stride_h != 1 || shape.stride_w != 1 || shape.dil_h != 1 || shape.dil_w != 1) {
    return false;
  }
  const int64_t oh = y->dims[2], ow = y->dims[3], channels = y->dims[1];
  if (ow + shape.kw - 1 > 256) return false; /* the input's width with its padding */
  if (conv_halo_units_plan_of(&shape, channels, oh, ow, sm_count, out)) return true;
  if (shape.cp % 64 != 0) return false;
  conv_halo_plan best = {0};
  best.pitch = ow <= shape.w + shape.pad_w ? shape.w + shape.pad_w : ow + shape.kw - 1;
  const int64_t image_rows = oh <= shape.h + shape.pad_h ? shape.h + shape.pad_h : oh + shape.kh - 1;
  int64_t best_computed = 0;
  static const int64_t kWidths[] = EMBER_K_CONV_HALO_WIDTHS;
  for (int64_t k = EMBER_K_CONV_HALO_WIDTH_COUNT - 1; k >= 0; --k) {
    conv_halo_plan strip = best;
    strip.image_rows = image_rows;
    const int64_t computed = conv_halo_strip_of(kWidths[k], shape.n, oh, ow, shape.kh, &strip);
    if (computed == 0 || (best.n != 0 && best_computed <= computed)) continue;
    best = strip, best_computed = computed, best.width_index = k;
  }
  if (best.n == 0 || shape.n * oh * ow * 3 < best_computed * 2) return false;
  best.strips_per_block = channels <= 64 ? 2 : 1;
  best.groups = 2 / best.strips_per_block;
  best.o_tiles = (channels + 64 * best.groups - 1) / (64 * best.groups);
  conv_halo_size_buffers(&best, &shape);
  /* The halo ring, the epilogue's two tiles (n positions of 64 + 8 channels) and as many
   * weight stages as fit, up to 8 (with 4 and a block a tile, resnet18's 56-wide convs
   * took 63 us on the H200; with up to 8 and blocks looping over tiles, 57). Two halo
   * stages, so that the next chunk's or tile's halo lands under this one's MMAs, unless
   * that leaves fewer than 4 weight stages. */
  const int64_t w_bytes = best.groups * 64 * 128;
  for (best.halo_stages = 2;; --best.halo_stages) {
    const int64_t fixed = best.halo_stages * best.strips_per_block * best.halo_bytes +
                          2 * best.n * EMBER_K_CONV_HALO_OUT_STRIDE * 2 +
                          EMBER_K_CONV_HALO_BARRIER_BYTES + 1024;
    best.w_stages = fixed < EMBER_K_CONV_HALO_MAX_SMEM_BYTES
                        ? (EMBER_K_CONV_HALO_MAX_SMEM_BYTES - fixed) / w_bytes : 0;
    if (best.w_stages > EMBER_K_CONV_HALO_MAX_W_STAGES) best.w_stages = EMBER_K_CONV_HALO_MAX_W_STAGES;
    best.shared_bytes = fixed + best.w_stages * w_bytes;
    if (best.w_stages >= 4 || best.halo_stages == 1) break;
  }
  /* One halo stage only for one chunk a tile: the consumers give a chunk's halo back
   * during the next chunk's first MMAs (conv_halo.cu), which with one stage would wait for
   * that very halo, and the kernel would never finish (a 3x3 conv of 128 channels 200
   * wide, a 7x7 one of 128 at 56 wide). */
  if (best.w_stages < 2 || (best.halo_stages == 1 && shape.cp > 64)) return false;
  const int64_t strips = best_computed / best.n;
  const int64_t strip_tiles = (strips + best.strips_per_block - 1) / best.strips_per_block;
  best.tiles = strip_tiles * best.o_tiles;
  if (best.tiles > INT32_MAX) return false;
  *out = best;
  return true;
}

/* Whether this executor takes the halo kernel (compute capability 9.0, unless
 * EMBER_CUDA_WGMMA=0 or EMBER_CUDA_CONV_HALO=0). */
static bool uses_conv_halo(const ember_cuda_executor* executor) {
  return executor->kernels.conv_halo && uses_conv_wgmma(executor) &&
         ember_settings_get()->cuda_conv_halo;
}

/* Whether CONV2D op (read in `shape`: executor_conv_shape) runs on the halo kernel on this
 * executor's GPU (and how: *out): one it runs on the wgmma implicit GEMM that
 * conv_halo_plan_of takes. */
static bool executor_conv_runs_halo(const ember_cuda_executor* executor, const ember_op_desc* op,
                                    const conv_igemm_shape* shape, conv_halo_plan* out) {
  return uses_conv_halo(executor) && executor_conv_runs_igemm(executor, op) &&
         !executor_conv_splits_k(executor, op) &&
         conv_halo_plan_of(executor->plan, op, shape, (int64_t)executor->sm_count, out);
}

/* The col of CONV2D op (2-byte elements) on im2col from channels last + GEMM,
 * [N·OH·OW][k_stride]: its bytes, when they are at most EMBER_CUDA_MAX_IM2COL and its
 * 16-byte vectors fit int32 (the kernel's index). */
static bool conv_nhwc_col_bytes(const ember_plan* plan, const ember_op_desc* op, uint64_t* out) {
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const conv_igemm_shape shape = conv_igemm_shape_of(plan, op, false);
  const uint64_t positions = (uint64_t)(y->dims[0] * y->dims[2] * y->dims[3]);
  uint64_t elements;
  if (!ember_checked_mul_u64(positions, (uint64_t)conv_igemm_k_stride(&shape), &elements) ||
      elements / 8u > INT32_MAX || elements * 2u > EMBER_CUDA_MAX_IM2COL) {
    return false;
  }
  *out = elements * 2u;
  return true;
}

/* Whether CONV2D op may run as im2col from channels last + cuBLASLt with the output
 * channels as M, writing its output channels last (build_conv2d_gemm_nhwc): a conv the
 * implicit-GEMM kernel could run (so it has that kernel's weights, and the kernel is its
 * fallback where cuBLASLt has no algorithm) but with too few output tiles to fill the GPU,
 * on an executor with cuBLASLt, whose col fits. Whether it does is plan_channels_last's
 * call: only with its output channels last. */
static bool executor_conv_may_run_gemm_nhwc(const ember_cuda_executor* executor,
                                            const ember_op_desc* op) {
  uint64_t col;
  return ember_settings_get()->cuda_conv_nhwc_gemm && executor->lt_handle != NULL &&
         executor->kernels.conv_igemm &&
         !executor_conv_runs_igemm(executor, op) && conv_runs_igemm(executor->plan, op, 0) &&
         conv_nhwc_col_bytes(executor->plan, op, &col);
}

/* Entries of a conv's tap table: one per 8 of K, whole BK tiles. */
static uint64_t conv_igemm_table_entries(const conv_igemm_shape* shape) {
  return (uint64_t)conv_igemm_k_tiles(shape) * (EMBER_K_CONV_IGEMM_BK / 8u);
}

/* Fills a conv's tap table (kernel_params.h, ember_k_conv_igemm_params) for its shape:
 * per 8 of K = (kh, kw, c), the element offset of those channels from a window's first
 * pixel in the packed input and the tap's row and column offsets; past the last, the
 * marker that reads zeros. */
static void fill_conv_igemm_table(const conv_igemm_shape* shape, int32_t* out) {
  const int64_t dil_h = shape->dil_h, dil_w = shape->dil_w;
  const int64_t cp = shape->cp, kw = shape->kw, wd = shape->w;
  const int64_t k_taps = conv_igemm_k_taps(shape);
  const uint64_t entries = conv_igemm_table_entries(shape);
  for (uint64_t q = 0; q < entries; ++q) {
    const int64_t k = (int64_t)q * 8;
    if (k >= k_taps) {
      out[2 * q] = 0;
      out[2 * q + 1] = (int32_t)((uint32_t)EMBER_K_CONV_IGEMM_NO_TAP << 16);
      continue;
    }
    const int64_t tap = k / cp, c0 = k % cp;
    const int64_t dh = (tap / kw) * dil_h, dw = (tap % kw) * dil_w;
    out[2 * q] = (int32_t)((dh * wd + dw) * cp + c0);
    out[2 * q + 1] = (int32_t)(((uint32_t)dh << 16) | ((uint32_t)dw & 0xffffu));
  }
}

/* Writes conv op's weights for the implicit GEMM in `shape` into `out`: [o][kh][kw][cp]
 * over the shape's taps and packed channels (zeros where no weight falls), the bias (or
 * 0) at column k_taps, zeros to k_stride. On the GPU (ember_conv_igemm_weights_3), from
 * its weights and bias among the uploaded constants: the host-side reorder of resnet18's
 * weights took 66-82 ms of init on the H200, a scatter of 2-byte copies. */
static ember_status* launch_conv_igemm_weights(ember_cuda_executor* executor, const ember_op_desc* op,
                                               const conv_igemm_shape* shape, uint64_t out) {
  const ember_plan* plan = executor->plan;
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  ember_k_conv_igemm_weights_params p = {0};
  p.w = tensor_address(executor, ember_plan_op_input(plan, op, 1));
  p.bias = op->num_inputs == 3 ? tensor_address(executor, ember_plan_op_input(plan, op, 2)) : 0;
  p.out = out;
  p.c = (int32_t)w->dims[1];
  p.kh = (int32_t)w->dims[2], p.kw = (int32_t)w->dims[3], p.fold = (int32_t)shape->fold;
  p.cp = (int32_t)shape->cp;
  p.k_stride = (int32_t)conv_igemm_k_stride(shape); /* rows · o within int32: conv_igemm_fits */
  p.elements = (int64_t)p.k_stride * w->dims[0];
  void* args[] = {&p};
  CU_CHECK(executor,
           executor->driver->cuLaunchKernel(
               executor->kernels.functions[EMBER_CUDA_KERNEL_CONV_IGEMM_WEIGHTS_3],
               grid_for_elements(executor, (uint64_t)p.elements), 1, 1, EMBER_K_BLOCK, 1, 1, 0,
               executor->stream, args, NULL),
           "cuLaunchKernel(conv weights)");
  return NULL;
}

/* Allocates the im2col buffer (and the product buffer of convs that run flat) and uploads
 * the augmented weights ([O, C·KH·KW + 1]: each row, then its bias or 0, rows
 * conv_weight_stride apart) of every CONV2D that runs as a GEMM; for those on the
 * implicit GEMM (or on im2col from channels last), its tap table, and its weights written
 * on the GPU (launch_conv_igemm_weights). */
static ember_status* prepare_conv_gemms(ember_cuda_executor* executor) {
  const ember_plan* plan = executor->plan;
  const size_t count = plan->num_ops == 0 ? 1 : plan->num_ops;
  executor->conv_weight_offset = malloc(count * sizeof(uint64_t));
  executor->conv_table_offset = malloc(count * sizeof(uint64_t));
  if (executor->conv_weight_offset == NULL || executor->conv_table_offset == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  uint64_t max_col = 0, max_flat = 0, max_packed = 0, max_partial = 0, total = 0;
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    executor->conv_weight_offset[i] = UINT64_MAX;
    executor->conv_table_offset[i] = UINT64_MAX;
    uint64_t col = 0, weight = 0, flat = 0, aligned, table = 0;
    if (plan->ops[i].opcode != EMBER_OP_CONV2D) continue;
    /* A conv on im2col from channels last + GEMM has the implicit GEMM's weights and
     * table (that kernel is its fallback) and a col buffer. */
    const bool nhwc = executor->conv_gemm_nhwc[i];
    const bool igemm = nhwc || executor_conv_runs_igemm(executor, &plan->ops[i]);
    if (!igemm && !conv_gemm_sizes(plan, &plan->ops[i], &col, &weight, &flat)) continue;
    if (nhwc) (void)conv_nhwc_col_bytes(plan, &plan->ops[i], &col); /* true: may_run checked it */
    /* The implicit GEMM needs no col or product buffer: its own weight layout, its tap
     * table (an int2 per 8 of K) after them, and room for the packed input unless that
     * input is already channels last (plan_channels_last). */
    if (igemm) {
      const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, &plan->ops[i], 0);
      const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, &plan->ops[i], 1);
      const conv_igemm_shape shape = executor_conv_shape(executor, &plan->ops[i]);
      weight = (uint64_t)(conv_igemm_k_stride(&shape) * w->dims[0]) * ember_dtype_size(w->dtype);
      table = conv_igemm_table_entries(&shape) * 8u;
      const uint64_t packed =
          (uint64_t)(shape.n * shape.h * shape.w * shape.cp) * ember_dtype_size(x->dtype);
      if (!executor->channels_last[ember_plan_op_input(plan, &plan->ops[i], 0)] &&
          packed > max_packed) {
        max_packed = packed;
      }
      const uint64_t partial = conv_split_bytes(executor, &plan->ops[i], &shape);
      if (partial > max_partial) max_partial = partial;
    }
    uint64_t region;
    if (!ember_checked_align_u64(weight, EMBER_CUDA_ALIGNMENT, &aligned) ||
        !ember_checked_add_u64(aligned, table, &region) ||
        !ember_checked_align_u64(region, EMBER_CUDA_ALIGNMENT, &region) ||
        !ember_checked_add_u64(total, region, &region)) {
      continue;
    }
    executor->conv_weight_offset[i] = total;
    if (igemm) executor->conv_table_offset[i] = total + aligned;
    total = region;
    if (igemm && !nhwc) continue;
    if (col > max_col) max_col = col;
    if (flat > max_flat) max_flat = flat;
  }
  if (total == 0) return NULL;
  size_t col_size, weights_size, flat_size, packed_size, partial_size;
  if (!ember_u64_to_size(max_col, &col_size) || !ember_u64_to_size(total, &weights_size) ||
      !ember_u64_to_size(max_flat, &flat_size) || !ember_u64_to_size(max_packed, &packed_size) ||
      !ember_u64_to_size(max_partial, &partial_size)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: conv buffers overflow");
  }
  EMBER_RETURN_IF_ERROR(allocate(executor, col_size, "im2col", &executor->conv_col));
  EMBER_RETURN_IF_ERROR(allocate(executor, partial_size, "conv split sums", &executor->conv_partial));
  EMBER_RETURN_IF_ERROR(allocate(executor, packed_size, "conv packed input", &executor->conv_packed));
  EMBER_RETURN_IF_ERROR(allocate(executor, weights_size, "conv weights", &executor->conv_weights));
  if (flat_size > 0) {
    EMBER_RETURN_IF_ERROR(allocate(executor, flat_size, "conv product", &executor->conv_out));
  }
  /* Only the tap tables and the im2col convs' rows cross from the host; the implicit
   * GEMM's weights are written on the GPU, after the copies on the same stream. */
  uint8_t* host = calloc(1, weights_size);
  if (host == NULL) return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  ember_status* status = NULL;
  CUresult result = CUDA_SUCCESS;
  for (uint32_t i = 0; i < plan->num_ops && status == NULL && result == CUDA_SUCCESS; ++i) {
    if (executor->conv_weight_offset[i] == UINT64_MAX) continue;
    const ember_op_desc* op = &plan->ops[i];
    if (executor->conv_table_offset[i] != UINT64_MAX) {
      const uint64_t table = executor->conv_table_offset[i];
      const conv_igemm_shape shape = executor_conv_shape(executor, op);
      fill_conv_igemm_table(&shape, (int32_t*)(void*)(host + table));
      result = executor->driver->cuMemcpyHtoDAsync(executor->conv_weights + table, host + table,
                                                   (size_t)conv_igemm_table_entries(&shape) * 8u,
                                                   executor->stream);
      if (result == CUDA_SUCCESS) {
        status = launch_conv_igemm_weights(executor, op, &shape,
                                           executor->conv_weights + executor->conv_weight_offset[i]);
      }
      continue;
    }
    const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
    const size_t es = ember_dtype_size(w->dtype);
    const size_t taps = (size_t)(w->dims[1] * w->dims[2] * w->dims[3]);
    const size_t row = taps * es, padded_row = (size_t)conv_weight_stride(taps + 1u) * es;
    const uint8_t* weights = plan->constants + w->data_offset;
    const uint8_t* bias = op->num_inputs == 3
                              ? plan->constants + ember_plan_op_input_tensor(plan, op, 2)->data_offset
                              : NULL;
    uint8_t* const first = host + executor->conv_weight_offset[i];
    uint8_t* out = first;
    for (int64_t o = 0; o < w->dims[0]; ++o) {
      memcpy(out, weights + (size_t)o * row, row);
      if (bias != NULL) memcpy(out + row, bias + (size_t)o * es, es); /* else 0.0 */
      out += padded_row; /* the padding past the bias stays 0, as do col's rows there */
    }
    result = executor->driver->cuMemcpyHtoDAsync(executor->conv_weights + executor->conv_weight_offset[i],
                                                 first, (size_t)(out - first), executor->stream);
  }
  /* Even after an error: the copies read `host` until the stream has run them. */
  const CUresult synced = executor->driver->cuStreamSynchronize(executor->stream);
  free(host);
  if (status != NULL) return status;
  CU_CHECK(executor, result, "cuMemcpyHtoDAsync(conv weights)");
  CU_CHECK(executor, synced, "cuStreamSynchronize(conv weights)");
  return NULL;
}


/* n / d == (umulhi(n, mul) + n) >> shift for every n < 2^31 and 1 <= d <= 2^31 (the
 * rounded-up reciprocal of Granlund and Montgomery, as PyTorch's IntDivider): with
 * mul' = 2^32 + mul = floor(2^(32 + shift) / d) + 1 the error of n·mul' / 2^(32 + shift)
 * over n / d is below n / 2^(32 + shift) < 1 / d, since d <= 2^shift. */
static void fast_divisor(uint64_t d, uint32_t* mul, uint32_t* shift) {
  uint32_t s = 0;
  while (((uint64_t)1 << s) < d) ++s;
  *shift = s;
  *mul = (uint32_t)(((((uint64_t)1 << s) - d) << 32) / d + 1u);
}

/* Sets the im2col kernel's 32-bit path (kernel_params.h) when every index and coordinate
 * it computes fits in int32, with room for a vector's overshoot: the col and x element
 * counts, and how far the windows reach (the output rows and columns past the last,
 * times the stride, plus padding and the dilated kernel). */
static void set_im2col_index32(ember_k_im2col_params* p) {
  const uint64_t limit = (uint64_t)INT32_MAX - 64u;
  const uint64_t rows = (uint64_t)p->rows;
  const uint64_t positions = (uint64_t)(p->oh * p->ow);
  uint64_t total, reach_h, reach_w, a, b;
  const bool fits =
      ember_checked_mul_u64(rows, (uint64_t)p->n, &total) &&
      ember_checked_mul_u64(total, positions, &total) && total <= limit &&
      (uint64_t)(p->n * p->c * p->h * p->w) <= limit &&
      ember_checked_mul_u64((uint64_t)p->oh + 1u, (uint64_t)p->stride_h, &a) &&
      ember_checked_mul_u64((uint64_t)p->kh, (uint64_t)p->dilation_h, &b) &&
      ember_checked_add_u64(a, b, &reach_h) &&
      ember_checked_add_u64(reach_h, (uint64_t)p->pad_h, &reach_h) && reach_h <= limit &&
      ember_checked_mul_u64((uint64_t)p->ow + 1u, (uint64_t)p->stride_w, &a) &&
      ember_checked_mul_u64((uint64_t)p->kw, (uint64_t)p->dilation_w, &b) &&
      ember_checked_add_u64(a, b, &reach_w) &&
      ember_checked_add_u64(reach_w, (uint64_t)p->pad_w, &reach_w) && reach_w <= limit;
  if (!fits) return; /* int64 math */
  p->index32 = 1;
  const uint64_t divisors[EMBER_K_IM2COL_DIVISORS] = {
      [EMBER_K_IM2COL_DIV_POSITIONS] = positions,
      [EMBER_K_IM2COL_DIV_OUTER] = p->image_major ? rows : (uint64_t)p->n,
      [EMBER_K_IM2COL_DIV_OW] = (uint64_t)p->ow, [EMBER_K_IM2COL_DIV_KW] = (uint64_t)p->kw,
      [EMBER_K_IM2COL_DIV_KH] = (uint64_t)p->kh};
  for (int k = 0; k < EMBER_K_IM2COL_DIVISORS; ++k) {
    fast_divisor(divisors[k], &p->div_mul[k], &p->div_shift[k]);
  }
}

/* Prepares conv op i's cuBLASLt GEMM into the executor's next slot: *out_gemm is it, or
 * NULL when cuBLASLt has no algorithm (the caller runs the conv another way). */
static ember_status* add_conv_gemm(ember_cuda_executor* executor, uint32_t i,
                                   const ember_cuda_gemm_plain* request, size_t* max_workspace,
                                   ember_cuda_gemm** out_gemm) {
  *out_gemm = NULL;
  ember_cuda_gemm* gemm = &executor->gemms[executor->num_gemms];
  ember_status* status = ember_cuda_gemm_prepare_plain(executor->lt, executor->lt_handle,
                                                       request, gemm);
  if (status != NULL) {
    if (ember_status_code_of(status) != EMBER_UNAVAILABLE) {
      return ember_cuda_annotate(status, "op %" PRIu32 " (CONV2D)", i);
    }
    ember_status_free(status);
    return NULL;
  }
  ++executor->num_gemms;
  if (gemm->workspace_size > *max_workspace) *max_workspace = gemm->workspace_size;
  *out_gemm = gemm;
  return NULL;
}

/* CONV2D as im2col (a kernel) + cuBLASLt GEMM, in one of two shapes:
 * - per image (a strided batch): y [O, OH·OW] row-major is column-major
 *   D [OH·OW, O] = A·B with A = col [OH·OW, rows] (the image's im2col rows, column-major)
 *   and B = augmented weights [rows, O]; im2col and the GEMM take the images a chunk at
 *   a time (conv_chunk_images), every chunk's pair on the same col buffer;
 * - flat (conv_runs_flat): one GEMM with A = col [N·OH·OW, rows] over every image's
 *   positions into conv_out ([O, N, OH·OW]), then a gather into NCHW.
 * The ones row of col meets the bias column of the weights. *out_done is false when
 * cuBLASLt has no algorithm (the direct kernel runs instead). */
static ember_status* build_conv2d_gemm(ember_cuda_executor* executor, uint32_t i,
                                       uint32_t y_index, bool relu, uint32_t residual,
                                       size_t* max_workspace, bool* out_done,
                                       bool* out_relu_done) {
  *out_done = false;
  *out_relu_done = false;
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = &plan->tensors[y_index];
  const int64_t rows = (int64_t)conv_weight_stride((uint64_t)(w->dims[1] * w->dims[2] * w->dims[3]) + 1u);
  const int64_t positions = y->dims[2] * y->dims[3], images = x->dims[0], channels = w->dims[0];
  const bool flat = conv_runs_flat(y);
  const uint64_t es = ember_dtype_size(y->dtype);
  const int64_t chunk = (int64_t)conv_gemm_chunk_images(plan, op);
  /* Between chunks: the bytes of x, and of y (and its residual), that a chunk covers. */
  const uint64_t x_chunk_bytes = (uint64_t)(chunk * x->dims[1] * x->dims[2] * x->dims[3]) * es;
  const uint64_t y_chunk_bytes = (uint64_t)(chunk * channels * positions) * es;
  const uint64_t weights = executor->conv_weights + executor->conv_weight_offset[i];
  const uint64_t d_address = flat ? executor->conv_out : tensor_address(executor, y_index);
  uint32_t d_alignment = !flat && is_io(y) ? EMBER_CUDA_GEMM_IO_ALIGNMENT : address_alignment(d_address);
  if (address_alignment(y_chunk_bytes) < d_alignment) d_alignment = address_alignment(y_chunk_bytes);
  ember_cuda_gemm_plain request = {
      .dtype = y->dtype,
      .d_dtype = y->dtype,
      .relu = relu,
      .m = (uint64_t)(flat ? images * positions : positions),
      .n = (uint64_t)channels,
      .k = (uint64_t)rows,
      .lda = flat ? images * positions : positions,
      .ldb = rows,
      .ldd = flat ? images * positions : positions,
      .batch = flat ? 1 : (int32_t)chunk,
      .strides = {flat ? 0 : rows * positions, 0, flat ? 0 : channels * positions},
      .alignments = {address_alignment(executor->conv_col), address_alignment(weights),
                     d_alignment},
      .max_workspace = EMBER_CUDA_MAX_WORKSPACE,
      .device = executor->device_ordinal,
  };
  if (residual != EMBER_PLAN_NO_INDEX) {
    /* C (the residual) is declared with D's layout and alignment. */
    const uint32_t r_alignment = is_io(&plan->tensors[residual])
                                     ? EMBER_CUDA_GEMM_IO_ALIGNMENT
                                     : address_alignment(tensor_address(executor, residual));
    if (r_alignment < request.alignments[2]) request.alignments[2] = r_alignment;
  }
  ember_cuda_gemm* gemm = NULL;
  EMBER_RETURN_IF_ERROR(add_conv_gemm(executor, i, &request, max_workspace, &gemm));
  if (gemm == NULL) return NULL;
  *out_relu_done = gemm->activation_fused == EMBER_CUDA_GEMM_ACT_RELU;

  ember_k_im2col_params p = {0};
  p.col = executor->conv_col; /* not a tensor: never patched */
  p.n = flat ? images : chunk, p.c = x->dims[1], p.h = x->dims[2], p.w = x->dims[3];
  p.kh = w->dims[2], p.kw = w->dims[3], p.oh = y->dims[2], p.ow = y->dims[3];
  p.stride_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_H);
  p.stride_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_W);
  p.pad_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_H);
  p.pad_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_W);
  p.dilation_h = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_H);
  p.dilation_w = ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_W);
  p.rows = rows;
  p.image_major = !flat;
  set_im2col_index32(&p);
  const uint64_t col_bytes = (uint64_t)(p.n * rows * positions) * es;
  const int64_t chunks = flat ? 1 : images / chunk;
  ember_cuda_step* step = NULL;
  for (int64_t c = 0; c < chunks; ++c) {
    ember_cuda_step* im2col = add_kernel_step(
        executor, i, EMBER_CUDA_KERNEL_IM2COL + ember_cuda_dtype_index(y->dtype),
        grid_for_vectors(executor, col_bytes), &p, sizeof p);
    add_ref_at(executor, im2col, ember_plan_op_input(plan, op, 0),
               offsetof(ember_k_im2col_params, x), (uint64_t)c * x_chunk_bytes);
    step = add_step(executor, i);
    step->is_gemm = true;
    step->gemm = executor->num_gemms - 1;
    step->fixed[GEMM_A] = executor->conv_col;
    step->fixed[GEMM_B] = weights;
    if (flat) break;
    add_ref_at(executor, step, y_index, GEMM_D, (uint64_t)c * y_chunk_bytes);
    if (residual != EMBER_PLAN_NO_INDEX) {
      add_ref_at(executor, step, residual, GEMM_C, (uint64_t)c * y_chunk_bytes);
    }
  }
  if (flat) {
    step->fixed[GEMM_D] = executor->conv_out;
    /* y [N, O, P] from conv_out [O, N, P]. */
    const int64_t dims[3] = {images, channels, positions};
    const int64_t strides[3] = {positions, images * positions, 1};
    ember_k_gather_params g = {0};
    g.x = executor->conv_out; /* not a tensor: never patched */
    fill_gather_params(&g, 3, dims, strides, 0, ember_dtype_size(y->dtype), y->numel);
    ember_cuda_step* move = add_kernel_step(
        executor, i, EMBER_CUDA_KERNEL_GATHER + ember_cuda_size_index(ember_dtype_size(y->dtype)),
        grid_for_elements(executor, gather_launch_count(&g)), &g, sizeof g);
    add_ref(executor, move, y_index, offsetof(ember_k_gather_params, y));
  } else {
    require_io_alignment(executor, y_index, EMBER_CUDA_GEMM_IO_ALIGNMENT);
    if (residual != EMBER_PLAN_NO_INDEX) {
      require_io_alignment(executor, residual, EMBER_CUDA_GEMM_IO_ALIGNMENT);
      ++executor->conv_residuals;
    }
  }
  *out_done = true;
  return NULL;
}

/* A ReLU of tensor t in place: a CONV2D's fused RELU where its GEMM's epilogue could not
 * take it. */
static void add_relu_in_place(ember_cuda_executor* executor, uint32_t op_index, uint32_t t) {
  const ember_tensor_desc* y = &executor->plan->tensors[t];
  ember_k_unary_params p = {0};
  p.count = y->numel;
  p.op = EMBER_K_UNARY_RELU;
  ember_cuda_step* step = add_kernel_step(
      executor, op_index, EMBER_CUDA_KERNEL_UNARY + ember_cuda_dtype_index(y->dtype),
      grid_for_vectors(executor, y->nbytes), &p, sizeof p);
  add_ref(executor, step, t, offsetof(ember_k_unary_params, x));
  add_ref(executor, step, t, offsetof(ember_k_unary_params, y));
}

/* Whether a kernel step is the pack before an implicit-GEMM conv (add_conv_input_pack). */
static bool is_conv_input_pack(const ember_cuda_executor* executor, const ember_cuda_step* step) {
  return step->function == executor->kernels.functions[EMBER_CUDA_KERNEL_SPACE_TO_DEPTH_PACK] ||
         step->function == executor->kernels.functions[EMBER_CUDA_KERNEL_NHWC_PACK_2];
}

/* Unless conv op i's input is channels last already, a step that packs it into
 * conv_packed as `shape` says: channels last, channels padded to a multiple of 8, or
 * space-to-depth (fold 2, whose input is never channels last: plan_channels_last);
 * whether it was channels last. */
static bool add_conv_input_pack(ember_cuda_executor* executor, uint32_t i,
                                const conv_igemm_shape* shape) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const uint32_t x_index = ember_plan_op_input(plan, op, 0);
  const ember_tensor_desc* x = &plan->tensors[x_index];
  if (shape->fold == 2) {
    ember_k_space_to_depth_params fold = {0};
    fold.y = executor->conv_packed; /* not a tensor: never patched */
    fold.c = (int32_t)x->dims[1], fold.h = (int32_t)x->dims[2], fold.w = (int32_t)x->dims[3];
    fold.hs = (int32_t)shape->h, fold.ws = (int32_t)shape->w, fold.cp = (int32_t)shape->cp;
    fold.pad_h = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_H);
    fold.pad_w = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_W);
    /* Within int32: conv_igemm_fits bounds the packed elements, of which these are an 8th. */
    fold.chunks = (int32_t)(shape->n * shape->h * shape->w * shape->cp / 8);
    /* An image's channels go up to 4 rows of the output a block at a time, through 2 rows
     * of x per channel and output row in shared memory (conv_igemm.cu
     * space_to_depth_rows). */
    const int64_t line_bytes = 4 * x->dims[1] * x->dims[3]; /* a row of y's, in x */
    if (line_bytes > 0 && ((fold.c == 3 && fold.cp == 16) || (fold.c == 1 && fold.cp == 8))) {
      const int64_t fit = EMBER_K_SPACE_TO_DEPTH_ROWS_BYTES / line_bytes; /* 0: none fits */
      fold.shared_rows = (int32_t)(fit < 4 ? fit : 4);
    }
    ember_cuda_step* folding = add_kernel_step(
        executor, i, EMBER_CUDA_KERNEL_SPACE_TO_DEPTH_PACK,
        fold.shared_rows != 0
            ? grid_for_rows(executor, (uint64_t)shape->n *
                                          ceil_div_u64((uint64_t)shape->h, (uint64_t)fold.shared_rows))
            : grid_for_elements(executor, (uint64_t)fold.chunks),
        &fold, sizeof fold);
    if (fold.shared_rows != 0) {
      folding->shared_bytes = (unsigned int)(fold.shared_rows * line_bytes);
      ++executor->conv_fold_rows;
    }
    add_ref(executor, folding, x_index, offsetof(ember_k_space_to_depth_params, x));
    ++executor->conv_packs;
    return false;
  }
  if (executor->channels_last[x_index]) return true;
  ember_k_nhwc_pack_params pack = {0};
  pack.y = executor->conv_packed; /* not a tensor: never patched */
  pack.n = x->dims[0], pack.c = x->dims[1], pack.hw = x->dims[2] * x->dims[3];
  pack.cp = conv_packed_channels(x->dims[1]);
  ember_cuda_step* packing = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_NHWC_PACK_2,
      grid_for_rows(executor, (uint64_t)pack.n * ceil_div_u64((uint64_t)pack.hw, 64u) *
                                  ceil_div_u64((uint64_t)pack.cp, 64u)),
      &pack, sizeof pack);
  add_ref(executor, packing, x_index, offsetof(ember_k_nhwc_pack_params, x));
  ++executor->conv_packs;
  return false;
}

/* What a pooled halo conv's block adds to its shared memory: two buffers of a strip's last
 * row's window maxima ([ow/2][o]) for each consumer (conv_halo.cu q_buffers). */
static int64_t conv_pool_shared_bytes(const ember_tensor_desc* y) {
  return 4 * (y->dims[3] / 2) * y->dims[1] * (int64_t)ember_dtype_size(y->dtype);
}

/* The MAX_POOL2D that conv op i's epilogue takes (kernel_params.h,
 * ember_k_conv_halo_params pooled), or EMBER_PLAN_NO_INDEX: the conv runs on the halo
 * kernel's resident-weights form (`halo`) in strips of an even number of rows that divide
 * its oh, reads its input from conv_packed (so the pool's output, which the conv writes
 * before the plan says, shares no bytes with what it reads), has no residual, and writes
 * y_index, channels last, which only a 3 x 3 MAX_POOL2D of stride 2 and padding 1 reads,
 * right after the conv (and its RELU), into a channels-last intermediate of half its
 * height and width. resnet's stem and max pool at batch 64 on the H200: 99.5 + 49.6 us
 * as two steps; 90.1 + 22.3 so with a step for each strip's first pooled row
 * (ember_max_pool_rows); 104.1 and no step with those rows from the consumer's previous
 * strip in shared memory, or from the strip that arrives second (allocate_pool_counts). */
static uint32_t conv_pool_op(const ember_cuda_executor* executor, uint32_t i, uint32_t y_index,
                             const conv_halo_plan* halo, bool x_channels_last,
                             uint32_t residual) {
  const ember_plan* plan = executor->plan;
  const ember_tensor_desc* y = &plan->tensors[y_index];
  if (!halo->units || halo->rows % 2 != 0 || y->dims[2] % halo->rows != 0 ||
      y->dims[3] % 2 != 0 ||
      halo->shared_bytes + conv_pool_shared_bytes(y) > EMBER_K_CONV_HALO_MAX_SMEM_BYTES ||
      x_channels_last || residual != EMBER_PLAN_NO_INDEX ||
      !executor->channels_last[y_index] || y->storage != EMBER_STORAGE_INTERMEDIATE) {
    return EMBER_PLAN_NO_INDEX;
  }
  /* The op right after the conv and its fused RELU: no tensor of an op between them can
   * share bytes with the pool's output, which the plan has written only at the pool. */
  const uint32_t pool = i + (executor->fuse_next[i] ? 2u : 1u);
  if (executor->readers[y_index] != 1 || pool >= plan->num_ops ||
      plan->ops[pool].opcode != EMBER_OP_MAX_POOL2D ||
      ember_plan_op_input(plan, &plan->ops[pool], 0) != y_index) {
    return EMBER_PLAN_NO_INDEX;
  }
  const ember_op_desc* op = &plan->ops[pool];
  static const struct {
    uint32_t attr;
    int64_t value;
  } kWindow[] = {{EMBER_ATTR_POOL_KERNEL_H, 3},       {EMBER_ATTR_POOL_KERNEL_W, 3},
                 {EMBER_ATTR_POOL_STRIDE_H, 2},       {EMBER_ATTR_POOL_STRIDE_W, 2},
                 {EMBER_ATTR_POOL_PAD_H, 1},          {EMBER_ATTR_POOL_PAD_W, 1},
                 {EMBER_ATTR_MAX_POOL_DILATION_H, 1}, {EMBER_ATTR_MAX_POOL_DILATION_W, 1},
                 {EMBER_ATTR_MAX_POOL_CEIL_MODE, 0}};
  for (size_t k = 0; k < sizeof kWindow / sizeof kWindow[0]; ++k) {
    if (ember_plan_op_attr(plan, op, kWindow[k].attr) != kWindow[k].value) {
      return EMBER_PLAN_NO_INDEX;
    }
  }
  const uint32_t out = ember_plan_op_output(plan, op, 0);
  const ember_tensor_desc* pooled = &plan->tensors[out];
  if (!executor->channels_last[out] || pooled->storage != EMBER_STORAGE_INTERMEDIATE ||
      pooled->dims[2] * 2 != y->dims[2] || pooled->dims[3] * 2 != y->dims[3]) {
    return EMBER_PLAN_NO_INDEX;
  }
  return pool;
}

/* The arrival counts of a pooled halo conv's strips (kernel_params.h pool_counts: an
 * int32 per strip of each image), zero before the first launch (the memset runs on the
 * program's stream, before the warm-up run), owned by the MAX_POOL2D op `pool`. Each
 * launch leaves them zero again. */
static ember_status* allocate_pool_counts(ember_cuda_executor* executor, uint32_t pool,
                                          ember_k_conv_halo_params* hp) {
  const size_t bytes = (size_t)hp->images * (size_t)hp->strips * sizeof(int32_t);
  EMBER_RETURN_IF_ERROR(allocate(executor, bytes, "pool arrival counts", &executor->pool_counts[pool]));
  CU_CHECK(executor,
           executor->driver->cuMemsetD8Async(executor->pool_counts[pool], 0, bytes, executor->stream),
           "cuMemsetD8Async(pool arrival counts)");
  hp->pool_counts = executor->pool_counts[pool];
  return NULL;
}

/* CONV2D op i on the implicit-GEMM kernel (or the halo kernel, where
 * executor_conv_runs_halo says), into tensor y_index, with the ReLU and the residual
 * tensor (EMBER_PLAN_NO_INDEX: none) fused into its epilogue. */
static ember_status* build_conv2d_igemm(ember_cuda_executor* executor, uint32_t i,
                                        uint32_t y_index, bool relu, uint32_t residual) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = &plan->tensors[y_index];
  const uint32_t x_index = ember_plan_op_input(plan, op, 0);
  const conv_igemm_shape shape = executor_conv_shape(executor, op);
  const bool x_channels_last = add_conv_input_pack(executor, i, &shape);

  ember_k_conv_igemm_params p = {0};
  p.x = x_channels_last ? 0 : executor->conv_packed; /* the buffer is not a tensor: never patched */
  p.layout = (executor->channels_last[y_index] ? EMBER_K_CONV_IGEMM_Y_CHANNELS_LAST : 0) |
             (residual != EMBER_PLAN_NO_INDEX && executor->channels_last[residual]
                  ? EMBER_K_CONV_IGEMM_RESIDUAL_CHANNELS_LAST
                  : 0);
  p.w = executor->conv_weights + executor->conv_weight_offset[i];
  p.table = executor->conv_weights + executor->conv_table_offset[i];
  p.c = (int32_t)shape.cp, p.h = (int32_t)shape.h, p.w_in = (int32_t)shape.w;
  p.o = (int32_t)y->dims[1], p.oh = (int32_t)y->dims[2], p.ow = (int32_t)y->dims[3];
  p.stride_h = (int32_t)shape.stride_h, p.stride_w = (int32_t)shape.stride_w;
  p.pad_h = (int32_t)shape.pad_h, p.pad_w = (int32_t)shape.pad_w;
  p.k_taps = (int32_t)conv_igemm_k_taps(&shape);
  p.k_stride = (int32_t)conv_igemm_k_stride(&shape);
  p.positions = (int32_t)(y->dims[0] * y->dims[2] * y->dims[3]);
  p.k_tiles = (int32_t)conv_igemm_k_tiles(&shape);
  p.o_tiles = (int32_t)conv_igemm_channel_tiles(y);
  p.relu = relu;
  p.has_residual = residual != EMBER_PLAN_NO_INDEX;
  fast_divisor((uint64_t)(p.oh * p.ow), &p.div_mul[0], &p.div_shift[0]);
  fast_divisor((uint64_t)p.ow, &p.div_mul[1], &p.div_shift[1]);
  const bool wgmma = uses_conv_wgmma(executor);
  conv_halo_plan halo = {0}; /* read only where on_halo; GCC at -O1 cannot tell */
  const bool on_halo = executor_conv_runs_halo(executor, op, &shape, &halo);
  ember_cuda_step* step;
  uint32_t base = 0; /* where the conv's parameters sit in the step's */
  uint32_t pool = EMBER_PLAN_NO_INDEX; /* a MAX_POOL2D the halo kernel takes */
  if (on_halo) {
    ember_k_conv_halo_params hp;
    memset(&hp, 0, sizeof hp);
    hp.conv = p;
    hp.conv.o_tiles = (int32_t)halo.o_tiles;
    hp.rows = (int32_t)halo.rows, hp.pitch = (int32_t)halo.pitch, hp.strips = (int32_t)halo.strips;
    hp.images = (int32_t)shape.n;
    hp.strips_per_block = (int32_t)halo.strips_per_block, hp.groups = (int32_t)halo.groups;
    hp.chunks = (int32_t)((shape.cp + 63) / 64);
    hp.taps = (int32_t)(shape.kh * shape.kw), hp.kw = (int32_t)shape.kw;
    hp.halo_stages = (int32_t)halo.halo_stages;
    hp.halo_bytes = (int32_t)halo.halo_bytes, hp.halo_box_bytes = (int32_t)halo.halo_box_bytes;
    hp.w_stages = (int32_t)halo.w_stages, hp.tiles = (int32_t)halo.tiles;
    hp.strip_images = (int32_t)halo.strip_images, hp.image_rows = (int32_t)halo.image_rows;
    pool = conv_pool_op(executor, i, y_index, &halo, x_channels_last, residual);
    hp.pooled = pool != EMBER_PLAN_NO_INDEX;
    if (hp.pooled) EMBER_RETURN_IF_ERROR(allocate_pool_counts(executor, pool, &hp));
    /* One block an SM (its 384 threads take the whole register file), each looping over
     * tiles, so that its copies for the next tile run under this one's MMAs and epilogue. */
    const int64_t grid = halo.tiles < executor->sm_count ? halo.tiles : executor->sm_count;
    const uint32_t kernel =
        halo.units ? EMBER_CUDA_KERNEL_CONV_HALO_UNITS + 4u * (uint32_t)halo.width_index +
                         (shape.cp == 16 ? 2u : 0u)
                   : EMBER_CUDA_KERNEL_CONV_HALO + 2u * (uint32_t)halo.width_index;
    step = add_kernel_step(executor, i, kernel + ember_cuda_half_index(y->dtype),
                           (unsigned int)grid, &hp, sizeof hp);
    step->block = EMBER_K_CONV_HALO_THREADS;
    step->shared_bytes = (unsigned int)(halo.shared_bytes + (hp.pooled ? conv_pool_shared_bytes(y) : 0));
    step->tensor_maps = TENSOR_MAPS_CONV_HALO;
    base = (uint32_t)offsetof(ember_k_conv_halo_params, conv);
    ++executor->conv_halos;
    if (halo.units) ++executor->conv_halo_units;
    if (halo.strip_images > 1) ++executor->conv_halo_stacked;
    executor->conv_halo_kernels |=
        1u << (halo.units ? 8u + (kernel - EMBER_CUDA_KERNEL_CONV_HALO_UNITS) / 2u
                          : (kernel - EMBER_CUDA_KERNEL_CONV_HALO) / 2u);
    if (pool != EMBER_PLAN_NO_INDEX) {
      /* It writes the pool's output, and its strips' last rows' maxima over the bytes of
       * its own output, which no step writes now. */
      add_ref(executor, step, y_index, (uint32_t)offsetof(ember_k_conv_halo_params, pool_rows));
      y_index = ember_plan_op_output(executor->plan, &executor->plan->ops[pool], 0);
    }
  } else {
    const unsigned int bm = (unsigned int)conv_igemm_bm(p.o);
    const uint32_t kernel = !wgmma ? EMBER_CUDA_KERNEL_CONV_IGEMM
                       : bm == 64 ? EMBER_CUDA_KERNEL_CONV_WGMMA_64
                                  : EMBER_CUDA_KERNEL_CONV_WGMMA_128;
    int64_t per = 0;
    const int64_t splits =
        executor_conv_splits_k(executor, op) ? conv_k_splits(executor, y, &shape, &per) : 1;
    if (splits > 1) {
      /* Its blocks write the sums to conv_partial (prepare sized it); the sum step writes y. */
      p.partial = executor->conv_partial;
      p.k_splits = (int32_t)splits;
      p.split_k_tiles = (int32_t)per;
    }
    step = add_kernel_step(executor, i, kernel + ember_cuda_half_index(y->dtype),
                           (unsigned int)(conv_igemm_tiles(y) * (uint64_t)splits), &p, sizeof p);
    step->shared_bytes = wgmma ? EMBER_K_CONV_WGMMA_SMEM_BYTES(bm) : EMBER_K_CONV_IGEMM_SMEM_BYTES(bm);
  }
  if (x_channels_last) {
    add_read_ref(executor, step, x_index, base + (uint32_t)offsetof(ember_k_conv_igemm_params, x));
  }
  /* Else it reads conv_packed, which every pack writes, or its pool's counts, or it writes
   * conv_partial, which every split conv's blocks write. */
  step->refs_complete = x_channels_last && pool == EMBER_PLAN_NO_INDEX && p.k_splits < 2;
  step->macs = (uint64_t)p.positions * (uint64_t)p.o * (uint64_t)p.k_stride;
  if (p.k_splits > 1) {
    /* The splits' sum, the bias, the residual and the ReLU into y, LANES threads a vector
     * of 8 channels of a position. It reads conv_partial. */
    const uint64_t vectors = (uint64_t)p.positions * (uint64_t)(EMBER_K_CONV_SPLIT_ROW(p.o) / 8);
    step = add_kernel_step(executor, i,
                           EMBER_CUDA_KERNEL_CONV_SPLIT_SUM + ember_cuda_half_index(y->dtype),
                           grid_for_elements(executor, vectors * EMBER_K_CONV_SPLIT_SUM_LANES),
                           &p, sizeof p);
    step->refs_complete = false;
    ++executor->conv_splits;
  }
  if (p.has_residual) {
    add_read_ref(executor, step, residual,
                 base + (uint32_t)offsetof(ember_k_conv_igemm_params, residual));
  }
  add_ref(executor, step, y_index, base + (uint32_t)offsetof(ember_k_conv_igemm_params, y));
  ++executor->conv_igemms;
  if (wgmma) ++executor->conv_wgmmas;
  if (shape.fold == 2) ++executor->conv_folds;
  if (p.has_residual) ++executor->conv_residuals;
  /* The tensor maps are encoded now too, so that one the driver refuses fails in create,
   * not in a run. */
  return on_halo ? patch_kernel_params(executor, step) : NULL;
}

/* CONV2D op i (executor->conv_gemm_nhwc) into y_index, channels last, as cuBLASLt's
 * column-major D [O, N·OH·OW] (ld O: y [N, OH, OW, O]) = Wᵀ · col, with the output
 * channels as M: A = the implicit GEMM's weights [O][k_stride] (k = (kh, kw, c), the bias
 * at k_taps), transposed; B = col [N·OH·OW][k_stride] from ember_im2col_nhwc_2, whose ones
 * column meets the bias; the residual, channels last too, as C. resnet18's batch-1 GEMMs
 * in layer3 and layer4 ran 30-50% faster so than with the positions as M (a probe on the
 * H200), whose small M leaves cuBLASLt's tiles mostly empty. *out_done is false when
 * cuBLASLt has no algorithm (the caller runs the implicit-GEMM kernel, which has the same
 * weights and layouts). */
static ember_status* build_conv2d_gemm_nhwc(ember_cuda_executor* executor, uint32_t i,
                                            uint32_t y_index, uint32_t relu_op,
                                            uint32_t residual, size_t* max_workspace,
                                            bool* out_done) {
  *out_done = false;
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = &plan->tensors[y_index];
  const conv_igemm_shape shape = conv_igemm_shape_of(plan, op, false);
  const int64_t k_stride = conv_igemm_k_stride(&shape), channels = y->dims[1];
  const int64_t positions = y->dims[0] * y->dims[2] * y->dims[3];
  const uint64_t weights = executor->conv_weights + executor->conv_weight_offset[i];
  /* y and the residual are channels-last intermediates: arena (or relocated) addresses. */
  uint32_t d_alignment = address_alignment(tensor_address(executor, y_index));
  if (residual != EMBER_PLAN_NO_INDEX) {
    const uint32_t r_alignment = address_alignment(tensor_address(executor, residual));
    if (r_alignment < d_alignment) d_alignment = r_alignment;
  }
  const ember_cuda_gemm_plain request = {
      .dtype = y->dtype,
      .d_dtype = y->dtype,
      .transpose_a = true,
      .relu = relu_op != EMBER_PLAN_NO_INDEX,
      .m = (uint64_t)channels,
      .n = (uint64_t)positions,
      .k = (uint64_t)k_stride,
      .lda = k_stride,
      .ldb = k_stride,
      .ldd = channels,
      .batch = 1,
      .alignments = {address_alignment(weights), address_alignment(executor->conv_col),
                     d_alignment},
      .max_workspace = EMBER_CUDA_MAX_WORKSPACE,
      .device = executor->device_ordinal,
  };
  ember_cuda_gemm* gemm = NULL;
  EMBER_RETURN_IF_ERROR(add_conv_gemm(executor, i, &request, max_workspace, &gemm));
  if (gemm == NULL) return NULL;

  const bool x_channels_last = add_conv_input_pack(executor, i, &shape);
  const int64_t cp = shape.cp;
  ember_k_im2col_nhwc_params p = {0};
  p.x = x_channels_last ? 0 : executor->conv_packed; /* the buffer is not a tensor: never patched */
  p.col = executor->conv_col;
  p.h = (int32_t)shape.h, p.w = (int32_t)shape.w, p.c = (int32_t)cp;
  p.kw = (int32_t)w->dims[3], p.ow = (int32_t)y->dims[3];
  p.image_positions = (int32_t)(y->dims[2] * y->dims[3]);
  p.stride_h = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_H);
  p.stride_w = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_STRIDE_W);
  p.pad_h = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_H);
  p.pad_w = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_PAD_W);
  p.dilation_h = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_H);
  p.dilation_w = (int32_t)ember_plan_op_attr(plan, op, EMBER_ATTR_CONV_DILATION_W);
  p.tap_vectors = (int32_t)(conv_igemm_k_taps(&shape) / 8);
  p.row_vectors = (int32_t)(k_stride / 8);
  p.vectors = (int32_t)(positions * (k_stride / 8)); /* conv_nhwc_col_bytes checked int32 */
  p.one_bits = y->dtype == EMBER_DTYPE_BFLOAT16 ? 0x3f80u : 0x3c00u;
  const uint64_t divisors[EMBER_K_IM2COL_NHWC_DIVISORS] = {
      [EMBER_K_IM2COL_NHWC_DIV_ROW] = (uint64_t)p.row_vectors,
      [EMBER_K_IM2COL_NHWC_DIV_CHANNELS] = (uint64_t)cp / 8u,
      [EMBER_K_IM2COL_NHWC_DIV_KW] = (uint64_t)p.kw,
      [EMBER_K_IM2COL_NHWC_DIV_POSITIONS] = (uint64_t)p.image_positions,
      [EMBER_K_IM2COL_NHWC_DIV_OW] = (uint64_t)p.ow};
  for (int k = 0; k < EMBER_K_IM2COL_NHWC_DIVISORS; ++k) {
    fast_divisor(divisors[k], &p.div_mul[k], &p.div_shift[k]);
  }
  ember_cuda_step* im2col = add_kernel_step(executor, i, EMBER_CUDA_KERNEL_IM2COL_NHWC_2,
                                            grid_for_elements(executor, (uint64_t)p.vectors),
                                            &p, sizeof p);
  if (x_channels_last) {
    add_ref(executor, im2col, ember_plan_op_input(plan, op, 0), offsetof(ember_k_im2col_nhwc_params, x));
  }
  ember_cuda_step* step = add_step(executor, i);
  step->is_gemm = true;
  step->gemm = executor->num_gemms - 1;
  step->fixed[GEMM_A] = weights;
  step->fixed[GEMM_B] = executor->conv_col;
  add_ref(executor, step, y_index, GEMM_D);
  if (residual != EMBER_PLAN_NO_INDEX) {
    add_ref(executor, step, residual, GEMM_C);
    ++executor->conv_residuals;
  }
  if (relu_op != EMBER_PLAN_NO_INDEX && gemm->activation_fused != EMBER_CUDA_GEMM_ACT_RELU) {
    add_relu_in_place(executor, relu_op, y_index);
  }
  ++executor->conv_gemms_nhwc;
  *out_done = true;
  return NULL;
}

/* CONV2D op i into tensor y_index (its output, or that of the ops fused after it): with
 * `relu_op` (EMBER_PLAN_NO_INDEX: none) applied, and `residual` added before it (on the
 * implicit-GEMM kernel or as the GEMM's C: can_fuse_residual). */
static ember_status* build_conv2d(ember_cuda_executor* executor, uint32_t i, uint32_t y,
                                  uint32_t relu_op, uint32_t residual, size_t* max_workspace) {
  const ember_plan* plan = executor->plan;
  if (plan->tensors[y].numel == 0) return NULL;
  if (executor->conv_gemm_nhwc[i]) {
    bool done = false;
    EMBER_RETURN_IF_ERROR(
        build_conv2d_gemm_nhwc(executor, i, y, relu_op, residual, max_workspace, &done));
    if (!done) return build_conv2d_igemm(executor, i, y, relu_op != EMBER_PLAN_NO_INDEX, residual);
    return NULL;
  }
  if (executor->conv_table_offset[i] != UINT64_MAX) {
    return build_conv2d_igemm(executor, i, y, relu_op != EMBER_PLAN_NO_INDEX, residual);
  }
  bool done = false, relu_done = false;
  /* No cuBLASLt: the plan was to run every such conv on the implicit-GEMM kernel, which
   * this GPU cannot (ember_cuda_kernels.conv_igemm). */
  if (executor->conv_weight_offset[i] != UINT64_MAX && executor->lt_handle != NULL) {
    EMBER_RETURN_IF_ERROR(build_conv2d_gemm(executor, i, y, relu_op != EMBER_PLAN_NO_INDEX,
                                            residual, max_workspace, &done, &relu_done));
  }
  if (!done && residual != EMBER_PLAN_NO_INDEX) {
    /* cuBLASLt had no algorithm for a conv that was to take its residual: the ops as the
     * plan has them, the conv into its own output, then the ADD (and the RELU). */
    build_conv2d_direct(executor, i, ember_plan_op_output(plan, &plan->ops[i], 0));
    build_binary(executor, i + 1, relu_op);
    return NULL;
  }
  if (!done) build_conv2d_direct(executor, i, y);
  if (relu_op != EMBER_PLAN_NO_INDEX && !relu_done) add_relu_in_place(executor, relu_op, y);
  return NULL;
}

/* How far a pool's windows reach along one axis, past the last output, with room for the
 * kernel's last step: (out + 1) * stride + (k + 1) * dilation + pad + size. */
static bool pool_reach(int64_t out, int64_t stride, int64_t k, int64_t dilation, int64_t pad,
                       int64_t size, uint64_t* out_reach) {
  uint64_t a, b;
  return ember_checked_mul_u64((uint64_t)out + 1u, (uint64_t)stride, &a) &&
         ember_checked_mul_u64((uint64_t)k + 1u, (uint64_t)dilation, &b) &&
         ember_checked_add_u64(a, b, out_reach) &&
         ember_checked_add_u64(*out_reach, (uint64_t)pad + (uint64_t)size, out_reach);
}

/* Sets MAX_POOL2D's 32-bit path (kernel_params.h) when the output count and the index of
 * every window tap, (plane * h + tap row) * w + tap column, inside the input or not, fit
 * in int32. */
static void set_pool2d_index32(ember_k_pool2d_params* p) {
  const uint64_t limit = (uint64_t)INT32_MAX - 64u;
  uint64_t outputs, reach_h, reach_w, index;
  const bool fits =
      p->kind == EMBER_K_POOL_MAX &&
      ember_checked_mul_u64((uint64_t)p->planes, (uint64_t)(p->oh * p->ow), &outputs) &&
      outputs <= limit &&
      pool_reach(p->oh, p->stride_h, p->kh, p->dilation_h, p->pad_h, p->h, &reach_h) &&
      pool_reach(p->ow, p->stride_w, p->kw, p->dilation_w, p->pad_w, p->w, &reach_w) &&
      ember_checked_mul_u64((uint64_t)p->planes, (uint64_t)p->h, &index) &&
      ember_checked_add_u64(index, reach_h, &index) &&
      ember_checked_mul_u64(index, (uint64_t)p->w, &index) &&
      ember_checked_add_u64(index, reach_w, &index) && index <= limit;
  if (!fits) return; /* int64 math */
  p->index32 = 1;
  fast_divisor((uint64_t)p->ow, &p->div_mul[0], &p->div_shift[0]);
  fast_divisor((uint64_t)p->oh, &p->div_mul[1], &p->div_shift[1]);
}

static void build_pool2d(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  if (executor->pool_counts[i] != 0) { /* its conv did it all (conv_pool_op) */
    ++executor->pools_channels_last;
    ++executor->pools_in_conv;
    return;
  }
  ember_k_pool2d_params p = {0};
  p.planes = x->dims[0] * x->dims[1];
  p.h = x->dims[2], p.w = x->dims[3], p.oh = y->dims[2], p.ow = y->dims[3];
  p.dilation_h = p.dilation_w = 1;
  if (op->opcode == EMBER_OP_ADAPTIVE_AVG_POOL2D) {
    p.kind = EMBER_K_POOL_ADAPTIVE_AVG;
  } else {
    const bool is_max = op->opcode == EMBER_OP_MAX_POOL2D;
    p.kind = is_max ? EMBER_K_POOL_MAX : EMBER_K_POOL_AVG;
    p.kh = ember_plan_op_attr(plan, op, EMBER_ATTR_POOL_KERNEL_H);
    p.kw = ember_plan_op_attr(plan, op, EMBER_ATTR_POOL_KERNEL_W);
    p.stride_h = ember_plan_op_attr(plan, op, EMBER_ATTR_POOL_STRIDE_H);
    p.stride_w = ember_plan_op_attr(plan, op, EMBER_ATTR_POOL_STRIDE_W);
    p.pad_h = ember_plan_op_attr(plan, op, EMBER_ATTR_POOL_PAD_H);
    p.pad_w = ember_plan_op_attr(plan, op, EMBER_ATTR_POOL_PAD_W);
    if (is_max) {
      p.dilation_h = ember_plan_op_attr(plan, op, EMBER_ATTR_MAX_POOL_DILATION_H);
      p.dilation_w = ember_plan_op_attr(plan, op, EMBER_ATTR_MAX_POOL_DILATION_W);
    } else {
      p.count_include_pad = ember_plan_op_attr(plan, op, EMBER_ATTR_AVG_POOL_COUNT_INCLUDE_PAD) != 0;
      p.divisor_override = ember_plan_op_attr(plan, op, EMBER_ATTR_AVG_POOL_DIVISOR_OVERRIDE);
    }
  }
  set_pool2d_index32(&p);
  /* x and y both channels last (plan_channels_last): a thread per 16 bytes of y. */
  const bool channels_last = executor->channels_last[ember_plan_op_input(plan, op, 0)];
  /* 3 x 3 windows of dilation 1 over rows that fit a block's default shared memory (48
   * KB: resnet18's stem output, 112 wide, 64 channels in float16, takes 42): a block an
   * output row, its three input rows in shared memory (max_pool2d_nhwc_shared_rows). */
  const uint64_t rows_bytes = 3u * (uint64_t)p.w * (uint64_t)x->dims[1] * ember_dtype_size(x->dtype);
  if (channels_last) {
    p.channels = x->dims[1];
    p.shared_rows = p.index32 && p.kh == 3 && p.kw == 3 && p.dilation_h == 1 &&
                    p.dilation_w == 1 && rows_bytes <= 48u * 1024u;
    ++executor->pools_channels_last;
    if (p.shared_rows) ++executor->pools_shared_rows;
  }
  const uint32_t kernel =
      channels_last ? EMBER_CUDA_KERNEL_MAX_POOL2D_NHWC : EMBER_CUDA_KERNEL_POOL2D;
  const unsigned int grid =
      p.shared_rows    ? grid_for_rows(executor, (uint64_t)(x->dims[0] * p.oh))
      : channels_last ? grid_for_vectors(executor, y->nbytes)
                      : grid_for_elements(executor, y->numel);
  ember_cuda_step* step =
      add_kernel_step(executor, i, kernel + ember_cuda_dtype_index(y->dtype), grid, &p, sizeof p);
  if (p.shared_rows) step->shared_bytes = (unsigned int)rows_bytes;
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_pool2d_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_pool2d_params, y));
}

/* Steps op can add: a GEMM and its bias_act, SDPA's three, CONV2D's im2col and GEMM per
 * chunk of images and then a gather into NCHW or a RELU (at least three), or one copy per
 * CAT input. */
static uint64_t max_steps_of(const ember_plan* plan, const ember_op_desc* op) {
  if (op->opcode == EMBER_OP_SDPA) return 3u; /* GEMM, softmax, GEMM */
  if (op->opcode == EMBER_OP_CONV2D) {
    uint64_t col, weight, flat;
    if (!conv_gemm_sizes(plan, op, &col, &weight, &flat) || flat != 0) return 3u;
    const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
    return 2u * ((uint64_t)y->dims[0] / conv_gemm_chunk_images(plan, op)) + 1u;
  }
  return op->opcode == EMBER_OP_CAT && op->num_inputs > 2 ? op->num_inputs : 2u;
}

/* EMBEDDING's out-of-range check: one word of device memory, set to all ones before each
 * run, that the kernels lower to (op << 40 | position) of a bad index. */
static ember_status* allocate_embedding_error(ember_cuda_executor* executor) {
  const ember_plan* plan = executor->plan;
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    if (plan->ops[i].opcode != EMBER_OP_EMBEDDING) continue;
    EMBER_RETURN_IF_ERROR(allocate(executor, sizeof(uint64_t), "embedding check",
                                   &executor->embedding_error));
    return NULL;
  }
  return NULL;
}

static ember_status* embedding_check_begin(ember_cuda_executor* executor) {
  if (executor->embedding_error == 0) return NULL;
  executor->embedding_error_host = UINT64_MAX;
  CU_CHECK(executor,
           executor->driver->cuMemsetD8Async(executor->embedding_error, 0xFF, sizeof(uint64_t),
                                              executor->stream),
           "cuMemsetD8Async(embedding check)");
  return NULL;
}

static ember_status* embedding_check_fetch(ember_cuda_executor* executor) {
  if (executor->embedding_error == 0) return NULL;
  CU_CHECK(executor,
           executor->driver->cuMemcpyDtoHAsync(&executor->embedding_error_host,
                                               executor->embedding_error, sizeof(uint64_t),
                                               executor->stream),
           "cuMemcpyDtoHAsync(embedding check)");
  return NULL;
}

/* After the stream is synchronized. */
static ember_status* embedding_check_end(const ember_cuda_executor* executor) {
  if (executor->embedding_error == 0 || executor->embedding_error_host == UINT64_MAX) return NULL;
  const uint32_t op_index = (uint32_t)(executor->embedding_error_host >> 40);
  const uint64_t position = executor->embedding_error_host & ((UINT64_C(1) << 40) - 1u);
  const ember_plan* plan = executor->plan;
  if (op_index >= plan->num_ops) {
    return ember_status_make(EMBER_INTERNAL, "cuda executor: embedding check word corrupt");
  }
  const ember_op_desc* op = &plan->ops[op_index];
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 0);
  return ember_status_make(EMBER_INVALID_ARGUMENT, "op %" PRIu32 " (EMBEDDING): the index at "
                           "position %" PRIu64 " of '%s' is out of range for the %" PRId64
                           " rows of '%s'; indices must be in 0..rows-1, as "
                           "torch.nn.functional.embedding requires",
                           op_index, position, ember_plan_op_input_tensor(plan, op, 1)->name,
                           w->dims[0], w->name);
}

static ember_status* build_steps(ember_cuda_executor* executor, size_t* out_workspace) {
  const ember_plan* plan = executor->plan;
  *out_workspace = 0;
  uint64_t max_steps = 0;
  for (uint32_t i = 0; i < plan->num_ops; ++i) max_steps += max_steps_of(plan, &plan->ops[i]);
  size_t steps_bytes;
  if (!ember_u64_to_size(max_steps * sizeof(ember_cuda_step), &steps_bytes)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: too many ops");
  }
  executor->steps = calloc((size_t)max_steps, sizeof(ember_cuda_step));
  /* At most two GEMMs per op (SDPA's). */
  executor->gemms = calloc(2u * (size_t)plan->num_ops + 1u, sizeof(ember_cuda_gemm));
  if (executor->steps == NULL || executor->gemms == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: cannot allocate the step "
                             "table (%" PRIu32 " ops)", plan->num_ops);
  }
  ember_status* status = NULL;
  for (uint32_t i = 0; i < plan->num_ops && status == NULL; ++i) {
    const ember_op_desc* op = &plan->ops[i];
    if (executor->folded != NULL && executor->folded[i]) continue; /* in an SDPA's views */
    switch (op->opcode) {
      case EMBER_OP_LINEAR:
      case EMBER_OP_MATMUL: {
        const bool fuse = executor->fuse_next[i];
        status = build_gemm(executor, i, fuse ? i + 1 : EMBER_PLAN_NO_INDEX, out_workspace);
        if (fuse && status == NULL) ++i; /* the activation is done */
        break;
      }
      case EMBER_OP_RELU:
      case EMBER_OP_GELU:
      case EMBER_OP_SIGMOID:
      case EMBER_OP_TANH:
      case EMBER_OP_SILU:
      case EMBER_OP_NEG:
      case EMBER_OP_EXP:
      case EMBER_OP_LOG:
      case EMBER_OP_SQRT:
      case EMBER_OP_RSQRT:
      case EMBER_OP_ABS:
      case EMBER_OP_RECIPROCAL:
      case EMBER_OP_CLAMP: build_unary(executor, i); break;
      case EMBER_OP_ADD:
      case EMBER_OP_SUB:
      case EMBER_OP_MUL:
      case EMBER_OP_DIV:
      case EMBER_OP_POW:
      case EMBER_OP_MAXIMUM:
      case EMBER_OP_MINIMUM: {
        if (executor->add_into_norm[i]) break; /* the LAYER_NORM after it does it */
        const bool fuse = executor->fuse_next[i];
        build_binary(executor, i, fuse ? i + 1 : EMBER_PLAN_NO_INDEX);
        if (fuse) ++i; /* the RELU is done */
        break;
      }
      case EMBER_OP_WHERE: build_where(executor, i); break;
      case EMBER_OP_CAST: build_cast(executor, i); break;
      case EMBER_OP_EXPAND: build_expand(executor, i); break;
      case EMBER_OP_SLICE: build_slice(executor, i); break;
      case EMBER_OP_CAT: build_cat(executor, i); break;
      case EMBER_OP_EMBEDDING: build_embedding(executor, i); break;
      case EMBER_OP_REDUCE_SUM:
      case EMBER_OP_REDUCE_MEAN:
      case EMBER_OP_REDUCE_MAX: build_reduce(executor, i); break;
      case EMBER_OP_SDPA: status = build_sdpa(executor, i, out_workspace); break;
      case EMBER_OP_CONV2D: {
        /* The ops it takes: the RELU after it, or the residual ADD and the RELU after that. */
        const uint32_t last = conv_last_fused(executor, i);
        const uint32_t residual = executor->conv_residual[i] ? residual_input(plan, i)
                                                             : EMBER_PLAN_NO_INDEX;
        const uint32_t relu_op = executor->fuse_next[executor->conv_residual[i] ? i + 1 : i]
                                     ? last
                                     : EMBER_PLAN_NO_INDEX;
        status = build_conv2d(executor, i, ember_plan_op_output(plan, &plan->ops[last], 0),
                              relu_op, residual, out_workspace);
        if (status == NULL) i = last;
        break;
      }
      case EMBER_OP_MAX_POOL2D:
      case EMBER_OP_AVG_POOL2D:
      case EMBER_OP_ADAPTIVE_AVG_POOL2D: build_pool2d(executor, i); break;
      case EMBER_OP_RESHAPE: build_reshape(executor, i); break;
      case EMBER_OP_COPY: build_copy(executor, i); break;
      case EMBER_OP_PERMUTE: build_permute(executor, i); break;
      case EMBER_OP_SOFTMAX: build_softmax(executor, i); break;
      case EMBER_OP_LAYER_NORM: build_layer_norm(executor, i); break;
      default:
        status = ember_status_make(EMBER_UNAVAILABLE, "cuda executor: op %" PRIu32 " is %s "
                                   "(opcode %d), which the CUDA executor does not run yet",
                                   i, ember_opcode_name(op->opcode), (int)op->opcode);
        break;
    }
  }
  if (status == NULL && executor->too_many_refs) {
    status = ember_status_make(EMBER_INTERNAL, "cuda executor: a kernel step binds more than "
                               "%u tensors", EMBER_CUDA_MAX_REFS);
  }
  return status;
}

/* ---- LINEARs one after another on one persistent kernel (gemm_chain) ------------------- */

/* Whether this executor runs consecutive gemm_wgmma steps that read one another's outputs
 * as one chain kernel (kernel_params.h ember_k_gemm_chain_params): gemm_wgmma's
 * conditions, the chain kernel's shared memory, and EMBER_CUDA_GEMM_CHAIN=1. */
static bool uses_gemm_chain(const ember_cuda_executor* executor) {
  return uses_gemm_wgmma(executor) && executor->kernels.gemm_chain &&
         ember_settings_get()->cuda_gemm_chain;
}

/* Whether tensors a and b are the same bytes: one tensor, or intermediates at one place
 * in the arena of one size (a reshape's view). */
static bool same_bytes(const ember_cuda_executor* executor, uint32_t a, uint32_t b) {
  const ember_tensor_desc* ta = &executor->plan->tensors[a];
  const ember_tensor_desc* tb = &executor->plan->tensors[b];
  return a == b ||
         (ta->storage == EMBER_STORAGE_INTERMEDIATE && tb->storage == EMBER_STORAGE_INTERMEDIATE &&
          arena_offset(executor, a) == arena_offset(executor, b) && ta->nbytes == tb->nbytes);
}

/* Whether step s can be a chain's layer: a gemm_wgmma step of 256-column tiles (refs x,
 * w, the bias if any, y) whose K tiles are a whole number of the ring's stages (each
 * tile's last two then sit where the chain's epilogue puts its tile) and whose y shares
 * no bytes with its x. */
static bool step_fits_chain(const ember_cuda_executor* executor, uint32_t s) {
  const ember_cuda_step* step = &executor->steps[s];
  const CUfunction* functions = &executor->kernels.functions[EMBER_CUDA_KERNEL_GEMM_WGMMA];
  if (step->is_gemm || step->tensor_maps != TENSOR_MAPS_LINEAR ||
      (step->function != functions[0] && step->function != functions[1])) {
    return false;
  }
  ember_k_gemm_wgmma_params p;
  memcpy(&p, step->params, sizeof p);
  return p.k_tiles % EMBER_K_GEMM_WGMMA_STAGES == 0 &&
         !arena_overlap(executor, step->refs[0].tensor, step->refs[step->num_refs - 1].tensor);
}

/* Whether step s can follow the chain of steps first .. s - 1 (s > first) as its next
 * layer: fit for one (step_fits_chain), of the first's dtype, its x the previous layer's
 * y, and its y sharing no bytes with the chain's other tensors unless it is the same
 * bytes: a tile waits for the tiles of its own rows in the layer before, which waited for
 * theirs, so the rows of an earlier tensor that it writes over are rows only finished
 * tiles read. */
static bool step_extends_chain(const ember_cuda_executor* executor, uint32_t first, uint32_t s) {
  const ember_cuda_step* step = &executor->steps[s];
  if (s - first >= EMBER_K_GEMM_CHAIN_MAX || !step_fits_chain(executor, s) ||
      step->function != executor->steps[first].function) {
    return false;
  }
  const ember_cuda_step* before = &executor->steps[s - 1];
  const uint32_t x = step->refs[0].tensor, y = step->refs[step->num_refs - 1].tensor;
  if (!same_bytes(executor, before->refs[before->num_refs - 1].tensor, x)) return false;
  for (uint32_t t = first; t + 1 < s; ++t) {
    const ember_cuda_step* layer = &executor->steps[t];
    const uint32_t written = layer->refs[layer->num_refs - 1].tensor;
    if (arena_overlap(executor, y, written) && !same_bytes(executor, y, written)) return false;
  }
  const uint32_t x0 = executor->steps[first].refs[0].tensor;
  return !arena_overlap(executor, y, x0) || same_bytes(executor, y, x0);
}

/* The layers of the chain that starts at step `first` (1: none). */
static uint32_t chain_layers_at(const ember_cuda_executor* executor, uint32_t first) {
  if (!step_fits_chain(executor, first)) return 1;
  uint32_t layers = 1;
  while (first + layers < executor->num_steps &&
         step_extends_chain(executor, first, first + layers)) {
    ++layers;
  }
  return layers;
}

/* The int32 counts a chain of these layers needs (ember_k_gemm_chain_params counts). */
static uint64_t chain_counts(const ember_cuda_executor* executor, uint32_t first, uint32_t layers) {
  ember_k_gemm_wgmma_params p;
  memcpy(&p, executor->steps[first].params, sizeof p);
  const uint64_t m_tiles = ceil_div_u64((uint64_t)p.linear.rows, EMBER_K_GEMM_WGMMA_BM);
  return 2u + (uint64_t)(layers - 1u) * m_tiles;
}

/* Steps first .. first + layers - 1 as one chain step into *out (which may be step
 * `first`: it is written once they have all been read), its counts at `counts`, with the
 * addresses and tensor maps patched in. */
static ember_status* merge_gemm_chain(ember_cuda_executor* executor, uint32_t first,
                                      uint32_t layers, CUdeviceptr counts, ember_cuda_step* out) {
  ember_k_gemm_chain_params p;
  memset(&p, 0, sizeof p);
  p.layers = (int32_t)layers;
  p.counts = counts;
  uint64_t tiles = 0;
  ember_cuda_step chain = executor->steps[first];
  chain.num_refs = 0;
  chain.read_refs = 0;
  chain.touches_io = false;
  chain.macs = 0;
  for (uint32_t l = 0; l < layers; ++l) {
    const ember_cuda_step* step = &executor->steps[first + l];
    memcpy(&p.layer[l], step->params, sizeof p.layer[l]);
    p.m_tiles = (int32_t)ceil_div_u64((uint64_t)p.layer[l].linear.rows, EMBER_K_GEMM_WGMMA_BM);
    tiles += (uint64_t)p.m_tiles * (uint64_t)p.layer[l].n_tiles;
    for (uint32_t r = 0; r < step->num_refs; ++r) {
      if (step->read_refs >> r & 1u) chain.read_refs |= 1u << chain.num_refs;
      add_ref(executor, &chain, step->refs[r].tensor,
              step->refs[r].slot + l * (uint32_t)sizeof(ember_k_gemm_wgmma_params));
    }
    chain.macs += step->macs;
  }
  const uint32_t y = chain.refs[chain.num_refs - 1].tensor;
  chain.function = executor->kernels.functions[EMBER_CUDA_KERNEL_GEMM_CHAIN +
                                               ember_cuda_half_index(executor->plan->tensors[y].dtype)];
  chain.grid = (unsigned int)(tiles < (uint64_t)executor->sm_count ? tiles
                                                                    : (uint64_t)executor->sm_count);
  chain.shared_bytes = EMBER_K_GEMM_CHAIN_SMEM_BYTES;
  chain.tensor_maps = TENSOR_MAPS_CHAIN;
  memcpy(chain.params, &p, sizeof p);
  *out = chain;
  out->args[0] = out->params;
  ++executor->gemm_chains;
  executor->gemm_chain_layers += layers;
  return patch_kernel_params(executor, out);
}

/* Merges each run of consecutive gemm_wgmma steps that read one another's outputs
 * (chain_layers_at) into one chain step, where the executor uses the chain kernel: the
 * MLP's four LINEAR + GELU pairs at batch 4096 as one kernel, whose blocks go from one
 * layer's tiles to the next's without a kernel boundary. The counts of all chains are one
 * allocation, zeroed now on the stream (before the warm-up run). */
static ember_status* merge_gemm_chains(ember_cuda_executor* executor) {
  if (!uses_gemm_chain(executor)) return NULL;
  uint64_t total = 0;
  for (uint32_t s = 0; s < executor->num_steps;) {
    const uint32_t layers = chain_layers_at(executor, s);
    if (layers > 1) total += chain_counts(executor, s, layers);
    s += layers;
  }
  if (total == 0) return NULL;
  const size_t bytes = (size_t)total * sizeof(int32_t);
  EMBER_RETURN_IF_ERROR(
      allocate(executor, bytes, "chain counts", &executor->gemm_chain_counts));
  CU_CHECK(executor,
           executor->driver->cuMemsetD8Async(executor->gemm_chain_counts, 0, bytes, executor->stream),
           "cuMemsetD8Async(chain counts)");
  CUdeviceptr counts = executor->gemm_chain_counts;
  uint32_t kept = 0;
  for (uint32_t s = 0; s < executor->num_steps; ++kept) {
    const uint32_t layers = chain_layers_at(executor, s);
    if (layers > 1) {
      const uint64_t chain_bytes = chain_counts(executor, s, layers) * sizeof(int32_t);
      EMBER_RETURN_IF_ERROR(merge_gemm_chain(executor, s, layers, counts, &executor->steps[kept]));
      counts += chain_bytes;
    } else if (kept != s) {
      executor->steps[kept] = executor->steps[s];
      executor->steps[kept].args[0] = executor->steps[kept].params;
    }
    s += layers;
  }
  executor->num_steps = kept;
  return NULL;
}

/* ---- running steps -------------------------------------------------------------------- */

static ember_status* enqueue_gemm_step(ember_cuda_executor* executor, ember_cuda_step* step) {
  uint64_t addresses[5] = {step->fixed[0], step->fixed[1], step->fixed[2], step->fixed[3],
                           step->fixed[4]};
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    step->baked[r] = tensor_address(executor, step->refs[r].tensor);
    addresses[step->refs[r].slot] = step->baked[r] + step->refs[r].offset;
  }
  return ember_cuda_gemm_enqueue(executor->lt, executor->lt_handle,
                                 &executor->gemms[step->gemm], addresses[GEMM_A],
                                 addresses[GEMM_B], addresses[GEMM_BIAS], addresses[GEMM_C],
                                 addresses[GEMM_D], executor->workspace, executor->stream);
}

static ember_status* bake_kernel_step(ember_cuda_executor* executor, ember_cuda_step* step) {
  EMBER_RETURN_IF_ERROR(patch_kernel_params(executor, step));
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    step->baked[r] = tensor_address(executor, step->refs[r].tensor);
  }
  return NULL;
}

static CUDA_KERNEL_NODE_PARAMS kernel_node_params(ember_cuda_step* step) {
  CUDA_KERNEL_NODE_PARAMS params;
  memset(&params, 0, sizeof params);
  params.func = step->function;
  params.gridDimX = step->grid;
  params.gridDimY = 1;
  params.gridDimZ = 1;
  params.blockDimX = step->block;
  params.blockDimY = 1;
  params.blockDimZ = 1;
  params.sharedMemBytes = step->shared_bytes;
  params.kernelParams = step->args;
  return params;
}

/* Every step launched on the stream, in order (no graph); with a profile, each step
 * between two of its events. */
static ember_status* enqueue_eager(ember_cuda_executor* executor, ember_cuda_profile* profile) {
  if (profile != NULL) EMBER_RETURN_IF_ERROR(ember_cuda_profile_mark(profile, 0, executor->stream));
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    ember_cuda_step* step = &executor->steps[s];
    if (step->is_gemm) {
      EMBER_RETURN_IF_ERROR(ember_cuda_annotate(enqueue_gemm_step(executor, step),
                                                  "op %" PRIu32, step->op_index));
    } else {
      EMBER_RETURN_IF_ERROR(bake_kernel_step(executor, step));
      CU_CHECK(executor,
               executor->driver->cuLaunchKernel(step->function, step->grid, 1, 1, step->block,
                                                1, 1, step->shared_bytes, executor->stream,
                                                step->args, NULL),
               "cuLaunchKernel");
    }
    if (profile != NULL) {
      EMBER_RETURN_IF_ERROR(ember_cuda_profile_mark(profile, s + 1, executor->stream));
    }
  }
  return NULL;
}

/* The cuBLASLt calls of a GEMM step, captured from the stream into a new graph. */
static ember_status* capture_gemm(ember_cuda_executor* executor, ember_cuda_step* step,
                                  CUgraph* out_graph) {
  *out_graph = NULL;
  const ember_cuda_driver* driver = executor->driver;
  CU_CHECK(executor,
           driver->cuStreamBeginCapture(executor->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
           "cuStreamBeginCapture");
  ember_status* status = enqueue_gemm_step(executor, step);
  /* End the capture whatever happened, so the stream is usable again. */
  CUgraph graph = NULL;
  CUresult result = driver->cuStreamEndCapture(executor->stream, &graph);
  if (status == NULL && result != CUDA_SUCCESS) {
    status = ember_cuda_status(driver, result, "cuStreamEndCapture");
  }
  if (status != NULL) {
    if (graph != NULL) driver->cuGraphDestroy(graph);
    return ember_cuda_annotate(status, "op %" PRIu32, step->op_index);
  }
  *out_graph = graph;
  return NULL;
}

/* Whether GEMM b poses the problem GEMM a did: the same sizes and the same candidate
 * list from the heuristic (which saw the layouts, dtypes, epilogue and alignments), so
 * a's choice is one of b's candidates and as fast for it. A transformer's layers repeat
 * their GEMMs; timing each shape once keeps the search off init's bill. */
static bool same_gemm_problem(const ember_cuda_gemm* a, const ember_cuda_gemm* b) {
  return a->m == b->m && a->n == b->n && a->k == b->k && a->calls == b->calls &&
         a->element_size == b->element_size && a->num_candidates == b->num_candidates &&
         memcmp(a->candidates, b->candidates, a->num_candidates * sizeof a->candidates[0]) == 0;
}

/* Search rounds and runs a round: each candidate's time is its best round of that many
 * runs, the rounds visiting the candidates in turn. */
#define EMBER_CUDA_GEMM_SEARCH_ROUNDS 3
#define EMBER_CUDA_GEMM_SEARCH_RUNS 3

/* Times GEMM step s's usable candidates (usable[c]) for one round: fills ms[c] with the
 * lower of its earlier rounds and this one. */
static ember_status* time_gemm_candidates(ember_cuda_executor* executor, ember_cuda_step* step,
                                          uint32_t searched, const bool* usable, CUevent* events,
                                          float* ms) {
  const ember_cuda_driver* driver = executor->driver;
  ember_cuda_gemm* gemm = &executor->gemms[step->gemm];
  for (uint32_t c = 0; c < searched; ++c) {
    if (!usable[c]) continue;
    ember_cuda_gemm_choose(gemm, c);
    CUresult result = driver->cuEventRecord(events[0], executor->stream);
    for (int run = 0; run < EMBER_CUDA_GEMM_SEARCH_RUNS && result == CUDA_SUCCESS; ++run) {
      EMBER_RETURN_IF_ERROR(enqueue_gemm_step(executor, step));
    }
    if (result == CUDA_SUCCESS) result = driver->cuEventRecord(events[1], executor->stream);
    if (result == CUDA_SUCCESS) result = driver->cuEventSynchronize(events[1]);
    float round_ms = 0.0f;
    if (result == CUDA_SUCCESS) result = driver->cuEventElapsedTime(&round_ms, events[0], events[1]);
    if (result != CUDA_SUCCESS) return ember_cuda_status(driver, result, "timing a GEMM algorithm");
    if (ms[c] < 0.0f || round_ms < ms[c]) ms[c] = round_ms;
  }
  return NULL;
}

/* Times the first EMBER_CUDA_GEMM_TIMED_CANDIDATES candidate algorithms of each GEMM step
 * on its real operands and keeps the fastest: the heuristic's first choice is a guess,
 * and for small or oddly shaped products often not the fastest. Each candidate runs once
 * to warm up, then EMBER_CUDA_GEMM_SEARCH_ROUNDS rounds time every candidate in turn,
 * and a candidate's best round counts, so that a stall or a clock change during one
 * candidate's turn does not decide (one batch of three runs each, in order, was what the
 * search timed before). A candidate that fails to launch is skipped; a GEMM that poses a
 * problem already timed takes its choice. Runs at prepare, before the warm-up run. */
static ember_status* choose_gemm_algorithms(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  CUevent events[2] = {NULL, NULL};
  ember_status* status = NULL;
  for (int e = 0; e < 2 && status == NULL; ++e) {
    CUresult result = driver->cuEventCreate(&events[e], CU_EVENT_DEFAULT);
    if (result != CUDA_SUCCESS) {
      events[e] = NULL;
      status = ember_cuda_status(driver, result, "cuEventCreate(GEMM search)");
    }
  }
  for (uint32_t s = 0; s < executor->num_steps && status == NULL; ++s) {
    ember_cuda_step* step = &executor->steps[s];
    if (!step->is_gemm) continue;
    ember_cuda_gemm* gemm = &executor->gemms[step->gemm];
    if (gemm->num_candidates < 2) continue;
    uint32_t best = 0;
    bool timed = false;
    for (uint32_t t = 0; t < s && !timed; ++t) {
      const ember_cuda_step* earlier = &executor->steps[t];
      if (!earlier->is_gemm || !same_gemm_problem(&executor->gemms[earlier->gemm], gemm)) continue;
      best = executor->gemms[earlier->gemm].chosen;
      timed = true;
    }
    const uint32_t searched = gemm->num_candidates < EMBER_CUDA_GEMM_TIMED_CANDIDATES
                                  ? gemm->num_candidates
                                  : EMBER_CUDA_GEMM_TIMED_CANDIDATES;
    bool usable[EMBER_CUDA_GEMM_TIMED_CANDIDATES] = {false};
    float ms[EMBER_CUDA_GEMM_TIMED_CANDIDATES];
    for (uint32_t c = 0; c < searched && !timed; ++c) {
      ++executor->gemm_candidates_timed;
      ms[c] = -1.0f;
      ember_cuda_gemm_choose(gemm, c);
      ember_status* failed = enqueue_gemm_step(executor, step); /* the warm-up run */
      usable[c] = failed == NULL;
      ember_status_free(failed);
    }
    for (int round = 0; round < EMBER_CUDA_GEMM_SEARCH_ROUNDS && !timed && status == NULL; ++round) {
      status = time_gemm_candidates(executor, step, searched, usable, events, ms);
    }
    for (uint32_t c = 0; c < searched && !timed; ++c) {
      if (usable[c] && ms[c] >= 0.0f && (!usable[best] || ms[best] < 0.0f || ms[c] < ms[best])) best = c;
    }
    ember_cuda_gemm_choose(gemm, best);
    status = ember_cuda_annotate(status, "op %" PRIu32, step->op_index);
  }
  for (int e = 0; e < 2; ++e) {
    if (events[e] != NULL) driver->cuEventDestroy(events[e]);
  }
  return status;
}

static void destroy_graph(ember_cuda_executor* executor) {
  if (executor->graph_exec != NULL) executor->driver->cuGraphExecDestroy(executor->graph_exec);
  if (executor->graph != NULL) executor->driver->cuGraphDestroy(executor->graph);
  executor->graph_exec = NULL;
  executor->graph = NULL;
}

/* At most this many steps run side by side in the graph. */
#define EMBER_CUDA_MAX_BESIDE 4u

/* Whether a byte that step a or step b writes lies in the other's refs (whole tensors in
 * the arena: the callers' steps touch no input or output of the plan). */
static bool steps_share_written_bytes(const ember_cuda_executor* executor,
                                      const ember_cuda_step* a, const ember_cuda_step* b) {
  for (uint32_t i = 0; i < a->num_refs; ++i) {
    for (uint32_t j = 0; j < b->num_refs; ++j) {
      if ((a->read_refs >> i & 1u) && (b->read_refs >> j & 1u)) continue;
      if (arena_overlap(executor, a->refs[i].tensor, b->refs[j].tensor)) return true;
    }
  }
  return false;
}

/* Whether steps a and b may run side by side, neither waiting for the other: both kernels
 * whose refs name all they touch (refs_complete), neither touching an input or output of
 * the plan (bound anew each run), and no byte one writes in the other's refs. */
static bool steps_independent(const ember_cuda_executor* executor, const ember_cuda_step* a,
                              const ember_cuda_step* b) {
  return a->refs_complete && b->refs_complete && !a->touches_io && !b->touches_io &&
         !steps_share_written_bytes(executor, a, b);
}

/* Splits the steps into groups of consecutive steps, pairwise independent, each group
 * waiting for the whole group before it (so every order the steps had still holds between
 * dependent steps): sets each step's `beside` (it joins the group of the step before it).
 * Resnet's downsampling 1x1 conv and its block's first 3x3 read
 * the same input into different outputs: each has too few tiles for more than a wave and
 * a half of the GPU, and side by side they fill its SMs' tails. */
static void group_steps(ember_cuda_executor* executor) {
  uint32_t first = 0;
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    ember_cuda_step* step = &executor->steps[s];
    step->beside = ember_settings_get()->cuda_branches && s > first &&
                   s - first < EMBER_CUDA_MAX_BESIDE;
    for (uint32_t g = first; g < s && step->beside; ++g) {
      step->beside = steps_independent(executor, &executor->steps[g], step);
    }
    if (!step->beside) first = s;
  }
}

/* One graph of all steps, with the current addresses; then instantiated. Steps run in the
 * groups of group_steps; a step alone in its group after a group of one is a chain. Under
 * PDL (use_pdl) an edge of the chain from a kernel to a kernel is programmatic: the second
 * may be scheduled as the first drains, and waits in begin_after_previous_grid() for its
 * results. An edge to or from a GEMM's child graph (cuBLASLt's kernels, which do not
 * wait), or to or from a group of more than one step, stays a full dependency. */
static ember_status* build_graph(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  destroy_graph(executor);
  executor->programmatic_edges = 0;
  group_steps(executor);
  CU_CHECK(executor, driver->cuGraphCreate(&executor->graph, 0), "cuGraphCreate");
  /* The nodes of the group before this step's, and of its own so far. */
  CUgraphNode before[EMBER_CUDA_MAX_BESIDE], group[EMBER_CUDA_MAX_BESIDE];
  size_t num_before = 0, num_group = 0;
  bool before_is_kernel = false, group_is_kernel = false; /* groups of one */
  uint32_t order[EMBER_CUDA_MAX_BESIDE], group_end = 0;
  for (uint32_t i = 0; i < executor->num_steps; ++i) {
    if (i == group_end) {
      /* A new group: its steps most multiply-adds first (the node order is the launch
       * order, and the GPU's block scheduler takes a kernel's blocks before the next's: the
       * longest then starts first, and the others fill its tail). */
      memcpy(before, group, num_group * sizeof group[0]);
      num_before = num_group;
      before_is_kernel = group_is_kernel;
      num_group = 0;
      do {
        uint32_t k = group_end - i;
        for (; k > 0 && executor->steps[order[k - 1]].macs < executor->steps[group_end].macs; --k) {
          order[k] = order[k - 1];
        }
        order[k] = group_end++;
      } while (group_end < executor->num_steps && executor->steps[group_end].beside);
    }
    const uint32_t s = order[num_group];
    ember_cuda_step* step = &executor->steps[s];
    const bool alone = group_end - i == 1 && num_group == 0;
    const bool programmatic = executor->use_pdl && alone && num_before == 1 &&
                              before_is_kernel && !step->is_gemm;
    const size_t num_dependencies = programmatic ? 0 : num_before;
    if (step->is_gemm) {
      CUgraph child;
      EMBER_RETURN_IF_ERROR(capture_gemm(executor, step, &child));
      CUresult result = driver->cuGraphAddChildGraphNode(&step->node, executor->graph, before,
                                                         num_dependencies, child);
      driver->cuGraphDestroy(child); /* the node holds a clone */
      CU_CHECK(executor, result, "cuGraphAddChildGraphNode");
    } else {
      EMBER_RETURN_IF_ERROR(bake_kernel_step(executor, step));
      CUDA_KERNEL_NODE_PARAMS params = kernel_node_params(step);
      CU_CHECK(executor,
               driver->cuGraphAddKernelNode(&step->node, executor->graph, before,
                                            num_dependencies, &params),
               "cuGraphAddKernelNode");
    }
    if (programmatic) {
      CUgraphEdgeData edge;
      memset(&edge, 0, sizeof edge);
      edge.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
      edge.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
      CU_CHECK(executor,
               driver->cuGraphAddDependencies(executor->graph, before, &step->node, &edge, 1),
               "cuGraphAddDependencies(programmatic)");
      ++executor->programmatic_edges;
    }
    group[num_group++] = step->node;
    group_is_kernel = alone && !step->is_gemm;
  }
  CU_CHECK(executor, driver->cuGraphInstantiateWithFlags(&executor->graph_exec, executor->graph, 0),
           "cuGraphInstantiate");
  return NULL;
}

/* EMBER_CUDA_PDL=auto: each graph is replayed at least MIN and at most MAX times, as many
 * as fit about BUDGET_MS of GPU time for the two; PDL is kept only when its median replay
 * is MIN_GAIN faster, so that within the noise the plain graph stays. */
#define EMBER_CUDA_PDL_MIN_REPLAYS 3
#define EMBER_CUDA_PDL_MAX_REPLAYS 15
#define EMBER_CUDA_PDL_BUDGET_MS 4.0f
#define EMBER_CUDA_PDL_MIN_GAIN 0.01f

/* One replay of `exec`, timed by events, in milliseconds. */
static ember_status* time_graph_replay(ember_cuda_executor* executor, CUgraphExec exec,
                                       const CUevent* events, float* out_ms) {
  const ember_cuda_driver* driver = executor->driver;
  CUresult result = driver->cuEventRecord(events[0], executor->stream);
  if (result == CUDA_SUCCESS) result = driver->cuGraphLaunch(exec, executor->stream);
  if (result == CUDA_SUCCESS) result = driver->cuEventRecord(events[1], executor->stream);
  if (result == CUDA_SUCCESS) result = driver->cuEventSynchronize(events[1]);
  float ms = 0.0f;
  if (result == CUDA_SUCCESS) result = driver->cuEventElapsedTime(&ms, events[0], events[1]);
  if (result != CUDA_SUCCESS) return ember_cuda_status(driver, result, "timing a graph replay");
  *out_ms = ms;
  return NULL;
}

/* The median of times[0..count) (count >= 1), sorting them in place. */
static float median_ms(float* times, uint32_t count) {
  for (uint32_t i = 1; i < count; ++i) {
    const float t = times[i];
    uint32_t j = i;
    for (; j > 0 && times[j - 1] > t; --j) times[j] = times[j - 1];
    times[j] = t;
  }
  return count % 2 ? times[count / 2] : 0.5f * (times[count / 2 - 1] + times[count / 2]);
}

/* Times the plain graph against the PDL graph (their replays alternating, each one's
 * median counting: a clock change or a stall during one replay does not decide, nor does
 * one lucky replay; choosing by the best of each ran the H200's encoder at batch 1 as
 * fast as PDL, 1% slower than without) and keeps the faster. PDL hides the launch gap of
 * chains of small kernels (up to 7% on the H200) but made resnet18's chains of
 * persistent convs 2-3% slower, so neither is right for every program. A driver that
 * refuses programmatic edges leaves the plain graph. */
static ember_status* choose_pdl_by_timing(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  executor->use_pdl = false;
  EMBER_RETURN_IF_ERROR(build_graph(executor));
  CUgraph plain_graph = executor->graph;
  CUgraphExec plain_exec = executor->graph_exec;
  executor->graph = NULL;
  executor->graph_exec = NULL;
  /* The second build overwrites each step's node handle; runs update nodes through it,
   * so the kept graph's handles must be the ones left in the steps. */
  CUgraphNode* plain_nodes = malloc(executor->num_steps * sizeof *plain_nodes);
  if (plain_nodes == NULL) {
    driver->cuGraphExecDestroy(plain_exec);
    driver->cuGraphDestroy(plain_graph);
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  for (uint32_t s = 0; s < executor->num_steps; ++s) plain_nodes[s] = executor->steps[s].node;
  executor->use_pdl = true;
  ember_status* refused = build_graph(executor);
  const bool pdl_built = refused == NULL;
  ember_status_free(refused);
  ember_status* status = NULL;
  CUevent events[2] = {NULL, NULL};
  float median[2] = {-1.0f, -1.0f}; /* plain, PDL */
  if (pdl_built && executor->programmatic_edges > 0) {
    for (int e = 0; e < 2 && status == NULL; ++e) {
      CUresult result = driver->cuEventCreate(&events[e], CU_EVENT_DEFAULT);
      if (result != CUDA_SUCCESS) {
        events[e] = NULL;
        status = ember_cuda_status(driver, result, "cuEventCreate(PDL choice)");
      }
    }
    const CUgraphExec execs[2] = {plain_exec, executor->graph_exec};
    /* A first replay of each (it uploads the graph) sizes the rounds. */
    float first[2] = {-1.0f, -1.0f};
    for (int g = 0; g < 2 && status == NULL; ++g) {
      status = time_graph_replay(executor, execs[g], events, &first[g]);
    }
    float times[2][EMBER_CUDA_PDL_MAX_REPLAYS];
    uint32_t rounds = EMBER_CUDA_PDL_MIN_REPLAYS;
    if (status == NULL && first[0] + first[1] > 0.0f) {
      const float fit = EMBER_CUDA_PDL_BUDGET_MS / (first[0] + first[1]);
      rounds = fit >= (float)EMBER_CUDA_PDL_MAX_REPLAYS ? EMBER_CUDA_PDL_MAX_REPLAYS
               : fit > (float)rounds                     ? (uint32_t)fit
                                                         : rounds;
    }
    for (uint32_t r = 0; r < rounds && status == NULL; ++r) {
      for (int g = 0; g < 2 && status == NULL; ++g) {
        status = time_graph_replay(executor, execs[g], events, &times[g][r]);
      }
    }
    if (status == NULL) {
      for (int g = 0; g < 2; ++g) median[g] = median_ms(times[g], rounds);
      executor->pdl_timed = true;
      executor->pdl_off_us = median[0] * 1000.0f;
      executor->pdl_on_us = median[1] * 1000.0f;
    }
  }
  for (int e = 0; e < 2; ++e) {
    if (events[e] != NULL) driver->cuEventDestroy(events[e]);
  }
  if (executor->pdl_timed && median[1] < median[0] * (1.0f - EMBER_CUDA_PDL_MIN_GAIN)) {
    driver->cuGraphExecDestroy(plain_exec);
    driver->cuGraphDestroy(plain_graph);
  } else {
    destroy_graph(executor);
    executor->graph = plain_graph;
    executor->graph_exec = plain_exec;
    executor->use_pdl = false;
    executor->programmatic_edges = 0;
    for (uint32_t s = 0; s < executor->num_steps; ++s) executor->steps[s].node = plain_nodes[s];
  }
  free(plain_nodes);
  return status;
}

/* Brings the instantiated graph up to this run's addresses: a step whose bound pointers
 * changed gets new kernel parameters, or (a GEMM) a newly captured child graph with the
 * same topology. Anything the driver refuses to update means a rebuild. */
static ember_status* update_graph(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    ember_cuda_step* step = &executor->steps[s];
    if (!step->touches_io) continue;
    bool changed = false;
    for (uint32_t r = 0; r < step->num_refs; ++r) {
      if (step->baked[r] != tensor_address(executor, step->refs[r].tensor)) changed = true;
    }
    if (!changed) continue;
    CUresult result;
    if (step->is_gemm) {
      CUgraph child;
      EMBER_RETURN_IF_ERROR(capture_gemm(executor, step, &child));
      result = driver->cuGraphExecChildGraphNodeSetParams(executor->graph_exec, step->node,
                                                          child);
      driver->cuGraphDestroy(child);
    } else {
      EMBER_RETURN_IF_ERROR(bake_kernel_step(executor, step));
      CUDA_KERNEL_NODE_PARAMS params = kernel_node_params(step);
      result = driver->cuGraphExecKernelNodeSetParams(executor->graph_exec, step->node, &params);
    }
    if (result != CUDA_SUCCESS) {
      ++executor->graph_rebuilds;
      return build_graph(executor);
    }
    ++executor->graph_node_updates;
  }
  return NULL;
}

/* ---- dynamic dims: computed at their largest -------------------------------------------- */

/* Kernel parameters and GEMM layouts are fixed at prepare, so a plan with dynamic dims runs
 * at its largest shapes: a run with smaller inputs copies them into the front of their
 * (largest-size) staging slots, zeroes the rest, runs the whole graph and copies back the
 * front of each output. That is exact when every dynamic dim is dim 0 (a dynamic batch, or
 * batch x sequence after a flatten) and no op mixes elements across dim 0: then the first
 * c x s rows of every tensor depend only on the first rows of the inputs. Checked here, op
 * by op; a plan that fails is EMBER_UNAVAILABLE (AUTO runs it on the CPU). The cost is
 * the largest batch's compute at every batch size. */
static bool dynamic_at(const ember_tensor_desc* t, uint32_t d) {
  return d < t->rank && t->dim_symbols[d] != 0;
}

static const char* dynamic_op_problem(const ember_plan* plan, const ember_op_desc* op) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  bool any = false;
  for (uint32_t k = 0; k < op->num_inputs + op->num_outputs; ++k) {
    const ember_tensor_desc* t = &plan->tensors[plan->operands[op->first_operand + k]];
    any = any || t->dynamic;
  }
  if (!any) return NULL;
  switch (op->opcode) {
    case EMBER_OP_REDUCE_SUM:
    case EMBER_OP_REDUCE_MEAN:
    case EMBER_OP_REDUCE_MAX:
      return (ember_plan_op_attr(plan, op, EMBER_ATTR_REDUCE_DIM_MASK) & 1) != 0 &&
                     dynamic_at(x, 0)
                 ? "reduces over the dynamic dim"
                 : NULL;
    case EMBER_OP_SOFTMAX:
      return ember_plan_op_attr(plan, op, EMBER_ATTR_SOFTMAX_DIM) == 0 ? "normalizes over the "
                                                                         "dynamic dim"
                                                                       : NULL;
    case EMBER_OP_LAYER_NORM:
      return ember_plan_op_attr(plan, op, EMBER_ATTR_LAYER_NORM_NORMALIZED_NDIM) ==
                     (int64_t)x->rank
                 ? "normalizes over the dynamic dim"
                 : NULL;
    case EMBER_OP_PERMUTE:
      return x->rank > 0 && ember_plan_op_attr(plan, op, 0) != 0 ? "moves the dynamic dim" : NULL;
    case EMBER_OP_SDPA:
    case EMBER_OP_MATMUL:
      /* Rank 2: dim 0 is a row (or key) dim, not a batch. */
      return x->rank <= 2 && ember_plan_op_input_tensor(plan, op, 1)->dynamic
                 ? "has a dynamic key or reduction dim"
                 : NULL;
    default:
      return NULL;
  }
}

static ember_status* check_dynamic_plan(const ember_plan* plan) {
  if (plan->num_symbols == 0) return NULL;
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    const ember_tensor_desc* tensor = &plan->tensors[t];
    for (uint32_t d = 1; d < tensor->rank; ++d) {
      if (tensor->dim_symbols[d] != 0) {
        return ember_status_make(EMBER_UNAVAILABLE, "cuda executor: tensor '%s' has a dynamic "
                                 "dim %" PRIu32 "; the CUDA executor runs dynamic dims only "
                                 "as dim 0 (a batch)",
                                 tensor->name, d);
      }
    }
  }
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    const char* problem = dynamic_op_problem(plan, &plan->ops[i]);
    if (problem != NULL) {
      return ember_status_make(EMBER_UNAVAILABLE, "cuda executor: op %" PRIu32 " (%s) %s, "
                               "which the CUDA executor does not run yet",
                               i, ember_opcode_name(plan->ops[i].opcode), problem);
    }
  }
  return NULL;
}

/* A binding smaller than its tensor's largest size (a dynamic tensor at a smaller batch)
 * goes through its staging slot, which holds the largest size. */
static void stage_partial(ember_cuda_executor* executor, uint32_t slot, size_t bound_bytes,
                          const ember_tensor_desc* tensor) {
  if (bound_bytes >= tensor->nbytes || executor->io_mode[slot] != IO_DIRECT) return;
  executor->io_address[slot] = executor->staging + executor->staging_offset[slot];
  executor->io_mode[slot] = bound_bytes == 0 ? IO_DIRECT : IO_STAGED_DEVICE;
}

/* Zeroes the part of an input's staging slot past the bound bytes, so the rows computed
 * past the batch read zeros (valid EMBEDDING indices, finite values), not a stale run's. */
static ember_status* clear_input_tail(ember_cuda_executor* executor, uint32_t slot,
                                      size_t bound_bytes, const ember_tensor_desc* tensor) {
  if (bound_bytes >= tensor->nbytes) return NULL;
  CU_CHECK(executor,
           executor->driver->cuMemsetD8Async(executor->staging + executor->staging_offset[slot] +
                                                 bound_bytes,
                                             0, tensor->nbytes - bound_bytes, executor->stream),
           "cuMemsetD8Async(input tail)");
  return NULL;
}

/* ---- binding -------------------------------------------------------------------------- */

/* Decides how slot `slot` is bound to `data` for this run and sets its address. */
static ember_status* bind_slot(ember_cuda_executor* executor, uint32_t slot, const void* data,
                               const ember_tensor_desc* tensor, const char* role,
                               uint32_t index) {
  const uint64_t staging = executor->staging + executor->staging_offset[slot];
  executor->io_address[slot] = staging;
  executor->io_mode[slot] = IO_STAGED_HOST;
  if (tensor->nbytes == 0 || data == NULL) {
    executor->io_mode[slot] = IO_DIRECT; /* nothing to move */
    return NULL;
  }
  const CUdeviceptr pointer = (CUdeviceptr)(uintptr_t)data;
  unsigned int memory_type = 0;
  int ordinal = -1;
  uint32_t managed = 0;
  CUpointer_attribute attributes[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[3] = {&memory_type, &ordinal, &managed};
  CUresult result = executor->driver->cuPointerGetAttributes(3, attributes, values, pointer);
  if (result != CUDA_SUCCESS) {
    /* Not a pointer the driver knows in a UVA context: plain host memory. */
    return NULL;
  }
  const bool device = managed != 0 || memory_type == CU_MEMORYTYPE_DEVICE;
  if (!device) return NULL; /* host memory, pinned or not */
  if (managed == 0 && ordinal != executor->device_ordinal) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_run: %s %" PRIu32 " ('%s') "
                             "is memory of CUDA device %d; this program runs on device %d",
                             role, index, tensor->name, ordinal, executor->device_ordinal);
  }
  if (pointer % executor->io_alignment[slot] != 0) {
    executor->io_mode[slot] = IO_STAGED_DEVICE;
    return NULL;
  }
  executor->io_mode[slot] = IO_DIRECT;
  executor->io_address[slot] = pointer;
  return NULL;
}

static ember_status* cuda_executor_run_bound(ember_cuda_executor* executor,
                                             const ember_tensor_binding* inputs,
                                             const ember_tensor_binding* outputs) {
  const ember_plan* plan = executor->plan;
  const ember_cuda_driver* driver = executor->driver;
  uint64_t to_device = 0, to_host = 0;
  for (uint32_t i = 0; i < plan->num_inputs; ++i) {
    const ember_tensor_desc* tensor = &plan->tensors[plan->inputs[i]];
    if (inputs[i].nbytes > tensor->nbytes) {
      return ember_status_make(EMBER_INVALID_ARGUMENT, "input %" PRIu32 " ('%s'): %zu bytes "
                               "bound, more than its largest size", i, tensor->name,
                               inputs[i].nbytes);
    }
    EMBER_RETURN_IF_ERROR(bind_slot(executor, i, inputs[i].data, tensor, "input", i));
    stage_partial(executor, i, inputs[i].nbytes, tensor);
  }
  for (uint32_t o = 0; o < plan->num_outputs; ++o) {
    const ember_tensor_desc* tensor = &plan->tensors[plan->outputs[o]];
    if (outputs[o].nbytes > tensor->nbytes) {
      return ember_status_make(EMBER_INVALID_ARGUMENT, "output %" PRIu32 " ('%s'): %zu bytes "
                               "bound, more than its largest size", o, tensor->name,
                               outputs[o].nbytes);
    }
    EMBER_RETURN_IF_ERROR(
        bind_slot(executor, plan->num_inputs + o, outputs[o].data, tensor, "output", o));
    stage_partial(executor, plan->num_inputs + o, outputs[o].nbytes, tensor);
  }
  for (uint32_t i = 0; i < plan->num_inputs; ++i) {
    const size_t nbytes = inputs[i].nbytes; /* the plan's, or less for a dynamic input */
    EMBER_RETURN_IF_ERROR(clear_input_tail(executor, i, nbytes, &plan->tensors[plan->inputs[i]]));
    if (executor->io_mode[i] == IO_STAGED_HOST) {
      CU_CHECK(executor,
               driver->cuMemcpyHtoDAsync(executor->io_address[i], inputs[i].data, nbytes,
                                         executor->stream),
               "cuMemcpyHtoDAsync(input)");
      to_device += nbytes;
    } else if (executor->io_mode[i] == IO_STAGED_DEVICE) {
      CU_CHECK(executor,
               driver->cuMemcpyDtoDAsync(executor->io_address[i],
                                         (CUdeviceptr)(uintptr_t)inputs[i].data, nbytes,
                                         executor->stream),
               "cuMemcpyDtoDAsync(input)");
    }
  }
  EMBER_RETURN_IF_ERROR(embedding_check_begin(executor));
  if (executor->num_steps > 0) {
    if (executor->use_graph) {
      EMBER_RETURN_IF_ERROR(update_graph(executor));
      CU_CHECK(executor, driver->cuGraphLaunch(executor->graph_exec, executor->stream),
               "cuGraphLaunch");
    } else {
      EMBER_RETURN_IF_ERROR(enqueue_eager(executor, executor->profile));
    }
  }
  for (uint32_t o = 0; o < plan->num_outputs; ++o) {
    const uint32_t slot = plan->num_inputs + o;
    const size_t nbytes = outputs[o].nbytes; /* the plan's, or less for a dynamic output */
    if (executor->io_mode[slot] == IO_STAGED_HOST) {
      CU_CHECK(executor,
               driver->cuMemcpyDtoHAsync(outputs[o].data, executor->io_address[slot], nbytes,
                                         executor->stream),
               "cuMemcpyDtoHAsync(output)");
      to_host += nbytes;
    } else if (executor->io_mode[slot] == IO_STAGED_DEVICE) {
      CU_CHECK(executor,
               driver->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)outputs[o].data,
                                         executor->io_address[slot], nbytes, executor->stream),
               "cuMemcpyDtoDAsync(output)");
    }
  }
  EMBER_RETURN_IF_ERROR(embedding_check_fetch(executor));
  CU_CHECK(executor, driver->cuStreamSynchronize(executor->stream), "cuStreamSynchronize(run)");
  if (executor->profile != NULL && executor->num_steps > 0) {
    EMBER_RETURN_IF_ERROR(ember_cuda_profile_collect(executor->profile));
  }
  executor->base.bytes_host_to_device += to_device;
  executor->base.bytes_device_to_host += to_host;
  return embedding_check_end(executor);
}

static ember_status* cuda_executor_run(ember_executor* base, const ember_tensor_binding* inputs,
                                       const ember_tensor_binding* outputs) {
  ember_cuda_executor* executor = (ember_cuda_executor*)base;
  const ember_cuda_driver* driver = executor->driver;
  CU_CHECK(executor, driver->cuCtxPushCurrent(executor->context), "cuCtxPushCurrent");
  ember_status* status = cuda_executor_run_bound(executor, inputs, outputs);
  CUcontext popped;
  driver->cuCtxPopCurrent(&popped);
  return ember_cuda_annotate(status, "cuda executor: run");
}

/* ---- prepare and destroy -------------------------------------------------------------- */

/* Whether any op of the plan may run on cuBLASLt on this executor: a MATMUL, a LINEAR
 * that is neither the gemv kernel nor the gemm_wgmma kernel with the activation after it
 * nor the narrow GEMM kernel,
 * an SDPA (not on the flash kernel) or CONV2D that passes the checks for running as GEMMs
 * (sdpa_takes_flash, sdpa_gemm_sizes, conv_gemm_sizes) and is not on an implicit-GEMM
 * kernel of this GPU (executor_conv_runs_igemm: the kernels are loaded by now, so the
 * wgmma kernel's smaller tile count applies on Hopper, and resnet18's layer4 at batch 64,
 * 100 tiles, does not load cuBLASLt for nothing). Loading cuBLASLt costs ~60 ms
 * (the dlopen), and its heuristics more, that a program of Ember's own kernels never
 * repays, so such a program does not load it. A superset is harmless (a load for
 * nothing); an op missed here fails prepare with EMBER_INTERNAL (cuda_gemm.c
 * check_loaded). readers: count_readers's. *out_op: the first such op. */
static bool executor_needs_cublaslt(const ember_cuda_executor* executor, const uint32_t* readers,
                                    uint32_t* out_op) {
  const ember_plan* plan = executor->plan;
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    const ember_op_desc* op = &plan->ops[i];
    uint64_t a, b, c;
    sdpa_flash_shape shape;
    const bool fuses = i + 1 < plan->num_ops && can_fuse_activation(executor, i, readers);
    const bool own_gemm = linear_takes_gemm_wgmma(executor, op, fuses ? &plan->ops[i + 1] : NULL) ||
                          linear_takes_gemm_narrow(executor, op, NULL);
    const bool needs =
        op->opcode == EMBER_OP_MATMUL ||
        (op->opcode == EMBER_OP_LINEAR && !linear_takes_gemv(plan, op) && !own_gemm) ||
        (op->opcode == EMBER_OP_SDPA && !sdpa_takes_flash(plan, op, &shape) &&
         sdpa_gemm_sizes(plan, op, &a, &b)) ||
        (op->opcode == EMBER_OP_CONV2D && !executor_conv_runs_igemm(executor, op) &&
         conv_gemm_sizes(plan, op, &a, &b, &c));
    if (needs) {
      *out_op = i;
      return true;
    }
  }
  return false;
}

static void report_profile(const ember_cuda_executor* executor) {
  if (executor->profile == NULL) return;
  ember_cuda_profile_step* steps = calloc(executor->num_steps + 1, sizeof *steps);
  if (steps == NULL) return;
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    steps[s].op_index = executor->steps[s].op_index;
    steps[s].is_gemm = executor->steps[s].is_gemm;
  }
  ember_cuda_profile_report(executor->profile, executor->plan, steps, stderr);
  free(steps);
}

static void cuda_executor_destroy(ember_executor* base) {
  ember_cuda_executor* executor = (ember_cuda_executor*)base;
  if (executor == NULL) return;
  const ember_cuda_driver* driver = executor->driver;
  if (driver != NULL && executor->context != NULL) {
    CUcontext popped;
    if (driver->cuCtxPushCurrent(executor->context) == CUDA_SUCCESS) {
      if (executor->stream != NULL) driver->cuStreamSynchronize(executor->stream);
      report_profile(executor);
      ember_cuda_profile_destroy(executor->profile);
      destroy_graph(executor);
      for (uint32_t g = 0; g < executor->num_gemms; ++g) {
        ember_cuda_gemm_release(executor->lt, &executor->gemms[g]);
      }
      if (executor->lt_handle != NULL) executor->lt->cublasLtDestroy(executor->lt_handle);
      if (executor->workspace != 0) driver->cuMemFree(executor->workspace);
      if (executor->embedding_error != 0) driver->cuMemFree(executor->embedding_error);
      if (executor->conv_col != 0) driver->cuMemFree(executor->conv_col);
      if (executor->conv_partial != 0) driver->cuMemFree(executor->conv_partial);
      if (executor->conv_weights != 0) driver->cuMemFree(executor->conv_weights);
      if (executor->conv_packed != 0) driver->cuMemFree(executor->conv_packed);
      if (executor->conv_out != 0) driver->cuMemFree(executor->conv_out);
      if (executor->gemm_chain_counts != 0) driver->cuMemFree(executor->gemm_chain_counts);
      for (uint32_t i = 0; executor->pool_counts != NULL && i < executor->plan->num_ops; ++i) {
        if (executor->pool_counts[i] != 0) driver->cuMemFree(executor->pool_counts[i]);
      }
      if (executor->sdpa_scratch != 0) driver->cuMemFree(executor->sdpa_scratch);
      if (executor->staging != 0) driver->cuMemFree(executor->staging);
      if (executor->constants != 0) driver->cuMemFree(executor->constants);
      if (executor->arena != 0) driver->cuMemFree(executor->arena);
      if (executor->kernels_loaded) ember_cuda_kernels_unload(driver, &executor->kernels);
      if (executor->stream != NULL) driver->cuStreamDestroy(executor->stream);
      driver->cuCtxPopCurrent(&popped);
    }
    driver->cuDevicePrimaryCtxRelease(executor->device);
  }
  free(executor->gemms);
  free(executor->steps);
  free(executor->conv_weight_offset);
  free(executor->conv_table_offset);
  free(executor->conv_residual);
  free(executor->channels_last);
  free(executor->conv_gemm_nhwc);
  free(executor->add_into_norm);
  free(executor->fuse_next);
  free(executor->pool_counts);
  free(executor->readers);
  free(executor->relocated);
  free(executor->folded);
  free(executor->sdpa_views);
  free(executor->staging_offset);
  free(executor->io_alignment);
  free(executor->io_address);
  free(executor->io_mode);
  free(executor);
}

static ember_status* allocate(ember_cuda_executor* executor, size_t bytes, const char* what,
                              CUdeviceptr* out) {
  *out = 0;
  if (bytes == 0) return NULL;
  CUresult result = executor->driver->cuMemAlloc(out, bytes);
  if (result != CUDA_SUCCESS) {
    *out = 0;
    char call[96];
    snprintf(call, sizeof call, "cuMemAlloc(%s, %zu bytes)", what, bytes);
    return ember_cuda_status(executor->driver, result, call);
  }
  return NULL;
}

static ember_status* allocate_memory(ember_cuda_executor* executor, uint64_t extra_arena) {
  const ember_plan* plan = executor->plan;
  size_t arena_size, constants_size;
  uint64_t arena_bytes;
  if (!ember_checked_add_u64(plan->arena_size, extra_arena, &arena_bytes) ||
      !ember_u64_to_size(arena_bytes, &arena_size) ||
      !ember_u64_to_size(plan->constants_size, &constants_size)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: the plan's memory does not "
                             "fit in size_t");
  }
  EMBER_RETURN_IF_ERROR(allocate(executor, arena_size, "arena", &executor->arena));
  EMBER_RETURN_IF_ERROR(allocate(executor, constants_size, "constants", &executor->constants));
  if (constants_size > 0) {
    CU_CHECK(executor,
             executor->driver->cuMemcpyHtoDAsync(executor->constants, plan->constants,
                                                 constants_size, executor->stream),
             "cuMemcpyHtoDAsync(constants)");
  }
  /* One staging block, a 256-byte aligned slot per input and output. */
  executor->num_io = plan->num_inputs + plan->num_outputs;
  const size_t slots = executor->num_io == 0 ? 1 : executor->num_io;
  executor->staging_offset = calloc(slots, sizeof(uint64_t));
  executor->io_alignment = calloc(slots, sizeof(uint32_t));
  executor->io_address = calloc(slots, sizeof(uint64_t));
  executor->io_mode = calloc(slots, sizeof(uint8_t));
  if (executor->staging_offset == NULL || executor->io_alignment == NULL ||
      executor->io_address == NULL || executor->io_mode == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  uint64_t total = 0;
  for (uint32_t slot = 0; slot < executor->num_io; ++slot) {
    const uint32_t t = slot < plan->num_inputs ? plan->inputs[slot]
                                               : plan->outputs[slot - plan->num_inputs];
    const ember_tensor_desc* tensor = &plan->tensors[t];
    uint64_t size;
    executor->staging_offset[slot] = total;
    executor->io_alignment[slot] = (uint32_t)ember_dtype_size(tensor->dtype);
    if (!ember_checked_align_u64(tensor->nbytes, EMBER_CUDA_ALIGNMENT, &size) ||
        !ember_checked_add_u64(total, size, &total)) {
      return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: staging size overflows");
    }
  }
  size_t staging_size;
  if (!ember_u64_to_size(total, &staging_size)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: staging size overflows");
  }
  EMBER_RETURN_IF_ERROR(allocate(executor, staging_size, "staging", &executor->staging));
  if (staging_size > 0) {
    /* Zeros, so the warm-up run reads defined values. */
    CU_CHECK(executor,
             executor->driver->cuMemsetD8Async(executor->staging, 0, staging_size,
                                               executor->stream),
             "cuMemsetD8Async(staging)");
  }
  for (uint32_t slot = 0; slot < executor->num_io; ++slot) {
    executor->io_address[slot] = executor->staging + executor->staging_offset[slot];
  }
  return NULL;
}

static ember_status* open_device(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  executor->device_ordinal = 0;
  CU_CHECK(executor, driver->cuDeviceGet(&executor->device, executor->device_ordinal),
           "cuDeviceGet(0)");
  int major = 0, minor = 0;
  CU_CHECK(executor,
           driver->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                        executor->device),
           "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  CU_CHECK(executor,
           driver->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                        executor->device),
           "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  CU_CHECK(executor,
           driver->cuDeviceGetAttribute(&executor->sm_count,
                                        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                        executor->device),
           "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  if (major < 8) {
    char name[128] = "unknown";
    driver->cuDeviceGetName(name, (int)sizeof name, executor->device);
    return ember_status_make(EMBER_UNAVAILABLE, "cuda executor: device 0 (%s) has compute "
                             "capability %d.%d; Ember's kernels need 8.0 or newer",
                             name, major, minor);
  }
  if (executor->sm_count < 1) executor->sm_count = 1;
  /* Programmatic dependent launch came with compute capability 9.0. */
  const ember_mode pdl = ember_settings_get()->cuda_pdl;
  executor->use_pdl = executor->use_graph && major >= 9 && pdl == EMBER_MODE_ON;
  executor->pdl_auto = executor->use_graph && major >= 9 && pdl == EMBER_MODE_AUTO;
  CU_CHECK(executor, driver->cuDevicePrimaryCtxRetain(&executor->context, executor->device),
           "cuDevicePrimaryCtxRetain");
  return NULL;
}

/* Loads cuBLASLt and creates the program's handle, if an op may run on it on this GPU
 * (executor_needs_cublaslt; readers: count_readers's). */
static ember_status* open_cublaslt(ember_cuda_executor* executor, const uint32_t* readers) {
  /* Which ops take cuBLASLt depends on the kernels this GPU loaded (gemm_wgmma), and on
   * whether they can take every GEMM of the program once gemm_wgmma takes any LINEAR it
   * can (tma_gemms_only): asked first. */
  uint32_t gemm_op = 0;
  executor->tma_gemms_only = true;
  executor->tma_gemms_only = !executor_needs_cublaslt(executor, readers, &gemm_op);
  if (!executor->tma_gemms_only && executor_needs_cublaslt(executor, readers, &gemm_op)) {
    ember_status* status = ember_cublaslt_library_get(&executor->lt);
    if (status != NULL) {
      executor->lt = NULL;
      const ember_op_desc* op = &executor->plan->ops[gemm_op];
      return ember_cuda_annotate(status, "cuda executor: op %" PRIu32 " (%s) runs on cuBLASLt",
                                 gemm_op, ember_opcode_name(op->opcode));
    }
  }
  ember_cuda_init_timer_mark(&executor->init_timer, "cuBLASLt library (if GEMMs, once)");
  if (executor->lt != NULL) {
    cublasStatus_t lt_result = executor->lt->cublasLtCreate(&executor->lt_handle);
    if (lt_result != CUBLAS_STATUS_SUCCESS) {
      executor->lt_handle = NULL;
      return ember_cublaslt_status(executor->lt, lt_result, "cublasLtCreate");
    }
  }
  ember_cuda_init_timer_mark(&executor->init_timer, "cublasLtCreate (if GEMMs)");
  return NULL;
}

static ember_status* prepare_in_context(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  ember_cuda_init_timer* timer = &executor->init_timer;
  CU_CHECK(executor, driver->cuStreamCreate(&executor->stream, CU_STREAM_NON_BLOCKING),
           "cuStreamCreate");
  EMBER_RETURN_IF_ERROR(ember_cuda_kernels_load(driver, &executor->kernels));
  executor->kernels_loaded = true;
  ember_cuda_init_timer_mark(timer, "stream, Ember's kernels");
  uint64_t extra_arena;
  executor->readers = count_readers(executor->plan);
  if (executor->readers == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  EMBER_RETURN_IF_ERROR(open_cublaslt(executor, executor->readers));
  EMBER_RETURN_IF_ERROR(plan_fusions(executor, executor->readers, &extra_arena));
  EMBER_RETURN_IF_ERROR(plan_channels_last(executor, &extra_arena));
  EMBER_RETURN_IF_ERROR(plan_sdpa_folds(executor, &extra_arena));
  EMBER_RETURN_IF_ERROR(allocate_memory(executor, extra_arena));
  EMBER_RETURN_IF_ERROR(allocate_embedding_error(executor));
  ember_cuda_init_timer_mark(timer, "memory, constants");
  EMBER_RETURN_IF_ERROR(prepare_conv_gemms(executor));
  EMBER_RETURN_IF_ERROR(prepare_sdpa_scratch(executor));
  ember_cuda_init_timer_mark(timer, "conv weights, SDPA scratch");
  size_t workspace_size = 0;
  EMBER_RETURN_IF_ERROR(build_steps(executor, &workspace_size));
  EMBER_RETURN_IF_ERROR(merge_gemm_chains(executor));
  /* Room for whichever candidate algorithm the search keeps. */
  for (uint32_t g = 0; g < executor->num_gemms; ++g) {
    const size_t most = ember_cuda_gemm_max_candidate_workspace(&executor->gemms[g]);
    if (most > workspace_size) workspace_size = most;
  }
  EMBER_RETURN_IF_ERROR(allocate(executor, workspace_size, "GEMM workspace", &executor->workspace));
  executor->workspace_size = workspace_size;
  ember_cuda_init_timer_mark(timer, "steps, cuBLASLt heuristics");
  EMBER_RETURN_IF_ERROR(choose_gemm_algorithms(executor));
  ember_cuda_init_timer_mark(timer, "GEMM algorithm search");
  /* One run now, on the staging buffers: kernels and cuBLASLt finish loading here rather
   * than inside a capture or a caller's first run, and a launch that cannot work fails
   * in create. */
  EMBER_RETURN_IF_ERROR(enqueue_eager(executor, NULL));
  CU_CHECK(executor, driver->cuStreamSynchronize(executor->stream), "cuStreamSynchronize(warm-up)");
  ember_cuda_init_timer_mark(timer, "warm-up run");
  if (ember_settings_get()->cuda_profile) {
    EMBER_RETURN_IF_ERROR(
        ember_cuda_profile_create(driver, executor->num_steps, &executor->profile));
  }
  if (executor->use_graph && executor->num_steps > 0) {
    EMBER_RETURN_IF_ERROR(executor->pdl_auto ? choose_pdl_by_timing(executor)
                                             : build_graph(executor));
  }
  ember_cuda_init_timer_mark(timer, "graph");
  return NULL;
}

static ember_status* cuda_executor_prepare(const ember_plan* plan,
                                           ember_executor** out_executor) {
  *out_executor = NULL;
  EMBER_RETURN_IF_ERROR(check_dynamic_plan(plan));
  ember_cuda_init_timer timer;
  ember_cuda_init_timer_start(&timer);
  const ember_cuda_driver* driver;
  EMBER_RETURN_IF_ERROR(ember_cuda_driver_get(&driver));

  ember_cuda_executor* executor = calloc(1, sizeof *executor);
  if (executor == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  executor->base.vtable = &ember_cuda_executor_vtable;
  executor->base.kind = EMBER_EXECUTOR_CUDA;
  executor->plan = plan;
  executor->driver = driver;
  executor->use_graph = ember_settings_get()->cuda_graphs && !ember_settings_get()->cuda_profile;
  executor->init_timer = timer;
  ember_cuda_init_timer_mark(&executor->init_timer, "driver (once)");

  ember_status* status = open_device(executor);
  ember_cuda_init_timer_mark(&executor->init_timer, "device, primary context");
  if (status == NULL) {
    CUresult result = driver->cuCtxPushCurrent(executor->context);
    if (result != CUDA_SUCCESS) {
      status = ember_cuda_status(driver, result, "cuCtxPushCurrent");
    } else {
      status = prepare_in_context(executor);
      CUcontext popped;
      driver->cuCtxPopCurrent(&popped);
    }
  }
  if (status != NULL) {
    cuda_executor_destroy(&executor->base);
    return status;
  }
  if (ember_settings_get()->cuda_profile) ember_cuda_init_timer_report(&executor->init_timer, stderr);
  *out_executor = &executor->base;
  return NULL;
}

void ember_cuda_executor_get_info(const ember_executor* base,
                                  ember_cuda_executor_info* out_info) {
  const ember_cuda_executor* executor = (const ember_cuda_executor*)base;
  memset(out_info, 0, sizeof *out_info);
  out_info->steps = executor->num_steps;
  out_info->gemms = executor->num_gemms;
  for (uint32_t g = 0; g < executor->num_gemms; ++g) {
    const ember_cuda_gemm* gemm = &executor->gemms[g];
    if (gemm->bias_fused) ++out_info->fused_biases;
    if (gemm->activation_fused != EMBER_CUDA_GEMM_ACT_NONE) ++out_info->fused_activations;
    if (gemm->needs_bias_act) ++out_info->bias_act_kernels;
  }
  out_info->relocated_tensors = executor->relocations;
  out_info->conv_igemms = executor->conv_igemms;
  out_info->conv_wgmmas = executor->conv_wgmmas;
  out_info->conv_folds = executor->conv_folds;
  out_info->conv_fold_rows = executor->conv_fold_rows;
  out_info->conv_halos = executor->conv_halos;
  out_info->conv_halo_units = executor->conv_halo_units;
  out_info->conv_halo_stacked = executor->conv_halo_stacked;
  out_info->conv_halo_kernels = executor->conv_halo_kernels;
  out_info->conv_splits = executor->conv_splits;
  out_info->conv_split_k = uses_conv_split_k(executor);
  out_info->reduce_columns = executor->reduce_columns;
  out_info->reduce_column_vectors = executor->reduce_column_vectors;
  out_info->conv_packs = executor->conv_packs;
  out_info->conv_gemms_nhwc = executor->conv_gemms_nhwc;
  out_info->norm_adds = executor->norm_adds;
  out_info->channels_last_tensors = executor->channels_last_tensors;
  out_info->pools_channels_last = executor->pools_channels_last;
  out_info->pools_shared_rows = executor->pools_shared_rows;
  out_info->pools_in_conv = executor->pools_in_conv;
  out_info->conv_wgmma = uses_conv_wgmma(executor);
  out_info->conv_halo = uses_conv_halo(executor);
  out_info->gemm_wgmmas = executor->gemm_wgmmas;
  out_info->gemm_wgmmas_small = executor->gemm_wgmmas_small;
  out_info->gemm_wgmma = uses_gemm_wgmma(executor);
  out_info->gemm_narrows = executor->gemm_narrows;
  out_info->gemm_narrow = uses_gemm_narrow(executor);
  out_info->gemm_chains = executor->gemm_chains;
  out_info->gemm_chain_layers = executor->gemm_chain_layers;
  out_info->fused_residuals = executor->conv_residuals;
  uint32_t last_conv_gemm = UINT32_MAX; /* a conv's chunks are consecutive steps */
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    const ember_cuda_step* step = &executor->steps[s];
    if (step->is_gemm && executor->plan->ops[step->op_index].opcode == EMBER_OP_CONV2D) {
      ++out_info->conv_gemm_chunks;
      if (step->op_index != last_conv_gemm) ++out_info->conv_gemms;
      if (step->fixed[GEMM_D] != 0) ++out_info->conv_gemms_flat;
      last_conv_gemm = step->op_index;
    }
    const ember_op_desc* op = &executor->plan->ops[step->op_index];
    if (!step->is_gemm && linear_takes_gemv(executor->plan, op)) {
      ++out_info->gemv_kernels;
      if (executor->fuse_next[step->op_index]) ++out_info->fused_activations;
    }
    if (step->tensor_maps == TENSOR_MAPS_LINEAR && executor->fuse_next[step->op_index]) {
      ++out_info->fused_activations;
    }
    if (step->tensor_maps == TENSOR_MAPS_CHAIN) {
      ember_k_gemm_chain_params p;
      memcpy(&p, step->params, sizeof p);
      for (int32_t l = 0; l < p.layers; ++l) {
        if (p.layer[l].linear.act != EMBER_K_UNARY_IDENTITY) ++out_info->fused_activations;
      }
    }
    if (step->beside) ++out_info->beside_steps; /* set by build_graph only */
    if (is_binary(op->opcode) && executor->fuse_next[step->op_index]) {
      ++out_info->fused_activations;
    }
    /* A ReLU in the implicit-GEMM conv's epilogue, directly or after its residual, counted
     * at the conv's GEMM step, not at its input's pack. */
    if (op->opcode == EMBER_OP_CONV2D && executor->conv_table_offset[step->op_index] != UINT64_MAX &&
        step->shared_bytes != 0 && !is_conv_input_pack(executor, step)) {
      const uint32_t after = step->op_index + (executor->conv_residual[step->op_index] ? 1u : 0u);
      if (executor->fuse_next[after]) ++out_info->fused_activations;
    }
  }
  out_info->cublaslt = executor->lt_handle != NULL;
  for (uint32_t g = 0; g < executor->num_gemms; ++g) {
    out_info->heuristic_cache_hits += executor->gemms[g].heuristic_hits;
    out_info->heuristic_cache_misses += executor->gemms[g].heuristic_misses;
  }
  out_info->gemm_candidates_timed = executor->gemm_candidates_timed;
  out_info->sdpa_flash = executor->sdpa_flash;
  out_info->folded_layout_ops = executor->folded_layout_ops;
  out_info->graph = executor->use_graph;
  out_info->pdl = executor->use_pdl;
  out_info->programmatic_edges = executor->programmatic_edges;
  out_info->pdl_timed = executor->pdl_timed;
  out_info->pdl_off_us = executor->pdl_off_us;
  out_info->pdl_on_us = executor->pdl_on_us;
  out_info->graph_node_updates = executor->graph_node_updates;
  out_info->graph_rebuilds = executor->graph_rebuilds;
  out_info->workspace_bytes = executor->workspace_size;
}

const ember_executor_vtable ember_cuda_executor_vtable = {
    .prepare = cuda_executor_prepare,
    .run = cuda_executor_run,
    .destroy = cuda_executor_destroy,
};
