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
#include "kernel_params.h"
#include "settings.h"

/* Every device allocation and staging slot starts on this boundary. */
#define EMBER_CUDA_ALIGNMENT 256u
/* The most GEMM workspace a heuristic may ask for (what NVIDIA suggests for Hopper). */
#define EMBER_CUDA_MAX_WORKSPACE (32u << 20)
#define EMBER_CUDA_MAX_PARAMS 256u
#define EMBER_CUDA_MAX_REFS 4u

/* A tensor a step reads or writes: for a kernel step, where in its parameter struct the
 * tensor's device address goes; for a GEMM step, which of A, B, bias, D it is. */
typedef struct ember_cuda_ref {
  uint32_t tensor;
  uint32_t slot;
} ember_cuda_ref;

enum { GEMM_A = 0, GEMM_B = 1, GEMM_BIAS = 2, GEMM_D = 3 };

typedef struct ember_cuda_step {
  bool is_gemm;
  uint32_t op_index;
  /* Kernel steps. args[0] points at params: the kernel's one parameter. */
  CUfunction function;
  unsigned int grid;
  alignas(16) uint8_t params[EMBER_CUDA_MAX_PARAMS];
  void* args[1];
  /* GEMM steps: index into executor->gemms. */
  uint32_t gemm;
  uint32_t num_refs;
  ember_cuda_ref refs[EMBER_CUDA_MAX_REFS];
  /* Whether a ref is an input or output (whose address can change between runs), and
   * the addresses the graph holds for each ref. */
  bool touches_io;
  uint64_t baked[EMBER_CUDA_MAX_REFS];
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
  const ember_plan* plan;
  const ember_cuda_driver* driver;
  const ember_cublaslt_library* lt;
  CUdevice device;
  int device_ordinal;
  int sm_count;
  CUcontext context; /* device's primary context, retained */
  CUstream stream;
  bool kernels_loaded;
  ember_cuda_kernels kernels;
  cublasLtHandle_t lt_handle;

  CUdeviceptr arena;
  CUdeviceptr constants;
  CUdeviceptr staging;
  CUdeviceptr workspace;
  size_t workspace_size;

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

static unsigned int grid_for_elements(const ember_cuda_executor* executor, uint64_t count) {
  uint64_t blocks = (count + EMBER_K_BLOCK - 1) / EMBER_K_BLOCK;
  const uint64_t cap = (uint64_t)executor->sm_count * 8u;
  if (blocks > cap) blocks = cap;
  return blocks == 0 ? 1u : (unsigned int)blocks;
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

static void add_ref(ember_cuda_executor* executor, ember_cuda_step* step, uint32_t tensor,
                    uint32_t slot) {
  step->refs[step->num_refs].tensor = tensor;
  step->refs[step->num_refs].slot = slot;
  ++step->num_refs;
  if (is_io(&executor->plan->tensors[tensor])) step->touches_io = true;
}

static ember_cuda_step* add_kernel_step(ember_cuda_executor* executor, uint32_t op_index,
                                        uint32_t kernel, unsigned int grid, const void* params,
                                        size_t params_size) {
  ember_cuda_step* step = add_step(executor, op_index);
  step->function = executor->kernels.functions[kernel];
  step->grid = grid;
  memcpy(step->params, params, params_size);
  step->args[0] = step->params;
  return step;
}

/* Writes the current addresses of a kernel step's tensors into its parameter struct. */
static void patch_kernel_params(const ember_cuda_executor* executor, ember_cuda_step* step) {
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    const uint64_t address = tensor_address(executor, step->refs[r].tensor);
    memcpy(step->params + step->refs[r].slot, &address, sizeof address);
  }
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
    default: return EMBER_K_UNARY_SILU;
  }
}

static void build_unary(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  ember_k_unary_params p = {0};
  p.count = y->numel;
  p.op = (int32_t)unary_op_of(plan, op);
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_UNARY + ember_cuda_dtype_index(y->dtype),
      grid_for_elements(executor, y->numel), &p, sizeof p);
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

