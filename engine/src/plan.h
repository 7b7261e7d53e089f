/* The decoded plan: what the reader makes of plan bytes, in the engine's own memory.
 *
 * Life of a plan:
 *   1. ember_plan_read (plan_reader.c) decodes the bytes and checks their structure
 *      (level 1 of docs/plan-format.md "Verification"). Tables, names and attrs are
 *      copied; `constants` still points into the caller's bytes.
 *   2. ember_plan_verify_meaning (plan_verifier.c) checks level 2 and fills the fields
 *      marked "derived" below. Only a plan that passed both levels may be executed.
 *   3. ember_program_create prepares an executor, which reads the constants where the
 *      reader found them. The CPU executor keeps them: ember_plan_own_constants first
 *      copies the section into a 64-byte aligned allocation of the plan's own. The CUDA
 *      executor copies them into device memory during its prepare, and
 *      ember_plan_forget_lent_constants then drops the pointer, so that no weights stay
 *      on the host twice. Either way the plan then holds no pointer into the caller's
 *      bytes.
 *   4. ember_plan_deinitialize releases everything.
 *
 * Executors (CPU now, CUDA later) read a verified plan and may rely on every rule of the
 * format: indices in range, shapes consistent per op, dtypes float and equal within an
 * op, tensors written once before they are read, intermediates inside the arena and not
 * sharing bytes while both are live. Executors never modify the plan.
 */
#ifndef EMBER_SRC_PLAN_H_
#define EMBER_SRC_PLAN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/ember.h"
#include "status.h"

/* Alignment of constants and intermediates, in the plan and in memory. */
#define EMBER_DATA_ALIGNMENT 64u
/* The smallest header and records a version 1 reader accepts (larger ones are read as far
 * as this reader knows them). A header of EMBER_PLAN_HEADER_SIZE_SYMBOLS bytes or more
 * holds the symbols section; a tensor record of EMBER_PLAN_TENSOR_RECORD_SIZE_SYMBOLS
 * bytes or more holds dim_symbols. The writer writes both. */
#define EMBER_PLAN_HEADER_SIZE_V1 176u
#define EMBER_PLAN_HEADER_SIZE_SYMBOLS 192u
#define EMBER_PLAN_TENSOR_RECORD_SIZE_V1 96u
#define EMBER_PLAN_TENSOR_RECORD_SIZE_SYMBOLS 104u
#define EMBER_PLAN_OP_RECORD_SIZE_V1 24u
/* Bytes of one symbol record (i64 min, i64 max) and the most symbols a plan holds. */
#define EMBER_PLAN_SYMBOL_RECORD_SIZE 16u
#define EMBER_PLAN_MAX_SYMBOLS 255u
#define EMBER_PLAN_MAX_NAME_LENGTH 255u
#define EMBER_PLAN_NO_INDEX UINT32_MAX

/* An EMBER_INVALID_PLAN status whose message starts with "plan: ". The format must be a
 * string literal. */
#define EMBER_PLAN_ERROR(...) ember_status_make(EMBER_INVALID_PLAN, "plan: " __VA_ARGS__)

typedef enum ember_storage {
  EMBER_STORAGE_INPUT = 0,
  EMBER_STORAGE_OUTPUT = 1,
  EMBER_STORAGE_INTERMEDIATE = 2,
  EMBER_STORAGE_CONSTANT = 3,
} ember_storage;

