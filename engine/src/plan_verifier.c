/* Plan verifier: level 2 of docs/plan-format.md "Verification" (meaning), on a plan that
 * plan_reader.c decoded and checked for structure.
 *
 * Checks, in order: the I/O table and that every symbol is an input's dim; then each op in
 * plan order (operand and attr slices in range, operand and attr counts for its opcode,
 * who writes what and read-after-write, dtypes, shapes and attr values); then that every
 * intermediate and output is written; then the memory plan (intermediates inside the
 * arena, no two live ones sharing bytes unless they are views of one tensor, RESHAPE's
 * in-place form). The first failure is returned. Executors rely on every one of these
 * rules.
 *
 * Shapes with dynamic dims are compared symbolically (see `shape`), so a plan that passes
 * holds for every value of its symbols. The last section checks a run's bindings against
 * a verified plan and finds the symbol values they imply (plan.h, "Dynamic shapes"). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "checked_math.h"
#include "plan.h"
#include "program_internal.h"
#include "shape_text.h"

typedef struct op_context {
  ember_plan* plan;
  uint32_t index;
  const ember_op_desc* op;
  const char* name;
} op_context;

/* Every op message starts "plan: op <index> (<OPCODE>): ". The format must be a literal
 * and take at least one argument. */
#define OP_ERROR(ctx, format, ...)                                                    \
  EMBER_PLAN_ERROR("op %" PRIu32 " (%s): " format, (ctx)->index, (ctx)->name, \
                   __VA_ARGS__)

static bool is_float_dtype(ember_dtype dtype) {
  return dtype == EMBER_DTYPE_FLOAT32 || dtype == EMBER_DTYPE_FLOAT16 ||
         dtype == EMBER_DTYPE_BFLOAT16;
}

static ember_status* verify_io_table(ember_plan* plan) {
  for (uint32_t pass = 0; pass < 2; ++pass) {
    const bool inputs = pass == 0;
    const uint32_t count = inputs ? plan->num_inputs : plan->num_outputs;
    const uint32_t* table = inputs ? plan->inputs : plan->outputs;
    const char* role = inputs ? "input" : "output";
    const ember_storage want = inputs ? EMBER_STORAGE_INPUT : EMBER_STORAGE_OUTPUT;
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t t = table[i];
      if (t >= plan->num_tensors) {
        return EMBER_PLAN_ERROR("io: %s %" PRIu32 " names tensor %" PRIu32 "; the plan has %"
                                PRIu32 " tensors",
                                role, i, t, plan->num_tensors);
      }
      ember_tensor_desc* tensor = &plan->tensors[t];
      if (tensor->storage != want) {
        return EMBER_PLAN_ERROR("io: %s %" PRIu32 " names tensor %" PRIu32 " ('%s') of "
                                "storage %s; %s entries must name tensors of storage %s",
                                role, i, t, tensor->name, ember_storage_name(tensor->storage),
                                role, role);
      }
      if (tensor->io_index != EMBER_PLAN_NO_INDEX) {
        return EMBER_PLAN_ERROR("io: %s %" PRIu32 " names tensor %" PRIu32 " ('%s'), already "
                                "named by %s %" PRIu32,
                                role, i, t, tensor->name, role, tensor->io_index);
      }
      tensor->io_index = i;
    }
  }
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    const ember_tensor_desc* tensor = &plan->tensors[t];
    if ((tensor->storage == EMBER_STORAGE_INPUT || tensor->storage == EMBER_STORAGE_OUTPUT) &&
        tensor->io_index == EMBER_PLAN_NO_INDEX) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): this %s is missing from the io "
                              "table",
                              t, tensor->name, ember_storage_name(tensor->storage));
    }
  }
  return NULL;
}

/* Operand and attr slices in range, and every operand a tensor index. */
static ember_status* verify_op_slices(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  const uint64_t count = (uint64_t)op->num_inputs + op->num_outputs;
  uint64_t end;
  if (!ember_checked_add_u64(op->first_operand, count, &end) ||
      end > ctx->plan->num_operands) {
    return OP_ERROR(ctx, "operands [%" PRIu32 ", %" PRIu64 ") exceed the operand table (%"
                    PRIu32 " entries)",
                    op->first_operand, (uint64_t)op->first_operand + count,
                    ctx->plan->num_operands);
  }
  if (!ember_checked_add_u64(op->first_attr, op->num_attrs, &end) ||
      end > ctx->plan->num_attrs) {
    return OP_ERROR(ctx, "attrs [%" PRIu32 ", %" PRIu64 ") exceed the attrs section (%" PRIu32
                    " words)",
                    op->first_attr, (uint64_t)op->first_attr + op->num_attrs,
                    ctx->plan->num_attrs);
  }
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t t = ctx->plan->operands[op->first_operand + i];
    if (t >= ctx->plan->num_tensors) {
      return OP_ERROR(ctx, "operand %" PRIu32 " (entry %" PRIu32 " of the operand table) is "
                      "tensor %" PRIu32 "; the plan has %" PRIu32 " tensors",
                      i, op->first_operand + i, t, ctx->plan->num_tensors);
    }
  }
  return NULL;
}

static ember_status* expect_count(const op_context* ctx, const char* what, uint32_t have,
                                  uint32_t min, uint32_t max) {
  if (have >= min && have <= max) return NULL;
  if (min == max) {
    return OP_ERROR(ctx, "takes %" PRIu32 " %s, has %" PRIu32, min, what, have);
  }
  return OP_ERROR(ctx, "takes %" PRIu32 " to %" PRIu32 " %s, has %" PRIu32, min, max, what,
                  have);
}

/* Input count range and attr count of each opcode (LAYER_NORM and PERMUTE are special:
 * their counts follow from their flags and their input's rank). */
static void op_counts(ember_opcode opcode, uint32_t* min_inputs, uint32_t* max_inputs,
                      uint32_t* attrs) {
  *min_inputs = 1, *max_inputs = 1, *attrs = 0;
  switch (opcode) {
    case EMBER_OP_LINEAR:
      *min_inputs = 2, *max_inputs = 3, *attrs = 1;
      break;
    case EMBER_OP_MATMUL:
    case EMBER_OP_ADD:
    case EMBER_OP_SUB:
    case EMBER_OP_MUL:
    case EMBER_OP_DIV:
    case EMBER_OP_POW:
    case EMBER_OP_MAXIMUM:
    case EMBER_OP_MINIMUM:
    case EMBER_OP_EMBEDDING:
      *min_inputs = *max_inputs = 2;
      break;
    case EMBER_OP_GELU:
    case EMBER_OP_SOFTMAX:
    case EMBER_OP_CAT:
      *attrs = 1;
      if (opcode == EMBER_OP_CAT) *max_inputs = UINT16_MAX;
      break;
    case EMBER_OP_CONV2D:
      *min_inputs = 2, *max_inputs = 3, *attrs = EMBER_ATTR_CONV_COUNT;
      break;
    case EMBER_OP_MAX_POOL2D:
    case EMBER_OP_AVG_POOL2D:
      *attrs = EMBER_ATTR_POOL_COUNT;
      break;
    case EMBER_OP_REDUCE_SUM:
    case EMBER_OP_REDUCE_MEAN:
    case EMBER_OP_REDUCE_MAX:
    case EMBER_OP_CLAMP:
      *attrs = 2;
      break;
    case EMBER_OP_SLICE:
      *attrs = 3;
      break;
    case EMBER_OP_WHERE:
      *min_inputs = *max_inputs = 3;
      break;
    case EMBER_OP_SDPA:
      *min_inputs = 3, *max_inputs = 4, *attrs = 2;
      break;
    case EMBER_OP_LAYER_NORM:
      *attrs = 4;
      break;
    case EMBER_OP_RELU:
    case EMBER_OP_SIGMOID:
    case EMBER_OP_TANH:
    case EMBER_OP_SILU:
    case EMBER_OP_RESHAPE:
    case EMBER_OP_COPY:
    case EMBER_OP_PERMUTE:
    case EMBER_OP_ADAPTIVE_AVG_POOL2D:
    case EMBER_OP_NEG:
    case EMBER_OP_EXP:
    case EMBER_OP_LOG:
    case EMBER_OP_SQRT:
    case EMBER_OP_RSQRT:
    case EMBER_OP_ABS:
    case EMBER_OP_RECIPROCAL:
    case EMBER_OP_EXPAND:
    case EMBER_OP_CAST:
      break;
  }
}