static void build_binary(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* a = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* b = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  int64_t as[EMBER_MAX_RANK], bs[EMBER_MAX_RANK];
  broadcast_strides(a, y->rank, as);
  broadcast_strides(b, y->rank, bs);
  ember_k_binary_params p = {0};
  p.count = y->numel;
  p.op = (int32_t)(op->opcode - EMBER_OP_ADD); /* ADD SUB MUL DIV are consecutive */
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
      grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_binary_params, a));
  add_ref(executor, step, ember_plan_op_input(plan, op, 1), offsetof(ember_k_binary_params, b));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_binary_params, y));
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

static void build_permute(ember_cuda_executor* executor, uint32_t i) {
  const ember_plan* plan = executor->plan;
  const ember_op_desc* op = &plan->ops[i];
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  if (y->numel == 0) return;
  int64_t x_strides[EMBER_MAX_RANK];
  int64_t stride = 1;
  for (uint32_t d = x->rank; d-- > 0;) {
    x_strides[d] = stride;
    stride *= x->dims[d];
  }
  ember_k_permute_params p = {0};
  p.count = y->numel;
  uint32_t rank = 0;
  for (uint32_t d = 0; d < y->rank; ++d) {
    const int64_t s = x_strides[ember_plan_op_attr(plan, op, d)];
    if (y->dims[d] == 1) continue;
    if (rank > 0 && p.x_strides[rank - 1] == s * y->dims[d]) {
      p.dims[rank - 1] *= y->dims[d];
      p.x_strides[rank - 1] = s;
      continue;
    }
    p.dims[rank] = y->dims[d];
    p.x_strides[rank] = s;
    ++rank;
  }
  if (rank == 0 || (rank == 1 && p.x_strides[0] == 1)) {
    build_copy(executor, i); /* the permutation moves nothing: a plain copy */
    return;
  }
  p.rank = rank;
  const uint32_t kernel = ember_dtype_size(y->dtype) == 2 ? EMBER_CUDA_KERNEL_PERMUTE_2
                                                          : EMBER_CUDA_KERNEL_PERMUTE_4;
  ember_cuda_step* step = add_kernel_step(executor, i, kernel,
                                          grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0), offsetof(ember_k_permute_params, x));
  add_ref(executor, step, ember_plan_op_output(plan, op, 0), offsetof(ember_k_permute_params, y));
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
  ember_cuda_step* step = add_kernel_step(
      executor, i, EMBER_CUDA_KERNEL_LAYER_NORM + ember_cuda_dtype_index(y->dtype),
      grid_for_rows(executor, (uint64_t)p.rows), &p, sizeof p);
  add_ref(executor, step, ember_plan_op_input(plan, op, 0),
          offsetof(ember_k_layer_norm_params, x));
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
      grid_for_elements(executor, y->numel), &p, sizeof p);
  add_ref(executor, step, y_tensor, offsetof(ember_k_bias_act_params, y));
  if (p.has_bias) add_ref(executor, step, bias_tensor, offsetof(ember_k_bias_act_params, bias));
}

/* Whether op i (LINEAR or MATMUL) can take op i + 1 (RELU, or GELU in the tanh form,
 * which is what CUBLASLT_EPILOGUE_GELU computes) into its epilogue: the activation reads
 * only the GEMM's output, and nothing else reads that. */