typedef enum ember_opcode {
  EMBER_OP_LINEAR = 1,
  EMBER_OP_MATMUL = 2,
  EMBER_OP_RELU = 3,
  EMBER_OP_GELU = 4,
  EMBER_OP_SIGMOID = 5,
  EMBER_OP_TANH = 6,
  EMBER_OP_SILU = 7,
  EMBER_OP_ADD = 8,
  EMBER_OP_SUB = 9,
  EMBER_OP_MUL = 10,
  EMBER_OP_DIV = 11,
  EMBER_OP_RESHAPE = 12,
  EMBER_OP_PERMUTE = 13,
  EMBER_OP_SOFTMAX = 14,
  EMBER_OP_LAYER_NORM = 15,
  EMBER_OP_COPY = 16,
  EMBER_OP_CONV2D = 17,
  EMBER_OP_MAX_POOL2D = 18,
  EMBER_OP_AVG_POOL2D = 19,
  EMBER_OP_ADAPTIVE_AVG_POOL2D = 20,
  EMBER_OP_REDUCE_SUM = 21,
  EMBER_OP_REDUCE_MEAN = 22,
  EMBER_OP_REDUCE_MAX = 23,
  EMBER_OP_POW = 24,
  EMBER_OP_NEG = 25,
  EMBER_OP_EXP = 26,
  EMBER_OP_LOG = 27,
  EMBER_OP_SQRT = 28,
  EMBER_OP_RSQRT = 29,
  EMBER_OP_ABS = 30,
  EMBER_OP_RECIPROCAL = 31,
  EMBER_OP_CLAMP = 32,
  EMBER_OP_WHERE = 33,
  EMBER_OP_EXPAND = 34,
  EMBER_OP_SLICE = 35,
  EMBER_OP_CAT = 36,
  EMBER_OP_EMBEDDING = 37,
  EMBER_OP_SDPA = 38,
  EMBER_OP_CAST = 39,
  EMBER_OP_MAXIMUM = 40,
  EMBER_OP_MINIMUM = 41,
} ember_opcode;
#define EMBER_OP_FIRST EMBER_OP_LINEAR
#define EMBER_OP_LAST EMBER_OP_MINIMUM

/* Attribute word positions, per opcode (docs/plan-format.md "Operations"). */
enum {
  EMBER_ATTR_LINEAR_WEIGHT_LAYOUT = 0, /* 0: w is [N, K]; 1: w is [K, N] */
  EMBER_ATTR_GELU_APPROXIMATE = 0,     /* 0: erf; 1: tanh form */
  EMBER_ATTR_SOFTMAX_DIM = 0,
  EMBER_ATTR_LAYER_NORM_NORMALIZED_NDIM = 0,
  EMBER_ATTR_LAYER_NORM_EPS_F64 = 1,
  EMBER_ATTR_LAYER_NORM_HAS_WEIGHT = 2,
  EMBER_ATTR_LAYER_NORM_HAS_BIAS = 3,
  /* CONV2D */
  EMBER_ATTR_CONV_STRIDE_H = 0,
  EMBER_ATTR_CONV_STRIDE_W = 1,
  EMBER_ATTR_CONV_PAD_H = 2,
  EMBER_ATTR_CONV_PAD_W = 3,
  EMBER_ATTR_CONV_DILATION_H = 4,
  EMBER_ATTR_CONV_DILATION_W = 5,
  EMBER_ATTR_CONV_GROUPS = 6,
  EMBER_ATTR_CONV_COUNT = 7,
  /* MAX_POOL2D and AVG_POOL2D share the first six words */
  EMBER_ATTR_POOL_KERNEL_H = 0,
  EMBER_ATTR_POOL_KERNEL_W = 1,
  EMBER_ATTR_POOL_STRIDE_H = 2,
  EMBER_ATTR_POOL_STRIDE_W = 3,
  EMBER_ATTR_POOL_PAD_H = 4,
  EMBER_ATTR_POOL_PAD_W = 5,
  EMBER_ATTR_MAX_POOL_DILATION_H = 6,
  EMBER_ATTR_MAX_POOL_DILATION_W = 7,
  EMBER_ATTR_MAX_POOL_CEIL_MODE = 8,
  EMBER_ATTR_AVG_POOL_CEIL_MODE = 6,
  EMBER_ATTR_AVG_POOL_COUNT_INCLUDE_PAD = 7,
  EMBER_ATTR_AVG_POOL_DIVISOR_OVERRIDE = 8, /* 0: none */
  EMBER_ATTR_POOL_COUNT = 9,
  /* REDUCE_SUM REDUCE_MEAN REDUCE_MAX */
  EMBER_ATTR_REDUCE_DIM_MASK = 0, /* bit d set: dim d is reduced */
  EMBER_ATTR_REDUCE_KEEPDIM = 1,
  /* CLAMP */
  EMBER_ATTR_CLAMP_MIN_F64 = 0,
  EMBER_ATTR_CLAMP_MAX_F64 = 1,
  /* SLICE */
  EMBER_ATTR_SLICE_DIM = 0,
  EMBER_ATTR_SLICE_START = 1,
  EMBER_ATTR_SLICE_STEP = 2,
  /* CAT */
  EMBER_ATTR_CAT_DIM = 0,
  /* SDPA */
  EMBER_ATTR_SDPA_IS_CAUSAL = 0,
  EMBER_ATTR_SDPA_SCALE_F64 = 1,
};