static ember_status* verify_op_counts(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  uint32_t min_inputs, max_inputs, attrs;
  op_counts(op->opcode, &min_inputs, &max_inputs, &attrs);
  if (op->opcode == EMBER_OP_LAYER_NORM) {
    EMBER_RETURN_IF_ERROR(expect_count(ctx, "attrs", op->num_attrs, 4, 4));
    int64_t has_weight = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_LAYER_NORM_HAS_WEIGHT);
    int64_t has_bias = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_LAYER_NORM_HAS_BIAS);
    if ((has_weight != 0 && has_weight != 1) || (has_bias != 0 && has_bias != 1)) {
      return OP_ERROR(ctx, "has_weight %" PRId64 " and has_bias %" PRId64 " must each be 0 "
                      "or 1",
                      has_weight, has_bias);
    }
    min_inputs = max_inputs = 1u + (uint32_t)has_weight + (uint32_t)has_bias;
  }
  EMBER_RETURN_IF_ERROR(expect_count(ctx, "inputs", op->num_inputs, min_inputs, max_inputs));
  EMBER_RETURN_IF_ERROR(expect_count(ctx, "outputs", op->num_outputs, 1, 1));
  if (op->opcode == EMBER_OP_PERMUTE) {
    attrs = ember_plan_op_input_tensor(ctx->plan, op, 0)->rank;
    if (op->num_attrs != attrs) {
      return OP_ERROR(ctx, "takes %" PRIu32 " attrs (one per dim of its input), has %" PRIu32,
                      attrs, op->num_attrs);
    }
  }
  return expect_count(ctx, "attrs", op->num_attrs, attrs, attrs);
}

/* Storage rules and order: inputs that are computed must already be written; outputs are
 * intermediates or outputs, written here for the first and only time. */
static ember_status* verify_op_dataflow(const op_context* ctx) {
  ember_plan* plan = ctx->plan;
  const ember_op_desc* op = ctx->op;
  for (uint32_t i = 0; i < op->num_inputs; ++i) {
    uint32_t t = ember_plan_op_input(plan, op, i);
    ember_tensor_desc* tensor = &plan->tensors[t];
    bool computed = tensor->storage == EMBER_STORAGE_INTERMEDIATE ||
                    tensor->storage == EMBER_STORAGE_OUTPUT;
    if (computed && tensor->first_op == EMBER_PLAN_NO_INDEX) {
      return OP_ERROR(ctx, "input %" PRIu32 " reads tensor %" PRIu32 " ('%s') before any op "
                      "writes it",
                      i, t, tensor->name);
    }
    if (computed) tensor->last_op = ctx->index;
  }
  for (uint32_t i = 0; i < op->num_outputs; ++i) {
    uint32_t t = ember_plan_op_output(plan, op, i);
    ember_tensor_desc* tensor = &plan->tensors[t];
    if (tensor->storage != EMBER_STORAGE_INTERMEDIATE &&
        tensor->storage != EMBER_STORAGE_OUTPUT) {
      return OP_ERROR(ctx, "output %" PRIu32 " writes tensor %" PRIu32 " ('%s') of storage "
                      "%s; only intermediates and outputs are written",
                      i, t, tensor->name, ember_storage_name(tensor->storage));
    }
    if (tensor->first_op != EMBER_PLAN_NO_INDEX) {
      return OP_ERROR(ctx, "output %" PRIu32 " writes tensor %" PRIu32 " ('%s'), already "
                      "written by op %" PRIu32 "; a tensor is written once",
                      i, t, tensor->name, tensor->first_op);
    }
    tensor->first_op = ctx->index;
    tensor->last_op = ctx->index;
  }
  return NULL;
}

/* ---- dtypes ---------------------------------------------------------------------------- */

static const ember_tensor_desc* operand_tensor(const op_context* ctx, uint32_t i) {
  return &ctx->plan->tensors[ctx->plan->operands[ctx->op->first_operand + i]];
}

static ember_status* need_float(const op_context* ctx, const ember_tensor_desc* tensor) {
  if (is_float_dtype(tensor->dtype)) return NULL;
  return OP_ERROR(ctx, "tensor '%s' has dtype %s; this op computes on float32, float16 and "
                  "bfloat16",
                  tensor->name, ember_dtype_name(tensor->dtype));
}

/* Operands [first, end) have the dtype of `reference`. */
static ember_status* need_same_dtype(const op_context* ctx, uint32_t first, uint32_t end,
                                     const ember_tensor_desc* reference) {
  for (uint32_t i = first; i < end; ++i) {
    const ember_tensor_desc* tensor = operand_tensor(ctx, i);
    if (tensor->dtype != reference->dtype) {
      return OP_ERROR(ctx, "tensor '%s' has dtype %s, but '%s' has %s; these tensors of the "
                      "op share one dtype",
                      tensor->name, ember_dtype_name(tensor->dtype), reference->name,
                      ember_dtype_name(reference->dtype));
    }
  }
  return NULL;
}

/* Per opcode: which operands must be float, bool or integer, and which share a dtype
 * (docs/plan-format.md "Operations"). Operands are inputs, then the output. */
static ember_status* verify_op_dtypes(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  const uint32_t count = op->num_inputs + op->num_outputs;
  const ember_tensor_desc* first = operand_tensor(ctx, 0);
  switch (op->opcode) {
    case EMBER_OP_CAST:
      return NULL;
    case EMBER_OP_RESHAPE:
    case EMBER_OP_PERMUTE:
    case EMBER_OP_COPY:
    case EMBER_OP_EXPAND:
    case EMBER_OP_SLICE:
    case EMBER_OP_CAT:
      return need_same_dtype(ctx, 1, count, first);
    case EMBER_OP_WHERE:
      if (first->dtype != EMBER_DTYPE_BOOL) {
        return OP_ERROR(ctx, "condition '%s' has dtype %s; it must be bool", first->name,
                        ember_dtype_name(first->dtype));
      }
      return need_same_dtype(ctx, 2, count, operand_tensor(ctx, 1));
    case EMBER_OP_EMBEDDING: {
      const ember_tensor_desc* indices = operand_tensor(ctx, 1);
      EMBER_RETURN_IF_ERROR(need_float(ctx, first));
      if (indices->dtype != EMBER_DTYPE_INT64 && indices->dtype != EMBER_DTYPE_INT32) {
        return OP_ERROR(ctx, "indices '%s' have dtype %s; they must be int64 or int32",
                        indices->name, ember_dtype_name(indices->dtype));
      }
      return need_same_dtype(ctx, 2, 3, first);
    }
    case EMBER_OP_SDPA:
      EMBER_RETURN_IF_ERROR(need_float(ctx, first));
      EMBER_RETURN_IF_ERROR(need_same_dtype(ctx, 1, 3, first));
      if (op->num_inputs == 4 && operand_tensor(ctx, 3)->dtype != EMBER_DTYPE_BOOL) {
        EMBER_RETURN_IF_ERROR(need_same_dtype(ctx, 3, 4, first));
      }
      return need_same_dtype(ctx, op->num_inputs, count, first);
    default:
      EMBER_RETURN_IF_ERROR(need_float(ctx, first));
      return need_same_dtype(ctx, 1, count, first);
  }
}

/* ---- shapes ---------------------------------------------------------------------------- */

/* A shape as the verifier reasons about it: each dim is a value and a symbol (0 for a
 * static dim; k for symbol k - 1, the value then being the dim at the symbol's max). Two
 * dims are equal only when both parts are, so a rule that holds for the recorded shapes
 * holds for every value of the symbols; a dynamic dim never broadcasts as a 1. */
typedef struct shape {
  uint32_t rank;
  int64_t dims[EMBER_MAX_RANK];
  uint8_t syms[EMBER_MAX_RANK];
} shape;

static void shape_of(const ember_tensor_desc* tensor, shape* out) {
  memset(out, 0, sizeof *out);
  out->rank = tensor->rank;
  memcpy(out->dims, tensor->dims, sizeof out->dims);
  memcpy(out->syms, tensor->dim_symbols, sizeof out->syms);
}

static bool dim_is_one(const shape* s, uint32_t d) { return s->syms[d] == 0 && s->dims[d] == 1; }

static bool dims_same(const shape* a, uint32_t da, const shape* b, uint32_t db) {
  return a->dims[da] == b->dims[db] && a->syms[da] == b->syms[db];
}