static bool can_fuse_activation(const ember_plan* plan, uint32_t i, const uint32_t* readers) {
  if (i + 1 >= plan->num_ops) return false;
  const ember_op_desc* op = &plan->ops[i];
  const ember_op_desc* next = &plan->ops[i + 1];
  if (op->opcode != EMBER_OP_LINEAR && op->opcode != EMBER_OP_MATMUL) return false;
  if (next->opcode != EMBER_OP_RELU &&
      !(next->opcode == EMBER_OP_GELU &&
        ember_plan_op_attr(plan, next, EMBER_ATTR_GELU_APPROXIMATE) == 1)) {
    return false;
  }
  const uint32_t t = ember_plan_op_output(plan, op, 0);
  if (ember_plan_op_input(plan, next, 0) != t) return false;
  if (plan->tensors[t].storage != EMBER_STORAGE_INTERMEDIATE || readers[t] != 1) return false;
  /* A GEMM with nothing to compute (no elements, or K == 0) is not a cuBLASLt call. */
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  return plan->tensors[t].numel != 0 && x->dims[x->rank - 1] != 0;
}

/* Decides, before memory is allocated, which GEMMs take the next op into their epilogue
 * (fuse_next), and which activation outputs move to a slot of their own past the plan's
 * arena (relocated). A fused GEMM writes the activation's output while it still reads
 * its inputs, earlier than the plan says that output is written; the memory plan may
 * have put that output on the bytes of an input whose life ends at the GEMM (an MLP's
 * hidden layers always are), so such an output gets bytes no other tensor uses.
 * *out_extra is the bytes the arena needs past plan->arena_size (rounded up). */
static ember_status* plan_fusions(ember_cuda_executor* executor, uint64_t* out_extra) {
  const ember_plan* plan = executor->plan;
  *out_extra = 0;
  executor->fuse_next = calloc(plan->num_ops, sizeof(bool));
  executor->relocated = malloc(plan->num_tensors * sizeof(uint64_t));
  uint32_t* readers = calloc(plan->num_tensors, sizeof(uint32_t));
  if (executor->fuse_next == NULL || executor->relocated == NULL || readers == NULL) {
    free(readers);
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  for (uint32_t t = 0; t < plan->num_tensors; ++t) executor->relocated[t] = UINT64_MAX;
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    for (uint32_t k = 0; k < plan->ops[i].num_inputs; ++k) {
      ++readers[ember_plan_op_input(plan, &plan->ops[i], k)];
    }
  }
  uint64_t base, extra = 0;
  if (!ember_checked_align_u64(plan->arena_size, EMBER_CUDA_ALIGNMENT, &base)) base = UINT64_MAX;
  ember_status* status = NULL;
  for (uint32_t i = 0; i + 1 < plan->num_ops && status == NULL; ++i) {
    if (!can_fuse_activation(plan, i, readers)) continue;
    executor->fuse_next[i] = true;
    const ember_op_desc* op = &plan->ops[i];
    const uint32_t y_index = ember_plan_op_output(plan, &plan->ops[i + 1], 0);
    const ember_tensor_desc* y = &plan->tensors[y_index];
    bool overlaps = false;
    for (uint32_t k = 0; k < op->num_inputs && y->storage == EMBER_STORAGE_INTERMEDIATE; ++k) {
      const ember_tensor_desc* in = ember_plan_op_input_tensor(plan, op, k);
      if (in->storage == EMBER_STORAGE_INTERMEDIATE &&
          ember_ranges_overlap(in->data_offset, in->nbytes, y->data_offset, y->nbytes)) {
        overlaps = true;
      }
    }
    if (overlaps) {
      uint64_t size, offset, end;
      if (!ember_checked_align_u64(y->nbytes, EMBER_CUDA_ALIGNMENT, &size) ||
          !ember_checked_add_u64(base, extra, &offset) ||
          !ember_checked_add_u64(offset, size, &end)) {
        status = ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: arena size overflows");
        break;
      }
      executor->relocated[y_index] = offset;
      extra += size;
      ++executor->relocations;
    }
    ++i; /* the activation is taken */
  }
  free(readers);
  if (status == NULL && extra > 0) *out_extra = (base - plan->arena_size) + extra;
  return status;
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
  ember_cuda_gemm_request request = {
      .plan = plan,
      .op_index = i,
      .fused_op_index = fused,
      .address = tensor_address_callback,
      .address_context = executor,
      .max_workspace = EMBER_CUDA_MAX_WORKSPACE,
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
    const ember_tensor_desc* tensor = &plan->tensors[step->refs[r].tensor];
    if (is_io(tensor)) executor->io_alignment[io_slot(executor, tensor)] = EMBER_CUDA_GEMM_IO_ALIGNMENT;
  }
  if (gemm->needs_bias_act) {
    add_bias_act_step(executor, i, gemm->d_tensor,
                      gemm->bias_fused ? EMBER_PLAN_NO_INDEX : gemm->bias_tensor,
                      gemm->bias_act_activation, false);
  }
  return NULL;
}