/* A dynamic dim size: its bounds. A tensor dim that uses it is coefficient x value, and
 * the tensor table records it at the largest value (coefficient x max). */
typedef struct ember_symbol_desc {
  int64_t min;
  int64_t max;
} ember_symbol_desc;

typedef struct ember_tensor_desc {
  const char* name; /* NUL-terminated, inside ember_plan.names */
  ember_dtype dtype;
  ember_storage storage;
  uint32_t rank;
  /* dims[rank..] are 0. A dynamic dim holds its largest value (see dim_symbols). */
  int64_t dims[EMBER_MAX_RANK];
  /* Per dim: 0 for a static dim; k for a dim that is a multiple of symbol k - 1
   * (dims[d] = coefficient x that symbol's max, coefficient >= 1). 0 past rank. */
  uint8_t dim_symbols[EMBER_MAX_RANK];
  bool dynamic;   /* some dim_symbols[d] != 0 */
  uint64_t numel; /* product of dims[0..rank); 1 for rank 0 */
  size_t nbytes;  /* numel * dtype size: the largest size of a dynamic tensor */
  /* Intermediate: byte offset in the arena. Constant: byte offset in the constants
   * section (ember_plan.constants). Both multiples of EMBER_DATA_ALIGNMENT. 0 for inputs
   * and outputs, whose memory the caller binds at run time. */
  uint64_t data_offset;
  /* Derived by the verifier. io_index: the position in inputs[]/outputs[] of an input or
   * output tensor, else EMBER_PLAN_NO_INDEX. first_op/last_op: the op that writes the
   * tensor and the last op that reads it (intermediates and outputs; last_op == first_op
   * when nothing reads it), else EMBER_PLAN_NO_INDEX. */
  uint32_t io_index;
  uint32_t first_op;
  uint32_t last_op;
  /* Derived by the verifier. An intermediate written by a RESHAPE of an intermediate at
   * the same data_offset with the same nbytes is a view of it (docs/plan-format.md,
   * "Memory plan"): view_of is the first tensor of that chain of views (a reshape of a
   * reshape of x: x). Every other tensor: its own index. */
  uint32_t view_of;
} ember_tensor_desc;

typedef struct ember_op_desc {
  ember_opcode opcode;
  uint32_t first_operand; /* operands[first_operand ..): inputs, then outputs */
  uint32_t num_inputs;
  uint32_t num_outputs;
  uint32_t first_attr; /* attrs[first_attr .. first_attr + num_attrs) */
  uint32_t num_attrs;
} ember_op_desc;

typedef struct ember_plan {
  uint32_t num_tensors;
  ember_tensor_desc* tensors;
  uint32_t num_ops;
  ember_op_desc* ops;
  uint32_t num_operands;
  uint32_t* operands; /* tensor indices */
  uint32_t num_attrs;
  int64_t* attrs;
  uint32_t num_inputs;
  uint32_t* inputs; /* tensor indices, in ExecuTorch's argument order */
  uint32_t num_outputs;
  uint32_t* outputs;
  char* names; /* all tensor names, each NUL-terminated */
  uint32_t num_symbols; /* 0 for a plan whose shapes are all static */
  ember_symbol_desc* symbols;
  uint64_t arena_size;
  /* The constants section: lent from the caller's bytes after ember_plan_read, owned and
   * 64-byte aligned after ember_plan_own_constants (then constants_owned is true). */
  const uint8_t* constants;
  uint64_t constants_size;
  bool constants_owned;
} ember_plan;