static bool shapes_equal(const shape* a, const shape* b) {
  if (a->rank != b->rank) return false;
  for (uint32_t d = 0; d < a->rank; ++d) {
    if (!dims_same(a, d, b, d)) return false;
  }
  return true;
}

/* "[2*s0, 8]": dynamic dims as coefficient and symbol. */
static const char* shape_text(const ember_plan* plan, const shape* s, ember_shape_text* out) {
  size_t used = (size_t)snprintf(out->text, sizeof out->text, "[");
  for (uint32_t d = 0; d < s->rank && used < sizeof out->text; ++d) {
    const char* separator = d == 0 ? "" : ", ";
    const size_t room = sizeof out->text - used;
    if (s->syms[d] == 0) {
      used += (size_t)snprintf(out->text + used, room, "%s%" PRId64, separator, s->dims[d]);
      continue;
    }
    const int64_t coefficient = s->dims[d] / plan->symbols[s->syms[d] - 1u].max;
    if (coefficient == 1) {
      used += (size_t)snprintf(out->text + used, room, "%ss%u", separator, s->syms[d] - 1u);
    } else {
      used += (size_t)snprintf(out->text + used, room, "%s%" PRId64 "*s%u", separator,
                               coefficient, s->syms[d] - 1u);
    }
  }
  if (used < sizeof out->text) snprintf(out->text + used, sizeof out->text - used, "]");
  return out->text;
}

static const char* tensor_shape_text(const ember_plan* plan, const ember_tensor_desc* tensor,
                                     ember_shape_text* out) {
  shape s;
  shape_of(tensor, &s);
  return shape_text(plan, &s, out);
}

/* The tensor must have exactly the shape `want`. */
static ember_status* expect_shape(const op_context* ctx, const char* role,
                                  const ember_tensor_desc* tensor, const shape* want) {
  shape have;
  shape_of(tensor, &have);
  if (shapes_equal(&have, want)) return NULL;
  ember_shape_text have_text, want_text;
  return OP_ERROR(ctx, "%s '%s' has shape %s, expected %s", role, tensor->name,
                  shape_text(ctx->plan, &have, &have_text),
                  shape_text(ctx->plan, want, &want_text));
}

/* Dims [begin, end) of `tensor` must be static (symbolic dims are not allowed there). */
static ember_status* expect_static(const op_context* ctx, const char* role,
                                   const ember_tensor_desc* tensor, uint32_t begin,
                                   uint32_t end) {
  for (uint32_t d = begin; d < end && d < tensor->rank; ++d) {
    if (tensor->dim_symbols[d] != 0) {
      return OP_ERROR(ctx, "%s '%s' dims[%" PRIu32 "] is dynamic; this op needs it static",
                      role, tensor->name, d);
    }
  }
  return NULL;
}

/* NumPy broadcasting of the last dims of a and b, aligned at the last dim; `a_rank` and
 * `b_rank` may be less than the shapes' ranks (for matmul batch dims). False if the dims
 * do not broadcast. */
static bool broadcast_shapes(const shape* a, uint32_t a_rank, const shape* b, uint32_t b_rank,
                             shape* out) {
  const uint32_t rank = a_rank > b_rank ? a_rank : b_rank;
  shape result;
  memset(&result, 0, sizeof result);
  result.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) {
    /* i counts from the last dim. */
    const bool has_a = i < a_rank, has_b = i < b_rank;
    const uint32_t da = has_a ? a_rank - 1 - i : 0, db = has_b ? b_rank - 1 - i : 0;
    const uint32_t o = rank - 1 - i;
    if (!has_a || (has_b && dim_is_one(a, da))) {
      result.dims[o] = b->dims[db], result.syms[o] = b->syms[db];
    } else if (!has_b || dim_is_one(b, db) || dims_same(a, da, b, db)) {
      result.dims[o] = a->dims[da], result.syms[o] = a->syms[da];
    } else {
      return false;
    }
  }
  *out = result;
  return true;
}

static ember_status* verify_linear(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(ctx->plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, op, 0);
  const int64_t layout = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_LINEAR_WEIGHT_LAYOUT);
  ember_shape_text text;
  if (layout != 0 && layout != 1) {
    return OP_ERROR(ctx, "weight_layout %" PRId64 " must be 0 ([N, K]) or 1 ([K, N])", layout);
  }
  if (x->rank < 1) return OP_ERROR(ctx, "input x '%s' must have rank >= 1", x->name);
  if (w->rank != 2) {
    return OP_ERROR(ctx, "weight '%s' has shape %s; it must have rank 2", w->name,
                    tensor_shape_text(ctx->plan, w, &text));
  }
  shape xs, ws;
  shape_of(x, &xs);
  shape_of(w, &ws);
  const uint32_t k_dim = layout == 0 ? 1 : 0, n_dim = layout == 0 ? 0 : 1;
  if (!dims_same(&ws, k_dim, &xs, x->rank - 1)) {
    return OP_ERROR(ctx, "weight '%s' has shape %s (weight_layout %" PRId64 "), which does "
                    "not match K = %" PRId64 " of x '%s'",
                    w->name, tensor_shape_text(ctx->plan, w, &text), layout,
                    x->dims[x->rank - 1], x->name);
  }
  shape n = {1, {ws.dims[n_dim]}, {ws.syms[n_dim]}};
  if (op->num_inputs == 3) {
    EMBER_RETURN_IF_ERROR(
        expect_shape(ctx, "bias", ember_plan_op_input_tensor(ctx->plan, op, 2), &n));
  }
  shape ys = xs;
  ys.dims[x->rank - 1] = n.dims[0];
  ys.syms[x->rank - 1] = n.syms[0];
  return expect_shape(ctx, "output", y, &ys);
}

static ember_status* verify_matmul(const op_context* ctx) {
  const ember_tensor_desc* a = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* b = ember_plan_op_input_tensor(ctx->plan, ctx->op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, ctx->op, 0);
  ember_shape_text a_text, b_text;
  if (a->rank < 2 || b->rank < 2) {
    return OP_ERROR(ctx, "inputs need rank >= 2, have %s and %s",
                    tensor_shape_text(ctx->plan, a, &a_text),
                    tensor_shape_text(ctx->plan, b, &b_text));
  }
  shape as, bs, ys;
  shape_of(a, &as);
  shape_of(b, &bs);
  if (!dims_same(&as, a->rank - 1, &bs, b->rank - 2)) {
    return OP_ERROR(ctx, "inner dims differ: a %s, b %s",
                    tensor_shape_text(ctx->plan, a, &a_text),
                    tensor_shape_text(ctx->plan, b, &b_text));
  }
  if (!broadcast_shapes(&as, a->rank - 2, &bs, b->rank - 2, &ys)) {
    return OP_ERROR(ctx, "batch dims of a %s and b %s do not broadcast",
                    tensor_shape_text(ctx->plan, a, &a_text),
                    tensor_shape_text(ctx->plan, b, &b_text));
  }
  const uint32_t batch = ys.rank;
  ys.rank = batch + 2;
  ys.dims[batch] = as.dims[a->rank - 2], ys.syms[batch] = as.syms[a->rank - 2];
  ys.dims[batch + 1] = bs.dims[b->rank - 1], ys.syms[batch + 1] = bs.syms[b->rank - 1];
  return expect_shape(ctx, "output", y, &ys);
}

/* Inputs [0, num_inputs) broadcast together to the output (binary ops, WHERE). */
static ember_status* verify_broadcast(const op_context* ctx) {
  shape acc, next;
  shape_of(ember_plan_op_input_tensor(ctx->plan, ctx->op, 0), &acc);
  for (uint32_t i = 1; i < ctx->op->num_inputs; ++i) {
    const ember_tensor_desc* t = ember_plan_op_input_tensor(ctx->plan, ctx->op, i);
    shape_of(t, &next);
    if (!broadcast_shapes(&acc, acc.rank, &next, next.rank, &acc)) {
      ember_shape_text a_text, b_text;
      return OP_ERROR(ctx, "shapes %s and %s do not broadcast",
                      shape_text(ctx->plan, &acc, &a_text), shape_text(ctx->plan, &next, &b_text));
    }
  }
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(ctx->plan, ctx->op, 0), &acc);
}

static ember_status* verify_same_shape(const op_context* ctx) {
  shape xs;
  shape_of(ember_plan_op_input_tensor(ctx->plan, ctx->op, 0), &xs);
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(ctx->plan, ctx->op, 0), &xs);
}

