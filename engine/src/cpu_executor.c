/* The CPU reference executor: runs a verified plan op by op with the kernels of
 * cpu_ops_*.c. prepare allocates the arena, the per-tensor pointer table and the kernels'
 * scratch once; run only fills in the caller's input and output pointers (and, for a plan
 * with dynamic dims, this run's shapes) and calls kernels. */
#include <inttypes.h>
#include <stdlib.h>

#include "checked_math.h"
#include "cpu_ops.h"
#include "executor.h"

typedef struct ember_cpu_executor {
  ember_executor base;
  const ember_plan* plan;
  uint8_t* arena; /* plan->arena_size bytes, 64-byte aligned; NULL when the size is 0 */
  /* Memory of each tensor by index: constants and intermediates fixed at prepare, inputs
   * and outputs set at the start of each run. Inputs are only ever read. */
  void** tensor_data;
  /* The tensor table kernels read: plan->tensors for a static plan; for a plan with
   * symbols, an owned copy whose dynamic dims are set for each run. */
  const ember_tensor_desc* tensors;
  ember_tensor_desc* run_tensors;
  int64_t* symbol_values; /* plan->num_symbols entries */
  double* scratch;        /* see ember_cpu_op_args.scratch */
} ember_cpu_executor;

static void cpu_executor_destroy(ember_executor* base) {
  ember_cpu_executor* executor = (ember_cpu_executor*)base;
  if (executor == NULL) return;
  free(executor->arena);
  free(executor->tensor_data);
  free(executor->run_tensors);
  free(executor->symbol_values);
  free(executor->scratch);
  free(executor);
}

/* Doubles of scratch the plan's ops need at their largest shapes. */
static size_t scratch_size(const ember_plan* plan) {
  size_t size = 0;
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    const ember_op_desc* op = &plan->ops[i];
    if (op->opcode != EMBER_OP_SDPA) continue;
    const ember_tensor_desc* k = ember_plan_op_input_tensor(plan, op, 1);
    const ember_tensor_desc* v = ember_plan_op_input_tensor(plan, op, 2);
    /* S + Ev: each is a dim of a tensor that fits in memory, so the sum fits. */
    const size_t need = (size_t)k->dims[k->rank - 2] + (size_t)v->dims[v->rank - 1];
    if (need > size) size = need;
  }
  return size;
}

static ember_status* cpu_executor_allocate(const ember_plan* plan,
                                           ember_cpu_executor* executor) {
  if (plan->arena_size != 0) {
    uint64_t rounded;
    size_t size;
    if (!ember_checked_align_u64(plan->arena_size, EMBER_DATA_ALIGNMENT, &rounded) ||
        !ember_u64_to_size(rounded, &size) ||
        (executor->arena = aligned_alloc(EMBER_DATA_ALIGNMENT, size)) == NULL) {
      return ember_status_make(EMBER_OUT_OF_MEMORY, "cpu executor: cannot allocate the arena "
                               "(arena_size %" PRIu64 " bytes); free host memory, or export "
                               "the model at a smaller batch or dynamic bound",
                               plan->arena_size);
    }
  }
  executor->tensor_data = calloc(plan->num_tensors, sizeof(void*));
  if (executor->tensor_data == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cpu executor: cannot allocate the tensor "
                             "table (%" PRIu32 " tensors)", plan->num_tensors);
  }
  executor->tensors = plan->tensors;
  if (plan->num_symbols > 0) {
    executor->run_tensors = calloc(plan->num_tensors, sizeof(ember_tensor_desc));
    executor->symbol_values = calloc(plan->num_symbols, sizeof(int64_t));
    if (executor->run_tensors == NULL || executor->symbol_values == NULL) {
      return ember_status_make(EMBER_OUT_OF_MEMORY, "cpu executor: cannot allocate the "
                               "run-time tensor table (%" PRIu32 " tensors)",
                               plan->num_tensors);
    }
    memcpy(executor->run_tensors, plan->tensors, plan->num_tensors * sizeof(ember_tensor_desc));
    executor->tensors = executor->run_tensors;
  }
  const size_t scratch = scratch_size(plan);
  if (scratch > 0) {
    executor->scratch = scratch <= SIZE_MAX / sizeof(double) ? calloc(scratch, sizeof(double))
                                                             : NULL;
    if (executor->scratch == NULL) {
      return ember_status_make(EMBER_OUT_OF_MEMORY, "cpu executor: cannot allocate %zu "
                               "doubles of scratch", scratch);
    }
  }
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    const ember_tensor_desc* tensor = &plan->tensors[t];
    /* Offsets were verified to lie inside the arena / the constants section. */
    if (tensor->storage == EMBER_STORAGE_INTERMEDIATE && executor->arena != NULL) {
      executor->tensor_data[t] = executor->arena + tensor->data_offset;
    } else if (tensor->storage == EMBER_STORAGE_CONSTANT) {
      executor->tensor_data[t] = (void*)(uintptr_t)(plan->constants + tensor->data_offset);
    }
  }
  return NULL;
}