/* Decodes `bytes` into `out_plan` (zeroed first) and checks the structure. On error the
 * plan is left deinitialized. */
ember_status* ember_plan_read(const uint8_t* bytes, size_t size, ember_plan* out_plan);

/* Checks the meaning of a plan that ember_plan_read accepted, and fills derived fields. */
ember_status* ember_plan_verify_meaning(ember_plan* plan);

/* Copies the constants section into memory the plan owns (64-byte aligned). */
ember_status* ember_plan_own_constants(ember_plan* plan);

/* For an executor that copied the constants elsewhere during its prepare (the CUDA
 * executor, into device memory): a lent section is forgotten (`constants` becomes NULL,
 * the tensors' offsets stay), so that the plan holds no pointer into the caller's bytes.
 * An owned section is kept. */
void ember_plan_forget_lent_constants(ember_plan* plan);

/* Releases what the plan owns and zeroes it. Safe on a zeroed plan. */
void ember_plan_deinitialize(ember_plan* plan);

/* "LINEAR", "MATMUL", ...; "unknown" for a code that is not an opcode. */
const char* ember_opcode_name(uint32_t opcode);
/* "input", "output", "intermediate", "constant"; "unknown" otherwise. */
const char* ember_storage_name(uint32_t storage);

/* Dynamic shapes (plan_verifier.c, "run-time shapes"). A run's symbol values come from
 * its input bindings; from them every tensor's dims follow. */

/* The dims of `tensor` when the symbols have `symbol_values` (num_symbols entries; may be
 * NULL for a plan without symbols). Writes tensor->rank entries of out_dims. */
void ember_plan_tensor_dims_at(const ember_plan* plan, const ember_tensor_desc* tensor,
                               const int64_t* symbol_values, int64_t* out_dims);

/* Checks `num_inputs` input bindings (dtype, rank, dims, nbytes, data) against the plan
 * and finds the symbol values they imply (out_symbol_values: num_symbols entries, may be
 * NULL when the plan has none). A dynamic dim must be a multiple of its coefficient,
 * within its symbol's bounds and consistent with the other inputs. Errors are
 * EMBER_INVALID_ARGUMENT with a message starting with `function` that names the input,
 * the size passed and what the plan allows. */
ember_status* ember_plan_bind_inputs(const ember_plan* plan, const char* function,
                                     const ember_tensor_binding* inputs,
                                     int64_t* out_symbol_values);

/* Checks output bindings against the outputs' dims at `symbol_values`. */
ember_status* ember_plan_check_outputs(const ember_plan* plan, const char* function,
                                       const ember_tensor_binding* outputs,
                                       const int64_t* symbol_values);

/* Operand access for a verified plan. */
static inline uint32_t ember_plan_op_input(const ember_plan* plan, const ember_op_desc* op,
                                           uint32_t i) {
  return plan->operands[op->first_operand + i];
}
static inline uint32_t ember_plan_op_output(const ember_plan* plan, const ember_op_desc* op,
                                            uint32_t i) {
  return plan->operands[op->first_operand + op->num_inputs + i];
}
static inline int64_t ember_plan_op_attr(const ember_plan* plan, const ember_op_desc* op,
                                         uint32_t i) {
  return plan->attrs[op->first_attr + i];
}
static inline const ember_tensor_desc* ember_plan_op_input_tensor(const ember_plan* plan,
                                                                  const ember_op_desc* op,
                                                                  uint32_t i) {
  return &plan->tensors[ember_plan_op_input(plan, op, i)];
}
static inline const ember_tensor_desc* ember_plan_op_output_tensor(const ember_plan* plan,
                                                                   const ember_op_desc* op,
                                                                   uint32_t i) {
  return &plan->tensors[ember_plan_op_output(plan, op, i)];
}

#endif /* EMBER_SRC_PLAN_H_ */