static ember_status* verify_permute(const op_context* ctx) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, ctx->op, 0);
  bool seen[EMBER_MAX_RANK] = {false};
  shape xs, ys;
  shape_of(x, &xs);
  ys = xs;
  for (uint32_t i = 0; i < x->rank; ++i) {
    int64_t p = ember_plan_op_attr(ctx->plan, ctx->op, i);
    if (p < 0 || p >= (int64_t)x->rank || seen[p]) {
      return OP_ERROR(ctx, "perm[%" PRIu32 "] = %" PRId64 " makes perm not a permutation of "
                      "0..%" PRIu32,
                      i, p, x->rank - 1);
    }
    seen[p] = true;
    ys.dims[i] = xs.dims[p];
    ys.syms[i] = xs.syms[p];
  }
  return expect_shape(ctx, "output", y, &ys);
}

/* Same elements for every value of the symbols: the same product of values and the same
 * symbols (with multiplicity). */
static ember_status* verify_reshape(const op_context* ctx) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, ctx->op, 0);
  unsigned counts[EMBER_PLAN_MAX_SYMBOLS + 1] = {0};
  bool symbols_match = true;
  for (uint32_t d = 0; d < x->rank; ++d) ++counts[x->dim_symbols[d]];
  for (uint32_t d = 0; d < y->rank; ++d) {
    const uint8_t symbol = y->dim_symbols[d];
    if (symbol != 0 && counts[symbol]-- == 0) symbols_match = false;
  }
  for (uint32_t k = 1; k <= EMBER_PLAN_MAX_SYMBOLS; ++k) symbols_match &= counts[k] == 0;
  if (x->numel != y->numel || !symbols_match) {
    ember_shape_text x_text, y_text;
    return OP_ERROR(ctx, "element counts differ: input %s has %" PRIu64 ", output %s has %"
                    PRIu64 "%s",
                    tensor_shape_text(ctx->plan, x, &x_text), x->numel,
                    tensor_shape_text(ctx->plan, y, &y_text), y->numel,
                    symbols_match ? "" : " (or differ for some value of the symbols)");
  }
  return NULL;
}

static ember_status* verify_layer_norm(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, op, 0);
  int64_t nd = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_LAYER_NORM_NORMALIZED_NDIM);
  if (nd < 1 || nd > (int64_t)x->rank) {
    return OP_ERROR(ctx, "normalized_ndim %" PRId64 " must be in 1..%" PRIu32 " (the rank of "
                    "x)",
                    nd, x->rank);
  }
  int64_t eps_bits = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_LAYER_NORM_EPS_F64);
  double eps;
  memcpy(&eps, &eps_bits, sizeof eps);
  if (!isfinite(eps) || eps < 0.0) {
    return OP_ERROR(ctx, "eps %g must be finite and >= 0", eps);
  }
  const uint32_t lead = x->rank - (uint32_t)nd;
  shape xs, normalized;
  shape_of(x, &xs);
  memset(&normalized, 0, sizeof normalized);
  normalized.rank = (uint32_t)nd;
  memcpy(normalized.dims, xs.dims + lead, (size_t)nd * sizeof normalized.dims[0]);
  memcpy(normalized.syms, xs.syms + lead, (size_t)nd);
  for (uint32_t i = 1; i < op->num_inputs; ++i) {
    EMBER_RETURN_IF_ERROR(expect_shape(ctx, "weight/bias",
                                       ember_plan_op_input_tensor(ctx->plan, op, i),
                                       &normalized));
  }
  return verify_same_shape(ctx);
}

/* Size of one output dim of a window op, or -1 when the window does not fit (or the
 * input is larger than window ops take, 2^40, which keeps this arithmetic in range). */
static int64_t window_output_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                                  int64_t dilation, bool ceil_mode) {
  const int64_t extent = dilation * (kernel - 1) + 1;
  if (size > ((int64_t)1 << 40) || size + 2 * pad < extent) return -1;
  const int64_t numerator = size + 2 * pad - extent + (ceil_mode ? stride - 1 : 0);
  int64_t out = numerator / stride + 1;
  /* PyTorch: with ceil_mode, the last window must start inside the input or its left
   * padding. */
  if (ceil_mode && (out - 1) * stride >= size + pad) --out;
  return out;
}

/* Attribute values of window ops are bounded first so that the size arithmetic above
 * cannot overflow: dims are below 2^62 (their product is checked), windows below 2^30. */
#define WINDOW_LIMIT ((int64_t)1 << 30)

static ember_status* verify_conv2d(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  const ember_plan* plan = ctx->plan;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  ember_shape_text x_text, w_text;
  if (x->rank != 4 || w->rank != 4) {
    return OP_ERROR(ctx, "x %s and w %s must have rank 4 ([N, C, H, W], [O, C/groups, KH, KW])",
                    tensor_shape_text(plan, x, &x_text), tensor_shape_text(plan, w, &w_text));
  }
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "input", x, 1, 4));
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "weight", w, 0, 4));
  int64_t a[EMBER_ATTR_CONV_COUNT];
  for (uint32_t i = 0; i < EMBER_ATTR_CONV_COUNT; ++i) a[i] = ember_plan_op_attr(plan, op, i);
  for (uint32_t i = 0; i < EMBER_ATTR_CONV_COUNT; ++i) {
    const bool is_pad = i == EMBER_ATTR_CONV_PAD_H || i == EMBER_ATTR_CONV_PAD_W;
    if (a[i] < (is_pad ? 0 : 1) || a[i] > WINDOW_LIMIT) {
      return OP_ERROR(ctx, "attr %" PRIu32 " is %" PRId64 "; strides, dilations and groups "
                      "must be in 1..2^30, padding in 0..2^30",
                      i, a[i]);
    }
  }
  const int64_t groups = a[EMBER_ATTR_CONV_GROUPS];
  const int64_t c = x->dims[1], o = w->dims[0];
  /* c / groups, not dims[1] * groups: a zero-element weight can have any dims[1]. */
  if (c % groups != 0 || o % groups != 0 || w->dims[1] != c / groups) {
    return OP_ERROR(ctx, "groups %" PRId64 " does not fit x %s and weight %s (C and O must be "
                    "multiples of groups, weight dims[1] = C / groups)",
                    groups, tensor_shape_text(plan, x, &x_text),
                    tensor_shape_text(plan, w, &w_text));
  }
  if (w->dims[2] < 1 || w->dims[3] < 1 || w->dims[2] > WINDOW_LIMIT ||
      w->dims[3] > WINDOW_LIMIT) {
    return OP_ERROR(ctx, "kernel of weight %s must be at least 1x1 and at most 2^30",
                    tensor_shape_text(plan, w, &w_text));
  }
  shape ys;
  shape_of(x, &ys);
  ys.dims[1] = o;
  for (uint32_t s = 0; s < 2; ++s) {
    const int64_t out = window_output_size(x->dims[2 + s], w->dims[2 + s],
                                           a[EMBER_ATTR_CONV_STRIDE_H + s],
                                           a[EMBER_ATTR_CONV_PAD_H + s],
                                           a[EMBER_ATTR_CONV_DILATION_H + s], false);
    if (out < 0) {
      return OP_ERROR(ctx, "x %s with padding %" PRId64 " is smaller than the dilated kernel "
                      "of weight %s",
                      tensor_shape_text(plan, x, &x_text), a[EMBER_ATTR_CONV_PAD_H + s],
                      tensor_shape_text(plan, w, &w_text));
    }
    ys.dims[2 + s] = out;
  }
  if (op->num_inputs == 3) {
    shape bias = {1, {o}, {0}};
    EMBER_RETURN_IF_ERROR(
        expect_shape(ctx, "bias", ember_plan_op_input_tensor(plan, op, 2), &bias));
  }
  return expect_shape(ctx, "output", y, &ys);
}