static ember_status* build_steps(ember_cuda_executor* executor, size_t* out_workspace) {
  const ember_plan* plan = executor->plan;
  *out_workspace = 0;
  /* At most two steps per op (a GEMM and its bias_act). */
  size_t steps_bytes;
  if (!ember_u64_to_size((uint64_t)plan->num_ops * 2u * sizeof(ember_cuda_step), &steps_bytes)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: too many ops");
  }
  executor->steps = calloc((size_t)plan->num_ops * 2u, sizeof(ember_cuda_step));
  executor->gemms = calloc(plan->num_ops, sizeof(ember_cuda_gemm));
  if (executor->steps == NULL || executor->gemms == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: cannot allocate the step "
                             "table (%" PRIu32 " ops)", plan->num_ops);
  }
  ember_status* status = NULL;
  for (uint32_t i = 0; i < plan->num_ops && status == NULL; ++i) {
    const ember_op_desc* op = &plan->ops[i];
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
      case EMBER_OP_SILU: build_unary(executor, i); break;
      case EMBER_OP_ADD:
      case EMBER_OP_SUB:
      case EMBER_OP_MUL:
      case EMBER_OP_DIV: build_binary(executor, i); break;
      case EMBER_OP_RESHAPE:
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
  return status;
}

/* ---- running steps -------------------------------------------------------------------- */

static ember_status* enqueue_gemm_step(ember_cuda_executor* executor, ember_cuda_step* step) {
  uint64_t addresses[4] = {0, 0, 0, 0};
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    addresses[step->refs[r].slot] = tensor_address(executor, step->refs[r].tensor);
    step->baked[r] = addresses[step->refs[r].slot];
  }
  return ember_cuda_gemm_enqueue(executor->lt, executor->lt_handle,
                                 &executor->gemms[step->gemm], addresses[GEMM_A],
                                 addresses[GEMM_B], addresses[GEMM_BIAS], addresses[GEMM_D],
                                 executor->workspace, executor->stream);
}

static void bake_kernel_step(ember_cuda_executor* executor, ember_cuda_step* step) {
  patch_kernel_params(executor, step);
  for (uint32_t r = 0; r < step->num_refs; ++r) {
    step->baked[r] = tensor_address(executor, step->refs[r].tensor);
  }
}

static CUDA_KERNEL_NODE_PARAMS kernel_node_params(ember_cuda_step* step) {
  CUDA_KERNEL_NODE_PARAMS params;
  memset(&params, 0, sizeof params);
  params.func = step->function;
  params.gridDimX = step->grid;
  params.gridDimY = 1;
  params.gridDimZ = 1;
  params.blockDimX = EMBER_K_BLOCK;
  params.blockDimY = 1;
  params.blockDimZ = 1;
  params.sharedMemBytes = 0;
  params.kernelParams = step->args;
  return params;
}