static ember_status* cpu_executor_prepare(const ember_plan* plan,
                                          ember_executor** out_executor) {
  *out_executor = NULL;
  ember_cpu_executor* executor = calloc(1, sizeof *executor);
  if (executor == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "cpu executor: out of memory");
  }
  executor->base.vtable = &ember_cpu_executor_vtable;
  executor->base.kind = EMBER_EXECUTOR_CPU;
  executor->plan = plan;
  ember_status* status = cpu_executor_allocate(plan, executor);
  if (status != NULL) {
    cpu_executor_destroy(&executor->base);
    return status;
  }
  *out_executor = &executor->base;
  return NULL;
}

static ember_status* cpu_executor_run_op(const ember_cpu_op_args* args) {
  switch (args->op->opcode) {
    case EMBER_OP_LINEAR: ember_cpu_linear(args); break;
    case EMBER_OP_MATMUL: ember_cpu_matmul(args); break;
    case EMBER_OP_CONV2D: ember_cpu_conv2d(args); break;
    case EMBER_OP_SDPA: ember_cpu_sdpa(args); break;
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
    case EMBER_OP_CLAMP: ember_cpu_unary(args); break;
    case EMBER_OP_ADD:
    case EMBER_OP_SUB:
    case EMBER_OP_MUL:
    case EMBER_OP_DIV:
    case EMBER_OP_POW:
    case EMBER_OP_MAXIMUM:
    case EMBER_OP_MINIMUM: ember_cpu_binary(args); break;
    case EMBER_OP_WHERE: ember_cpu_where(args); break;
    case EMBER_OP_CAST: ember_cpu_cast(args); break;
    case EMBER_OP_RESHAPE:
    case EMBER_OP_COPY: ember_cpu_copy(args); break;
    case EMBER_OP_PERMUTE: ember_cpu_permute(args); break;
    case EMBER_OP_EXPAND: ember_cpu_expand(args); break;
    case EMBER_OP_SLICE: ember_cpu_slice(args); break;
    case EMBER_OP_CAT: ember_cpu_cat(args); break;
    case EMBER_OP_EMBEDDING: return ember_cpu_embedding(args);
    case EMBER_OP_SOFTMAX: ember_cpu_softmax(args); break;
    case EMBER_OP_LAYER_NORM: ember_cpu_layer_norm(args); break;
    case EMBER_OP_REDUCE_SUM:
    case EMBER_OP_REDUCE_MEAN:
    case EMBER_OP_REDUCE_MAX: ember_cpu_reduce(args); break;
    case EMBER_OP_MAX_POOL2D:
    case EMBER_OP_AVG_POOL2D: ember_cpu_pool2d(args); break;
    case EMBER_OP_ADAPTIVE_AVG_POOL2D: ember_cpu_adaptive_avg_pool2d(args); break;
  }
  return NULL;
}

/* A plan with symbols: this run's symbol values (from the input bindings, which the
 * program has checked) give every dynamic tensor's dims, element count and bytes. */
static ember_status* cpu_executor_set_shapes(ember_cpu_executor* executor,
                                             const ember_tensor_binding* inputs) {
  const ember_plan* plan = executor->plan;
  EMBER_RETURN_IF_ERROR(
      ember_plan_bind_inputs(plan, "cpu executor", inputs, executor->symbol_values));
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    const ember_tensor_desc* tensor = &plan->tensors[t];
    if (!tensor->dynamic) continue;
    ember_tensor_desc* run = &executor->run_tensors[t];
    ember_plan_tensor_dims_at(plan, tensor, executor->symbol_values, run->dims);
    /* Each dim is at most the plan's, so the products are at most the plan's too. */
    run->numel = ember_cpu_dims_product(run->dims, 0, run->rank);
    run->nbytes = (size_t)run->numel * ember_dtype_size(run->dtype);
  }
  return NULL;
}

static ember_status* cpu_executor_run(ember_executor* base, const ember_tensor_binding* inputs,
                                      const ember_tensor_binding* outputs) {
  ember_cpu_executor* executor = (ember_cpu_executor*)base;
  const ember_plan* plan = executor->plan;
  if (plan->num_symbols > 0) EMBER_RETURN_IF_ERROR(cpu_executor_set_shapes(executor, inputs));
  for (uint32_t i = 0; i < plan->num_inputs; ++i) {
    executor->tensor_data[plan->inputs[i]] = inputs[i].data;
  }
  for (uint32_t i = 0; i < plan->num_outputs; ++i) {
    executor->tensor_data[plan->outputs[i]] = outputs[i].data;
  }
  ember_cpu_op_args args = {plan, NULL, 0, executor->tensors, executor->tensor_data,
                            executor->scratch};
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    args.op = &plan->ops[i];
    args.op_index = i;
    EMBER_RETURN_IF_ERROR(cpu_executor_run_op(&args));
  }
  return NULL;
}

const ember_executor_vtable ember_cpu_executor_vtable = {
    cpu_executor_prepare,
    cpu_executor_run,
    cpu_executor_destroy,
};