static ember_status* verify_pool2d(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  const ember_plan* plan = ctx->plan;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const bool is_max = op->opcode == EMBER_OP_MAX_POOL2D;
  ember_shape_text text;
  if (x->rank != 4) {
    return OP_ERROR(ctx, "x %s must have rank 4 ([N, C, H, W])",
                    tensor_shape_text(plan, x, &text));
  }
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "input", x, 2, 4));
  int64_t a[EMBER_ATTR_POOL_COUNT];
  for (uint32_t i = 0; i < EMBER_ATTR_POOL_COUNT; ++i) a[i] = ember_plan_op_attr(plan, op, i);
  const int64_t ceil_mode =
      a[is_max ? EMBER_ATTR_MAX_POOL_CEIL_MODE : EMBER_ATTR_AVG_POOL_CEIL_MODE];
  if (ceil_mode != 0 && ceil_mode != 1) {
    return OP_ERROR(ctx, "ceil_mode %" PRId64 " must be 0 or 1", ceil_mode);
  }
  if (!is_max) {
    const int64_t include_pad = a[EMBER_ATTR_AVG_POOL_COUNT_INCLUDE_PAD];
    const int64_t divisor = a[EMBER_ATTR_AVG_POOL_DIVISOR_OVERRIDE];
    if (include_pad != 0 && include_pad != 1) {
      return OP_ERROR(ctx, "count_include_pad %" PRId64 " must be 0 or 1", include_pad);
    }
    if (divisor < 0 || divisor > WINDOW_LIMIT) {
      return OP_ERROR(ctx, "divisor_override %" PRId64 " must be in 0..2^30 (0: none)",
                      divisor);
    }
  }
  shape ys;
  shape_of(x, &ys);
  for (uint32_t s = 0; s < 2; ++s) {
    const int64_t kernel = a[EMBER_ATTR_POOL_KERNEL_H + s];
    const int64_t stride = a[EMBER_ATTR_POOL_STRIDE_H + s];
    const int64_t pad = a[EMBER_ATTR_POOL_PAD_H + s];
    const int64_t dilation = is_max ? a[EMBER_ATTR_MAX_POOL_DILATION_H + s] : 1;
    if (kernel < 1 || stride < 1 || dilation < 1 || pad < 0 || kernel > WINDOW_LIMIT ||
        stride > WINDOW_LIMIT || dilation > WINDOW_LIMIT || pad > WINDOW_LIMIT) {
      return OP_ERROR(ctx, "kernel %" PRId64 ", stride %" PRId64 " and dilation %" PRId64
                      " must be in 1..2^30, padding %" PRId64 " in 0..2^30",
                      kernel, stride, dilation, pad);
    }
    const int64_t extent = dilation * (kernel - 1) + 1;
    if (2 * pad > extent) {
      return OP_ERROR(ctx, "padding %" PRId64 " exceeds half the kernel extent %" PRId64, pad,
                      extent);
    }
    const int64_t out = window_output_size(x->dims[2 + s], kernel, stride, pad, dilation,
                                           ceil_mode != 0);
    if (out < 1) {
      return OP_ERROR(ctx, "x %s with padding %" PRId64 " is smaller than the kernel extent %"
                      PRId64,
                      tensor_shape_text(plan, x, &text), pad, extent);
    }
    ys.dims[2 + s] = out;
  }
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(plan, op, 0), &ys);
}

static ember_status* verify_adaptive_pool2d(const op_context* ctx) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, ctx->op, 0);
  ember_shape_text x_text, y_text;
  if (x->rank != 4 || y->rank != 4) {
    return OP_ERROR(ctx, "x %s and y %s must have rank 4", tensor_shape_text(ctx->plan, x, &x_text),
                    tensor_shape_text(ctx->plan, y, &y_text));
  }
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "input", x, 2, 4));
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "output", y, 2, 4));
  if (x->dims[2] < 1 || x->dims[3] < 1 || y->dims[2] < 1 || y->dims[3] < 1) {
    return OP_ERROR(ctx, "spatial dims of x %s and y %s must be >= 1",
                    tensor_shape_text(ctx->plan, x, &x_text),
                    tensor_shape_text(ctx->plan, y, &y_text));
  }
  shape ys;
  shape_of(x, &ys);
  ys.dims[2] = y->dims[2];
  ys.dims[3] = y->dims[3];
  return expect_shape(ctx, "output", y, &ys);
}

static ember_status* verify_reduce(const op_context* ctx) {
  const ember_plan* plan = ctx->plan;
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, ctx->op, 0);
  const int64_t mask = ember_plan_op_attr(plan, ctx->op, EMBER_ATTR_REDUCE_DIM_MASK);
  const int64_t keepdim = ember_plan_op_attr(plan, ctx->op, EMBER_ATTR_REDUCE_KEEPDIM);
  if (x->rank < 1 || mask < 1 || mask >= ((int64_t)1 << x->rank)) {
    return OP_ERROR(ctx, "dim_mask %" PRId64 " must name one or more of the %" PRIu32
                    " dims of x",
                    mask, x->rank);
  }
  if (keepdim != 0 && keepdim != 1) {
    return OP_ERROR(ctx, "keepdim %" PRId64 " must be 0 or 1", keepdim);
  }
  shape xs, ys;
  shape_of(x, &xs);
  memset(&ys, 0, sizeof ys);
  for (uint32_t d = 0; d < x->rank; ++d) {
    const bool reduced = ((mask >> d) & 1) != 0;
    if (reduced && ctx->op->opcode == EMBER_OP_REDUCE_MAX) {
      const int64_t smallest =
          xs.syms[d] == 0 ? xs.dims[d] : plan->symbols[xs.syms[d] - 1u].min;
      if (smallest < 1) {
        return OP_ERROR(ctx, "reduces dims[%" PRIu32 "] of x, which can be 0 (a maximum of "
                        "no elements)",
                        d);
      }
    }
    if (!reduced) {
      ys.dims[ys.rank] = xs.dims[d], ys.syms[ys.rank] = xs.syms[d], ++ys.rank;
    } else if (keepdim) {
      ys.dims[ys.rank] = 1, ys.syms[ys.rank] = 0, ++ys.rank;
    }
  }
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(plan, ctx->op, 0), &ys);
}

static ember_status* verify_clamp(const op_context* ctx) {
  for (uint32_t i = 0; i < 2; ++i) {
    const int64_t bits = ember_plan_op_attr(ctx->plan, ctx->op, i);
    double bound;
    memcpy(&bound, &bits, sizeof bound);
    if (isnan(bound)) return OP_ERROR(ctx, "%s is NaN", i == 0 ? "min" : "max");
  }
  return verify_same_shape(ctx);
}

static ember_status* verify_expand(const op_context* ctx) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, ctx->op, 0);
  shape xs, ys, broadcast;
  shape_of(x, &xs);
  shape_of(y, &ys);
  if (y->rank < x->rank || !broadcast_shapes(&xs, xs.rank, &ys, ys.rank, &broadcast) ||
      !shapes_equal(&broadcast, &ys)) {
    ember_shape_text x_text, y_text;
    return OP_ERROR(ctx, "x %s does not expand to y %s", shape_text(ctx->plan, &xs, &x_text),
                    shape_text(ctx->plan, &ys, &y_text));
  }
  return NULL;
}

static ember_status* verify_slice(const op_context* ctx) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(ctx->plan, ctx->op, 0);
  const int64_t dim = ember_plan_op_attr(ctx->plan, ctx->op, EMBER_ATTR_SLICE_DIM);
  const int64_t start = ember_plan_op_attr(ctx->plan, ctx->op, EMBER_ATTR_SLICE_START);
  const int64_t step = ember_plan_op_attr(ctx->plan, ctx->op, EMBER_ATTR_SLICE_STEP);
  if (dim < 0 || dim >= (int64_t)x->rank) {
    return OP_ERROR(ctx, "dim %" PRId64 " is out of range for rank %" PRIu32, dim, x->rank);
  }
  const uint32_t d = (uint32_t)dim;
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "input", x, d, d + 1));
  if (y->rank != x->rank) {
    return OP_ERROR(ctx, "output '%s' has rank %" PRIu32 ", x has %" PRIu32, y->name, y->rank,
                    x->rank);
  }
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "output", y, d, d + 1));
  const int64_t size = x->dims[d], length = y->dims[d];
  /* start <= size < 2^63 and step, length >= 1 below: (length - 1) <= (size - start) /
   * step keeps the last index inside without overflow. */
  if (start < 0 || start > size || step < 1 ||
      (length > 0 && (start >= size || (length - 1) > (size - 1 - start) / step))) {
    return OP_ERROR(ctx, "start %" PRId64 ", step %" PRId64 " and length %" PRId64
                    " do not fit in dims[%" PRIu32 "] = %" PRId64,
                    start, step, length, d, size);
  }
  shape ys;
  shape_of(x, &ys);
  ys.dims[d] = length;
  return expect_shape(ctx, "output", y, &ys);
}