/* Every step launched on the stream, in order (no graph). */
static ember_status* enqueue_eager(ember_cuda_executor* executor) {
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    ember_cuda_step* step = &executor->steps[s];
    if (step->is_gemm) {
      EMBER_RETURN_IF_ERROR(ember_cuda_annotate(enqueue_gemm_step(executor, step),
                                                  "op %" PRIu32, step->op_index));
    } else {
      bake_kernel_step(executor, step);
      CU_CHECK(executor,
               executor->driver->cuLaunchKernel(step->function, step->grid, 1, 1,
                                                EMBER_K_BLOCK, 1, 1, 0, executor->stream,
                                                step->args, NULL),
               "cuLaunchKernel");
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

static void destroy_graph(ember_cuda_executor* executor) {
  if (executor->graph_exec != NULL) executor->driver->cuGraphExecDestroy(executor->graph_exec);
  if (executor->graph != NULL) executor->driver->cuGraphDestroy(executor->graph);
  executor->graph_exec = NULL;
  executor->graph = NULL;
}

/* One graph of all steps, in a chain, with the current addresses; then instantiated. */
static ember_status* build_graph(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  destroy_graph(executor);
  CU_CHECK(executor, driver->cuGraphCreate(&executor->graph, 0), "cuGraphCreate");
  CUgraphNode previous = NULL;
  for (uint32_t s = 0; s < executor->num_steps; ++s) {
    ember_cuda_step* step = &executor->steps[s];
    const size_t num_dependencies = previous != NULL ? 1 : 0;
    if (step->is_gemm) {
      CUgraph child;
      EMBER_RETURN_IF_ERROR(capture_gemm(executor, step, &child));
      CUresult result = driver->cuGraphAddChildGraphNode(&step->node, executor->graph,
                                                         &previous, num_dependencies, child);
      driver->cuGraphDestroy(child); /* the node holds a clone */
      CU_CHECK(executor, result, "cuGraphAddChildGraphNode");
    } else {
      bake_kernel_step(executor, step);
      CUDA_KERNEL_NODE_PARAMS params = kernel_node_params(step);
      CU_CHECK(executor,
               driver->cuGraphAddKernelNode(&step->node, executor->graph, &previous,
                                            num_dependencies, &params),
               "cuGraphAddKernelNode");
    }
    previous = step->node;
  }
  CU_CHECK(executor, driver->cuGraphInstantiateWithFlags(&executor->graph_exec, executor->graph, 0),
           "cuGraphInstantiate");
  return NULL;
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
      bake_kernel_step(executor, step);
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
    EMBER_RETURN_IF_ERROR(bind_slot(executor, i, inputs[i].data, tensor, "input", i));
  }
  for (uint32_t o = 0; o < plan->num_outputs; ++o) {
    const ember_tensor_desc* tensor = &plan->tensors[plan->outputs[o]];
    EMBER_RETURN_IF_ERROR(
        bind_slot(executor, plan->num_inputs + o, outputs[o].data, tensor, "output", o));
  }
  for (uint32_t i = 0; i < plan->num_inputs; ++i) {
    const size_t nbytes = plan->tensors[plan->inputs[i]].nbytes;
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
  if (executor->num_steps > 0) {
    if (executor->use_graph) {
      EMBER_RETURN_IF_ERROR(update_graph(executor));
      CU_CHECK(executor, driver->cuGraphLaunch(executor->graph_exec, executor->stream),
               "cuGraphLaunch");
    } else {
      EMBER_RETURN_IF_ERROR(enqueue_eager(executor));
    }
  }
  for (uint32_t o = 0; o < plan->num_outputs; ++o) {
    const uint32_t slot = plan->num_inputs + o;
    const size_t nbytes = plan->tensors[plan->outputs[o]].nbytes;
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
  CU_CHECK(executor, driver->cuStreamSynchronize(executor->stream), "cuStreamSynchronize(run)");
  executor->base.bytes_host_to_device += to_device;
  executor->base.bytes_device_to_host += to_host;
  return NULL;
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

static void cuda_executor_destroy(ember_executor* base) {
  ember_cuda_executor* executor = (ember_cuda_executor*)base;
  if (executor == NULL) return;
  const ember_cuda_driver* driver = executor->driver;
  if (driver != NULL && executor->context != NULL) {
    CUcontext popped;
    if (driver->cuCtxPushCurrent(executor->context) == CUDA_SUCCESS) {
      if (executor->stream != NULL) driver->cuStreamSynchronize(executor->stream);
      destroy_graph(executor);
      for (uint32_t g = 0; g < executor->num_gemms; ++g) {
        ember_cuda_gemm_release(executor->lt, &executor->gemms[g]);
      }
      if (executor->lt_handle != NULL) executor->lt->cublasLtDestroy(executor->lt_handle);
      if (executor->workspace != 0) driver->cuMemFree(executor->workspace);
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
  free(executor->fuse_next);
  free(executor->relocated);
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
  CU_CHECK(executor, driver->cuDevicePrimaryCtxRetain(&executor->context, executor->device),
           "cuDevicePrimaryCtxRetain");
  return NULL;
}

static ember_status* prepare_in_context(ember_cuda_executor* executor) {
  const ember_cuda_driver* driver = executor->driver;
  CU_CHECK(executor, driver->cuStreamCreate(&executor->stream, CU_STREAM_NON_BLOCKING),
           "cuStreamCreate");
  EMBER_RETURN_IF_ERROR(ember_cuda_kernels_load(driver, &executor->kernels));
  executor->kernels_loaded = true;
  cublasStatus_t lt_result = executor->lt->cublasLtCreate(&executor->lt_handle);
  if (lt_result != CUBLAS_STATUS_SUCCESS) {
    executor->lt_handle = NULL;
    return ember_cublaslt_status(executor->lt, lt_result, "cublasLtCreate");
  }
  uint64_t extra_arena;
  EMBER_RETURN_IF_ERROR(plan_fusions(executor, &extra_arena));
  EMBER_RETURN_IF_ERROR(allocate_memory(executor, extra_arena));
  size_t workspace_size = 0;
  EMBER_RETURN_IF_ERROR(build_steps(executor, &workspace_size));
  EMBER_RETURN_IF_ERROR(allocate(executor, workspace_size, "GEMM workspace", &executor->workspace));
  executor->workspace_size = workspace_size;
  /* One run now, on the staging buffers: kernels and cuBLASLt finish loading here rather
   * than inside a capture or a caller's first run, and a launch that cannot work fails
   * in create. */
  EMBER_RETURN_IF_ERROR(enqueue_eager(executor));
  CU_CHECK(executor, driver->cuStreamSynchronize(executor->stream), "cuStreamSynchronize(warm-up)");
  if (executor->use_graph && executor->num_steps > 0) EMBER_RETURN_IF_ERROR(build_graph(executor));
  return NULL;
}

static ember_status* cuda_executor_prepare(const ember_plan* plan,
                                           ember_executor** out_executor) {
  *out_executor = NULL;
  const ember_cuda_driver* driver;
  EMBER_RETURN_IF_ERROR(ember_cuda_driver_get(&driver));
  const ember_cublaslt_library* lt;
  EMBER_RETURN_IF_ERROR(ember_cublaslt_library_get(&lt));

  ember_cuda_executor* executor = calloc(1, sizeof *executor);
  if (executor == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cuda executor: out of memory");
  }
  executor->base.vtable = &ember_cuda_executor_vtable;
  executor->base.kind = EMBER_EXECUTOR_CUDA;
  executor->plan = plan;
  executor->driver = driver;
  executor->lt = lt;
  executor->use_graph = ember_settings_get()->cuda_graphs;

  ember_status* status = open_device(executor);
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
  out_info->graph = executor->use_graph;
  out_info->graph_node_updates = executor->graph_node_updates;
  out_info->graph_rebuilds = executor->graph_rebuilds;
  out_info->workspace_bytes = executor->workspace_size;
}

const ember_executor_vtable ember_cuda_executor_vtable = {
    .prepare = cuda_executor_prepare,
    .run = cuda_executor_run,
    .destroy = cuda_executor_destroy,
};