static ember_status* verify_cat(const op_context* ctx) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const int64_t dim = ember_plan_op_attr(ctx->plan, ctx->op, EMBER_ATTR_CAT_DIM);
  if (dim < 0 || dim >= (int64_t)x->rank) {
    return OP_ERROR(ctx, "dim %" PRId64 " is out of range for rank %" PRIu32, dim, x->rank);
  }
  const uint32_t d = (uint32_t)dim;
  shape xs, ys;
  shape_of(x, &xs);
  ys = xs;
  ys.dims[d] = 0;
  for (uint32_t i = 0; i < ctx->op->num_inputs; ++i) {
    const ember_tensor_desc* t = ember_plan_op_input_tensor(ctx->plan, ctx->op, i);
    EMBER_RETURN_IF_ERROR(expect_static(ctx, "input", t, d, d + 1));
    shape ts;
    shape_of(t, &ts);
    ts.dims[d] = xs.dims[d];
    if (!shapes_equal(&ts, &xs)) {
      ember_shape_text t_text, x_text;
      return OP_ERROR(ctx, "input %" PRIu32 " '%s' %s differs from input 0 %s outside dim %"
                      PRIu32,
                      i, t->name, tensor_shape_text(ctx->plan, t, &t_text),
                      shape_text(ctx->plan, &xs, &x_text), d);
    }
    uint64_t total;
    if (!ember_checked_add_u64((uint64_t)ys.dims[d], (uint64_t)t->dims[d], &total) ||
        total > (uint64_t)INT64_MAX) {
      return OP_ERROR(ctx, "the sizes of dim %" PRIu32 " overflow when added", d);
    }
    ys.dims[d] = (int64_t)total;
  }
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(ctx->plan, ctx->op, 0), &ys);
}

static ember_status* verify_embedding(const op_context* ctx) {
  const ember_tensor_desc* w = ember_plan_op_input_tensor(ctx->plan, ctx->op, 0);
  const ember_tensor_desc* indices = ember_plan_op_input_tensor(ctx->plan, ctx->op, 1);
  ember_shape_text text;
  if (w->rank != 2) {
    return OP_ERROR(ctx, "weight '%s' %s must have rank 2 ([V, D])", w->name,
                    tensor_shape_text(ctx->plan, w, &text));
  }
  EMBER_RETURN_IF_ERROR(expect_static(ctx, "weight", w, 0, 2));
  if (indices->rank >= EMBER_MAX_RANK) {
    return OP_ERROR(ctx, "indices '%s' have rank %" PRIu32 "; at most %u", indices->name,
                    indices->rank, EMBER_MAX_RANK - 1u);
  }
  shape ys;
  shape_of(indices, &ys);
  ys.dims[ys.rank] = w->dims[1];
  ys.syms[ys.rank] = 0;
  ++ys.rank;
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(ctx->plan, ctx->op, 0), &ys);
}

static ember_status* verify_sdpa(const op_context* ctx) {
  const ember_plan* plan = ctx->plan;
  const ember_op_desc* op = ctx->op;
  const ember_tensor_desc* q = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* k = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* v = ember_plan_op_input_tensor(plan, op, 2);
  const int64_t is_causal = ember_plan_op_attr(plan, op, EMBER_ATTR_SDPA_IS_CAUSAL);
  const int64_t scale_bits = ember_plan_op_attr(plan, op, EMBER_ATTR_SDPA_SCALE_F64);
  double scale;
  memcpy(&scale, &scale_bits, sizeof scale);
  ember_shape_text q_text, k_text, v_text;
  if (is_causal != 0 && is_causal != 1) {
    return OP_ERROR(ctx, "is_causal %" PRId64 " must be 0 or 1", is_causal);
  }
  if (!isfinite(scale)) return OP_ERROR(ctx, "scale %g must be finite", scale);
  const uint32_t rank = q->rank;
  shape qs, ks, vs;
  shape_of(q, &qs);
  shape_of(k, &ks);
  shape_of(v, &vs);
  bool fits = rank >= 2 && k->rank == rank && v->rank == rank;
  for (uint32_t d = 0; fits && d + 2 < rank; ++d) {
    fits = dims_same(&qs, d, &ks, d) && dims_same(&qs, d, &vs, d);
  }
  fits = fits && dims_same(&qs, rank - 1, &ks, rank - 1) && dims_same(&ks, rank - 2, &vs, rank - 2);
  if (!fits) {
    return OP_ERROR(ctx, "q %s, k %s and v %s must be [..., L, E], [..., S, E], [..., S, Ev] "
                    "with the same batch dims",
                    shape_text(plan, &qs, &q_text), shape_text(plan, &ks, &k_text),
                    shape_text(plan, &vs, &v_text));
  }
  if (op->num_inputs == 4) {
    if (is_causal) return OP_ERROR(ctx, "%s", "takes a mask or is_causal, not both");
    shape target = qs, mask, broadcast;
    target.dims[rank - 1] = ks.dims[rank - 2];
    target.syms[rank - 1] = ks.syms[rank - 2];
    shape_of(ember_plan_op_input_tensor(plan, op, 3), &mask);
    if (mask.rank > rank || !broadcast_shapes(&mask, mask.rank, &target, rank, &broadcast) ||
        !shapes_equal(&broadcast, &target)) {
      ember_shape_text m_text, t_text;
      return OP_ERROR(ctx, "mask %s does not broadcast to the scores %s",
                      shape_text(plan, &mask, &m_text), shape_text(plan, &target, &t_text));
    }
  }
  shape ys = qs;
  ys.dims[rank - 1] = vs.dims[rank - 1];
  ys.syms[rank - 1] = vs.syms[rank - 1];
  return expect_shape(ctx, "output", ember_plan_op_output_tensor(plan, op, 0), &ys);
}

static ember_status* verify_op_semantics(const op_context* ctx) {
  const ember_op_desc* op = ctx->op;
  switch (op->opcode) {
    case EMBER_OP_LINEAR:
      return verify_linear(ctx);
    case EMBER_OP_MATMUL:
      return verify_matmul(ctx);
    case EMBER_OP_GELU: {
      int64_t approximate = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_GELU_APPROXIMATE);
      if (approximate != 0 && approximate != 1) {
        return OP_ERROR(ctx, "approximate %" PRId64 " must be 0 (erf) or 1 (tanh)",
                        approximate);
      }
      return verify_same_shape(ctx);
    }
    case EMBER_OP_RELU:
    case EMBER_OP_SIGMOID:
    case EMBER_OP_TANH:
    case EMBER_OP_SILU:
    case EMBER_OP_COPY:
    case EMBER_OP_NEG:
    case EMBER_OP_EXP:
    case EMBER_OP_LOG:
    case EMBER_OP_SQRT:
    case EMBER_OP_RSQRT:
    case EMBER_OP_ABS:
    case EMBER_OP_RECIPROCAL:
    case EMBER_OP_CAST:
      return verify_same_shape(ctx);
    case EMBER_OP_CLAMP:
      return verify_clamp(ctx);
    case EMBER_OP_ADD:
    case EMBER_OP_SUB:
    case EMBER_OP_MUL:
    case EMBER_OP_DIV:
    case EMBER_OP_POW:
    case EMBER_OP_MAXIMUM:
    case EMBER_OP_MINIMUM:
    case EMBER_OP_WHERE:
      return verify_broadcast(ctx);
    case EMBER_OP_RESHAPE:
      return verify_reshape(ctx);
    case EMBER_OP_PERMUTE:
      return verify_permute(ctx);
    case EMBER_OP_SOFTMAX: {
      const ember_tensor_desc* x = ember_plan_op_input_tensor(ctx->plan, op, 0);
      int64_t dim = ember_plan_op_attr(ctx->plan, op, EMBER_ATTR_SOFTMAX_DIM);
      if (dim < 0 || dim >= (int64_t)x->rank) {
        return OP_ERROR(ctx, "dim %" PRId64 " is out of range for rank %" PRIu32
                        " (0 <= dim < rank)",
                        dim, x->rank);
      }
      return verify_same_shape(ctx);
    }
    case EMBER_OP_LAYER_NORM:
      return verify_layer_norm(ctx);
    case EMBER_OP_CONV2D:
      return verify_conv2d(ctx);
    case EMBER_OP_MAX_POOL2D:
    case EMBER_OP_AVG_POOL2D:
      return verify_pool2d(ctx);
    case EMBER_OP_ADAPTIVE_AVG_POOL2D:
      return verify_adaptive_pool2d(ctx);
    case EMBER_OP_REDUCE_SUM:
    case EMBER_OP_REDUCE_MEAN:
    case EMBER_OP_REDUCE_MAX:
      return verify_reduce(ctx);
    case EMBER_OP_EXPAND:
      return verify_expand(ctx);
    case EMBER_OP_SLICE:
      return verify_slice(ctx);
    case EMBER_OP_CAT:
      return verify_cat(ctx);
    case EMBER_OP_EMBEDDING:
      return verify_embedding(ctx);
    case EMBER_OP_SDPA:
      return verify_sdpa(ctx);
  }
  return OP_ERROR(ctx, "opcode %d has no verifier", (int)op->opcode);
}

/* A RESHAPE whose input and output are intermediates at the same data_offset, with the
 * same nbytes, is a view (docs/plan-format.md, "Memory plan"): the two are one
 * allocation, so they may share bytes while both are live. Ops are in order, so an
 * input's view_of is final before its output's is set. */
static void find_views(ember_plan* plan) {
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    const ember_op_desc* op = &plan->ops[i];
    if (op->opcode != EMBER_OP_RESHAPE) continue;
    const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
    ember_tensor_desc* y = &plan->tensors[ember_plan_op_output(plan, op, 0)];
    if (x->storage == EMBER_STORAGE_INTERMEDIATE && y->storage == EMBER_STORAGE_INTERMEDIATE &&
        x->data_offset == y->data_offset && x->nbytes == y->nbytes) {
      y->view_of = x->view_of;
    }
  }
}

static ember_status* verify_memory_plan(ember_plan* plan) {
  find_views(plan);
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    const ember_tensor_desc* tensor = &plan->tensors[t];
    if (tensor->storage != EMBER_STORAGE_INTERMEDIATE) continue;
    uint64_t end;
    if (!ember_checked_add_u64(tensor->data_offset, tensor->nbytes, &end) ||
        end > plan->arena_size) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): intermediate at data_offset %" PRIu64
                              " + nbytes %zu lies outside the arena (arena_size %" PRIu64 ")",
                              t, tensor->name, tensor->data_offset, tensor->nbytes,
                              plan->arena_size);
    }
  }
  /* Pairwise; plans hold at most a few thousand intermediates. */
  for (uint32_t a = 0; a < plan->num_tensors; ++a) {
    const ember_tensor_desc* ta = &plan->tensors[a];
    if (ta->storage != EMBER_STORAGE_INTERMEDIATE || ta->nbytes == 0) continue;
    for (uint32_t b = a + 1; b < plan->num_tensors; ++b) {
      const ember_tensor_desc* tb = &plan->tensors[b];
      if (tb->storage != EMBER_STORAGE_INTERMEDIATE || tb->nbytes == 0) continue;
      /* Views of one tensor: the same bytes exactly (each has its input's offset and
       * nbytes), written once and never again. */
      if (ta->view_of == tb->view_of) continue;
      const bool live_together = ta->first_op <= tb->last_op && tb->first_op <= ta->last_op;
      if (live_together &&
          ember_ranges_overlap(ta->data_offset, ta->nbytes, tb->data_offset, tb->nbytes)) {
        return EMBER_PLAN_ERROR("tensors %" PRIu32 " ('%s', live ops %" PRIu32 "..%" PRIu32
                                ") and %" PRIu32 " ('%s', live ops %" PRIu32 "..%" PRIu32
                                ") share arena bytes while both are live",
                                a, ta->name, ta->first_op, ta->last_op, b, tb->name,
                                tb->first_op, tb->last_op);
      }
    }
  }
  return NULL;
}

/* Every symbol is a dim of some input, so that a run's bindings give its value. */
static ember_status* verify_symbols_bound(const ember_plan* plan) {
  for (uint32_t k = 0; k < plan->num_symbols; ++k) {
    bool bound = false;
    for (uint32_t i = 0; i < plan->num_inputs && !bound; ++i) {
      const ember_tensor_desc* tensor = &plan->tensors[plan->inputs[i]];
      for (uint32_t d = 0; d < tensor->rank; ++d) bound |= tensor->dim_symbols[d] == k + 1u;
    }
    if (!bound) {
      return EMBER_PLAN_ERROR("symbol %" PRIu32 " is not a dim of any input, so a run cannot "
                              "know its value",
                              k);
    }
  }
  return NULL;
}

ember_status* ember_plan_verify_meaning(ember_plan* plan) {
  EMBER_RETURN_IF_ERROR(verify_io_table(plan));
  EMBER_RETURN_IF_ERROR(verify_symbols_bound(plan));
  for (uint32_t i = 0; i < plan->num_ops; ++i) {
    op_context ctx = {plan, i, &plan->ops[i], ember_opcode_name(plan->ops[i].opcode)};
    EMBER_RETURN_IF_ERROR(verify_op_slices(&ctx));
    EMBER_RETURN_IF_ERROR(verify_op_counts(&ctx));
    EMBER_RETURN_IF_ERROR(verify_op_dataflow(&ctx));
    EMBER_RETURN_IF_ERROR(verify_op_dtypes(&ctx));
    EMBER_RETURN_IF_ERROR(verify_op_semantics(&ctx));
  }
  for (uint32_t t = 0; t < plan->num_tensors; ++t) {
    const ember_tensor_desc* tensor = &plan->tensors[t];
    if ((tensor->storage == EMBER_STORAGE_INTERMEDIATE ||
         tensor->storage == EMBER_STORAGE_OUTPUT) &&
        tensor->first_op == EMBER_PLAN_NO_INDEX) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): this %s is never written by an op",
                              t, tensor->name, ember_storage_name(tensor->storage));
    }
  }
  return verify_memory_plan(plan);
}

ember_status* ember_plan_verify(const void* plan, size_t plan_size) {
  ember_plan decoded;
  ember_status* status = ember_plan_read(plan, plan_size, &decoded);
  if (status == NULL) status = ember_plan_verify_meaning(&decoded);
  ember_plan_deinitialize(&decoded);
  return status;
}

/* ---- run-time shapes --------------------------------------------------------------------
 *
 * A verified plan's shape rules hold for every value of its symbols (see `shape` above),
 * so a run only has to find the symbol values its input bindings imply, check them against
 * the bounds, and scale each dynamic dim: coefficient (dims[d] / the symbol's max) times
 * the value. */

void ember_plan_tensor_dims_at(const ember_plan* plan, const ember_tensor_desc* tensor,
                               const int64_t* symbol_values, int64_t* out_dims) {
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    const uint8_t symbol = tensor->dim_symbols[d];
    out_dims[d] = symbol == 0 ? tensor->dims[d]
                              : tensor->dims[d] / plan->symbols[symbol - 1u].max *
                                    symbol_values[symbol - 1u];
  }
}

/* One binding's dtype, rank and dims pointer against the plan's tensor. */
static ember_status* check_binding_header(const ember_plan* plan, const char* function,
                                          const char* role, uint32_t index,
                                          const ember_tensor_desc* tensor,
                                          const ember_tensor_binding* binding) {
  ember_shape_text want;
  if (binding->dtype != tensor->dtype) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s %" PRIu32 " ('%s'): dtype %s (%d) "
                             "passed, the plan expects %s",
                             function, role, index, tensor->name,
                             ember_dtype_name(binding->dtype), (int)binding->dtype,
                             ember_dtype_name(tensor->dtype));
  }
  if (binding->rank != tensor->rank) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s %" PRIu32 " ('%s'): rank %" PRIu32
                             " passed, the plan expects rank %" PRIu32 " %s",
                             function, role, index, tensor->name, binding->rank, tensor->rank,
                             tensor_shape_text(plan, tensor, &want));
  }
  if (binding->rank > 0 && binding->dims == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s %" PRIu32 " ('%s'): dims is NULL "
                             "for rank %" PRIu32 "; the plan expects %s",
                             function, role, index, tensor->name, binding->rank,
                             tensor_shape_text(plan, tensor, &want));
  }
  return NULL;
}

/* One binding's nbytes and data against the dims it was found to have. */
static ember_status* check_binding_bytes(const char* function, const char* role,
                                         uint32_t index, const ember_tensor_desc* tensor,
                                         const ember_tensor_binding* binding,
                                         const int64_t* dims) {
  size_t nbytes = ember_dtype_size(tensor->dtype);
  for (uint32_t d = 0; d < tensor->rank; ++d) nbytes *= (size_t)dims[d]; /* <= plan's nbytes */
  ember_shape_text text;
  if (binding->nbytes != nbytes) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s %" PRIu32 " ('%s'): nbytes %zu "
                             "passed, the plan expects %zu (%s %s)",
                             function, role, index, tensor->name, binding->nbytes, nbytes,
                             ember_dtype_name(tensor->dtype),
                             ember_shape_text_format(dims, tensor->rank, &text));
  }
  if (binding->data == NULL && nbytes != 0) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s %" PRIu32 " ('%s'): data is NULL;"
                             " the plan expects %zu bytes",
                             function, role, index, tensor->name, nbytes);
  }
  return NULL;
}

ember_status* ember_plan_bind_inputs(const ember_plan* plan, const char* function,
                                     const ember_tensor_binding* inputs,
                                     int64_t* out_symbol_values) {
  for (uint32_t k = 0; k < plan->num_symbols; ++k) out_symbol_values[k] = -1; /* unknown */
  for (uint32_t i = 0; i < plan->num_inputs; ++i) {
    const ember_tensor_desc* tensor = &plan->tensors[plan->inputs[i]];
    const ember_tensor_binding* binding = &inputs[i];
    EMBER_RETURN_IF_ERROR(
        check_binding_header(plan, function, "input", i, tensor, binding));
    ember_shape_text have, want;
    for (uint32_t d = 0; d < tensor->rank; ++d) {
      const int64_t passed = binding->dims[d];
      const uint8_t symbol = tensor->dim_symbols[d];
      if (symbol == 0) {
        if (passed == tensor->dims[d]) continue;
        return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: input %" PRIu32 " ('%s'): shape "
                                 "%s passed, the plan expects %s (dims[%" PRIu32 "] differs)",
                                 function, i, tensor->name,
                                 ember_shape_text_format(binding->dims, binding->rank, &have),
                                 tensor_shape_text(plan, tensor, &want), d);
      }
      const ember_symbol_desc* bounds = &plan->symbols[symbol - 1u];
      const int64_t coefficient = tensor->dims[d] / bounds->max;
      /* The bounds of the dim itself: coefficient x the symbol's bounds (<= dims[d]). */
      const int64_t low = coefficient * bounds->min, high = tensor->dims[d];
      if (passed < low || passed > high || passed % coefficient != 0) {
        char multiples[48] = "";
        if (coefficient != 1) {
          snprintf(multiples, sizeof multiples, ", multiples of %" PRId64, coefficient);
        }
        return ember_status_make(
            EMBER_INVALID_ARGUMENT, "%s: input %" PRIu32 " ('%s'): dims[%" PRIu32 "] is %"
            PRId64 ", outside the bounds %" PRId64 "..%" PRId64 "%s of its dynamic size; "
            "shape %s passed, the plan expects %s",
            function, i, tensor->name, d, passed, low, high, multiples,
            ember_shape_text_format(binding->dims, binding->rank, &have),
            tensor_shape_text(plan, tensor, &want));
      }
      int64_t* value = &out_symbol_values[symbol - 1u];
      if (*value >= 0 && *value * coefficient != passed) {
        return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: input %" PRIu32 " ('%s'): dims[%"
                                 PRIu32 "] is %" PRId64 ", but earlier dims make it %" PRId64
                                 " (dynamic size s%u = %" PRId64 "); shape %s passed, the plan "
                                 "expects %s",
                                 function, i, tensor->name, d, passed, *value * coefficient,
                                 symbol - 1u, *value,
                                 ember_shape_text_format(binding->dims, binding->rank, &have),
                                 tensor_shape_text(plan, tensor, &want));
      }
      *value = passed / coefficient;
    }
    EMBER_RETURN_IF_ERROR(
        check_binding_bytes(function, "input", i, tensor, binding, binding->dims));
  }
  return NULL;
}

ember_status* ember_plan_check_outputs(const ember_plan* plan, const char* function,
                                       const ember_tensor_binding* outputs,
                                       const int64_t* symbol_values) {
  for (uint32_t i = 0; i < plan->num_outputs; ++i) {
    const ember_tensor_desc* tensor = &plan->tensors[plan->outputs[i]];
    const ember_tensor_binding* binding = &outputs[i];
    EMBER_RETURN_IF_ERROR(
        check_binding_header(plan, function, "output", i, tensor, binding));
    int64_t dims[EMBER_MAX_RANK];
    ember_plan_tensor_dims_at(plan, tensor, symbol_values, dims);
    for (uint32_t d = 0; d < tensor->rank; ++d) {
      if (binding->dims[d] == dims[d]) continue;
      ember_shape_text have, want;
      return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: output %" PRIu32 " ('%s'): shape "
                               "%s passed, the plan expects %s%s (dims[%" PRIu32 "] differs)",
                               function, i, tensor->name,
                               ember_shape_text_format(binding->dims, binding->rank, &have),
                               ember_shape_text_format(dims, tensor->rank, &want),
                               tensor->dynamic ? " for these inputs" : "", d);
    }
    EMBER_RETURN_IF_ERROR(check_binding_bytes(function, "output", i, tensor, binding, dims));
  }
  return NULL;
}

/* ---- program-level queries of dynamic shapes (ember.h, "Dynamic shapes") ---------------
 *
 * They live here, beside the checks they are made of, and read only the program's
 * verified plan (immutable after create, so no lock is taken). */

ember_status* ember_program_input_dim_bounds(const ember_program* program, size_t index,
                                             int64_t* out_min, int64_t* out_max) {
  if (program == NULL || out_min == NULL || out_max == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_input_dim_bounds: %s is "
                             "NULL",
                             program == NULL ? "program" : out_min == NULL ? "out_min"
                                                                           : "out_max");
  }
  const ember_plan* plan = &program->plan;
  if (index >= plan->num_inputs) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_input_dim_bounds: index "
                             "%zu is out of range; the program has %" PRIu32 " inputs",
                             index, plan->num_inputs);
  }
  const ember_tensor_desc* tensor = &plan->tensors[plan->inputs[index]];
  for (uint32_t d = 0; d < tensor->rank; ++d) {
    const uint8_t symbol = tensor->dim_symbols[d];
    out_max[d] = tensor->dims[d];
    out_min[d] = symbol == 0 ? tensor->dims[d]
                             : tensor->dims[d] / plan->symbols[symbol - 1u].max *
                                   plan->symbols[symbol - 1u].min;
  }
  return NULL;
}

ember_status* ember_program_resolve_outputs(const ember_program* program,
                                            const ember_tensor_binding* inputs,
                                            size_t num_inputs, ember_tensor_info* out_outputs,
                                            size_t num_outputs) {
  static const char kFunction[] = "ember_program_resolve_outputs";
  if (program == NULL || out_outputs == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s is NULL", kFunction,
                             program == NULL ? "program" : "out_outputs");
  }
  const ember_plan* plan = &program->plan;
  if (num_inputs != plan->num_inputs || num_outputs != plan->num_outputs) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %zu inputs and %zu outputs passed, "
                             "the plan takes %" PRIu32 " inputs and %" PRIu32 " outputs",
                             kFunction, num_inputs, num_outputs, plan->num_inputs,
                             plan->num_outputs);
  }
  if (num_inputs > 0 && inputs == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: the inputs array is NULL", kFunction);
  }
  int64_t symbols[EMBER_PLAN_MAX_SYMBOLS];
  EMBER_RETURN_IF_ERROR(ember_plan_bind_inputs(plan, kFunction, inputs, symbols));
  for (uint32_t i = 0; i < plan->num_outputs; ++i) {
    const ember_tensor_desc* tensor = &plan->tensors[plan->outputs[i]];
    ember_tensor_info* info = &out_outputs[i];
    memset(info, 0, sizeof *info);
    info->name = tensor->name;
    info->dtype = tensor->dtype;
    info->rank = tensor->rank;
    ember_plan_tensor_dims_at(plan, tensor, symbols, info->dims);
    size_t nbytes = ember_dtype_size(tensor->dtype);
    for (uint32_t d = 0; d < tensor->rank; ++d) nbytes *= (size_t)info->dims[d];
    info->nbytes = nbytes; /* at most the plan's nbytes, which fits */
  }
  return NULL;
}
