/* LINEAR and MATMUL on cuBLASLt (cuda_gemm.h says how the plan's row-major ops map). */
#include "cuda_gemm.h"

#include "cuda_driver.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LT_CHECK(lt, expr, call_text)                                     \
  do {                                                                    \
    cublasStatus_t ember_lt_result_ = (expr);                             \
    if (ember_lt_result_ != CUBLAS_STATUS_SUCCESS) {                      \
      return ember_cublaslt_status((lt), ember_lt_result_, (call_text));  \
    }                                                                     \
  } while (0)

static cudaDataType_t data_type(ember_dtype dtype) {
  switch (dtype) {
    case EMBER_DTYPE_FLOAT16: return CUDA_R_16F;
    case EMBER_DTYPE_BFLOAT16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

/* The largest power of two (at most 256) dividing `value`; 256 for 0. */
static uint32_t alignment_of(uint64_t value) {
  if (value == 0) return 256u;
  const uint64_t lowest = value & (~value + 1u);
  return lowest >= 256u ? 256u : (uint32_t)lowest;
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

/* Creates a layout and records in *out_key what it was given. */
static ember_status* make_layout(const ember_cublaslt_library* lt, cudaDataType_t type,
                                 uint64_t rows, uint64_t cols, int64_t ld, int32_t batch,
                                 int64_t batch_stride, cublasLtMatrixLayout_t* out_layout,
                                 ember_cuda_gemm_layout_key* out_key) {
  *out_key = (ember_cuda_gemm_layout_key){.type = type, .rows = rows, .cols = cols, .ld = ld,
                                          .batch = batch > 1 ? batch : 1,
                                          .batch_stride = batch > 1 ? batch_stride : 0};
  LT_CHECK(lt, lt->cublasLtMatrixLayoutCreate(out_layout, type, rows, cols, ld),
           "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    LT_CHECK(lt, lt->cublasLtMatrixLayoutSetAttribute(*out_layout,
                                                      CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batch, sizeof batch),
             "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    LT_CHECK(lt, lt->cublasLtMatrixLayoutSetAttribute(
                     *out_layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                     sizeof batch_stride),
             "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return NULL;
}

/* The descriptor of every GEMM: float32 accumulation and scale, and the transposes;
 * recorded in the key. */
static ember_status* make_desc(const ember_cublaslt_library* lt, ember_cuda_gemm* gemm,
                               int32_t transa, int32_t transb) {
  gemm->key.compute_type = CUBLAS_COMPUTE_32F;
  gemm->key.scale_type = CUDA_R_32F;
  gemm->key.transa = transa;
  gemm->key.transb = transb;
  LT_CHECK(lt, lt->cublasLtMatmulDescCreate(&gemm->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  LT_CHECK(lt, lt->cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                  &transa, sizeof transa),
           "cublasLtMatmulDescSetAttribute(TRANSA)");
  LT_CHECK(lt, lt->cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                  &transb, sizeof transb),
           "cublasLtMatmulDescSetAttribute(TRANSB)");
  return NULL;
}

/* cublasLtMatmulAlgoGetHeuristic on the GEMM's descriptor and layouts, with a preference
 * made from the key (so the key is what cuBLASLt saw). */
static ember_status* ask_heuristic(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                   const ember_cuda_gemm* gemm,
                                   ember_cuda_gemm_candidates* out_candidates) {
  out_candidates->count = 0;
  cublasLtMatmulPreference_t preference = NULL;
  LT_CHECK(lt, lt->cublasLtMatmulPreferenceCreate(&preference),
           "cublasLtMatmulPreferenceCreate");
  const uint64_t workspace = gemm->key.max_workspace;
  static const cublasLtMatmulPreferenceAttributes_t alignment_attrs[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasStatus_t result = lt->cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
  for (int i = 0; i < 4 && result == CUBLAS_STATUS_SUCCESS; ++i) {
    const uint32_t alignment = (uint32_t)gemm->key.min_alignment[i];
    result = lt->cublasLtMatmulPreferenceSetAttribute(preference, alignment_attrs[i],
                                                      &alignment, sizeof alignment);
  }
  cublasLtMatmulHeuristicResult_t heuristics[EMBER_CUDA_GEMM_CANDIDATES];
  memset(heuristics, 0, sizeof heuristics);
  int found = 0;
  if (result == CUBLAS_STATUS_SUCCESS) {
    result = lt->cublasLtMatmulAlgoGetHeuristic(handle, gemm->desc, gemm->a_layout,
                                                gemm->b_layout, gemm->d_layout, gemm->d_layout,
                                                preference, (int)gemm->key.requested,
                                                heuristics, &found);
  }
  lt->cublasLtMatmulPreferenceDestroy(preference);
  /* NOT_SUPPORTED is how the heuristic says "nothing for this configuration". */
  if (result == CUBLAS_STATUS_NOT_SUPPORTED) return NULL;
  if (result != CUBLAS_STATUS_SUCCESS) {
    return ember_cublaslt_status(lt, result, "cublasLtMatmulAlgoGetHeuristic");
  }
  for (int i = 0; i < found && i < EMBER_CUDA_GEMM_CANDIDATES; ++i) {
    if (heuristics[i].state != CUBLAS_STATUS_SUCCESS) continue;
    out_candidates->algos[out_candidates->count] = heuristics[i].algo;
    out_candidates->workspace[out_candidates->count] = heuristics[i].workspaceSize;
    ++out_candidates->count;
  }
  return NULL;
}

/* Sets `epilogue` (and the bias pointer it reads) and finds the GEMM's candidates: from
 * the process's cache when the key was seen, else from the heuristic (then cached).
 * *out_found is false (and no error) when there are none. */
static ember_status* find_algorithm(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                    ember_cuda_gemm* gemm, cublasLtEpilogue_t epilogue,
                                    uint64_t bias_address, const uint32_t alignments[4],
                                    size_t max_workspace, bool* out_found) {
  *out_found = false;
  uint32_t epilogue_value = (uint32_t)epilogue;
  gemm->key.epilogue = epilogue;
  LT_CHECK(lt, lt->cublasLtMatmulDescSetAttribute(gemm->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                  &epilogue_value, sizeof epilogue_value),
           "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  if (epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
      epilogue == CUBLASLT_EPILOGUE_GELU_BIAS) {
    /* The heuristic reads the pointer's alignment; enqueue sets the real one each time.
     * (Once set it stays set for later tries, and so does the key's record of it.) */
    const void* bias = (const void*)(uintptr_t)bias_address;
    gemm->key.bias_set = 1;
    gemm->key.bias_alignment = bias_address == 0 ? 0 : alignment_of(bias_address);
    LT_CHECK(lt, lt->cublasLtMatmulDescSetAttribute(gemm->desc,
                                                    CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof bias),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  gemm->key.max_workspace = max_workspace;
  for (int i = 0; i < 4; ++i) gemm->key.min_alignment[i] = alignments[i];
  gemm->key.requested = EMBER_CUDA_GEMM_CANDIDATES;

  ember_cuda_gemm_candidates candidates;
  memset(&candidates, 0, sizeof candidates);
  if (ember_cuda_gemm_cache_find(&gemm->key, &candidates)) {
    ++gemm->heuristic_hits;
  } else {
    ++gemm->heuristic_misses;
    EMBER_RETURN_IF_ERROR(ask_heuristic(lt, handle, gemm, &candidates));
    ember_cuda_gemm_cache_add(&gemm->key, &candidates);
  }
  gemm->num_candidates = candidates.count;
  memcpy(gemm->candidates, candidates.algos, candidates.count * sizeof candidates.algos[0]);
  memcpy(gemm->candidate_workspace, candidates.workspace,
         candidates.count * sizeof candidates.workspace[0]);
  if (gemm->num_candidates == 0) return NULL;
  ember_cuda_gemm_choose(gemm, 0);
  *out_found = true;
  return NULL;
}

void ember_cuda_gemm_choose(ember_cuda_gemm* gemm, uint32_t c) {
  gemm->chosen = c;
  gemm->algo = gemm->candidates[c];
  gemm->workspace_size = gemm->candidate_workspace[c];
}

size_t ember_cuda_gemm_max_candidate_workspace(const ember_cuda_gemm* gemm) {
  size_t most = gemm->workspace_size;
  for (uint32_t c = 0; c < gemm->num_candidates && c < EMBER_CUDA_GEMM_TIMED_CANDIDATES; ++c) {
    if (gemm->candidate_workspace[c] > most) most = gemm->candidate_workspace[c];
  }
  return most;
}

static cublasLtEpilogue_t epilogue_for(bool bias, ember_cuda_gemm_activation activation) {
  switch (activation) {
    case EMBER_CUDA_GEMM_ACT_RELU:
      return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case EMBER_CUDA_GEMM_ACT_GELU_TANH:
      return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default:
      return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

static int32_t unary_op_for(ember_cuda_gemm_activation activation) {
  switch (activation) {
    case EMBER_CUDA_GEMM_ACT_RELU: return EMBER_K_UNARY_RELU;
    case EMBER_CUDA_GEMM_ACT_GELU_TANH: return EMBER_K_UNARY_GELU_TANH;
    default: return EMBER_K_UNARY_IDENTITY;
  }
}

/* Fills the shapes, batching and layouts of a MATMUL. */
static ember_status* describe_matmul(const ember_cublaslt_library* lt, const ember_plan* plan,
                                     const ember_op_desc* op, ember_cuda_gemm* gemm,
                                     int64_t* out_strides /* a, b, d batch strides */,
                                     int32_t* out_batch) {
  const ember_tensor_desc* a = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* b = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const int64_t M = a->dims[a->rank - 2], K = a->dims[a->rank - 1], N = b->dims[b->rank - 1];
  const uint32_t batch_rank = y->rank - 2;
  int64_t ad[EMBER_MAX_RANK], bd[EMBER_MAX_RANK];
  int64_t a_numel = 1, b_numel = 1, y_numel = 1;
  bool a_full = true, b_full = true;
  for (uint32_t i = 0; i < batch_rank; ++i) {
    const uint32_t a_pad = batch_rank - (a->rank - 2), b_pad = batch_rank - (b->rank - 2);
    ad[i] = i < a_pad ? 1 : a->dims[i - a_pad];
    bd[i] = i < b_pad ? 1 : b->dims[i - b_pad];
    a_numel *= ad[i];
    b_numel *= bd[i];
    y_numel *= y->dims[i];
    if (ad[i] != y->dims[i]) a_full = false;
    if (bd[i] != y->dims[i]) b_full = false;
  }
  /* cuBLASLt's A is b, its B is a (see cuda_gemm.h). */
  gemm->a_tensor = ember_plan_op_input(plan, op, 1);
  gemm->b_tensor = ember_plan_op_input(plan, op, 0);
  gemm->m = (uint64_t)N;
  gemm->k = (uint64_t)K;
  gemm->calls = 1;
  *out_batch = 1;
  out_strides[0] = out_strides[1] = out_strides[2] = 0;
  if (b_numel == 1 && (a_full || a_numel == 1)) {
    gemm->n = (uint64_t)(M * y_numel); /* a's batches fold into M: one GEMM */
  } else if ((a_full || a_numel == 1) && (b_full || b_numel == 1) && y_numel <= INT32_MAX) {
    gemm->n = (uint64_t)M;
    *out_batch = (int32_t)y_numel;
    out_strides[0] = b_numel == 1 ? 0 : K * N;
    out_strides[1] = a_numel == 1 ? 0 : M * K;
    out_strides[2] = M * N;
  } else {
    /* Mixed broadcast: one GEMM per output batch position. */
    gemm->n = (uint64_t)M;
    gemm->calls = (uint64_t)y_numel;
    gemm->loop_rank = batch_rank;
    int64_t a_stride = M * K, b_stride = K * N, d_stride = M * N;
    for (uint32_t i = batch_rank; i-- > 0;) {
      gemm->loop_dims[i] = y->dims[i];
      gemm->a_loop_strides[i] = bd[i] == 1 ? 0 : b_stride; /* cuBLASLt A = b */
      gemm->b_loop_strides[i] = ad[i] == 1 ? 0 : a_stride;
      gemm->d_loop_strides[i] = d_stride;
      b_stride *= bd[i];
      a_stride *= ad[i];
      d_stride *= y->dims[i];
    }
  }
  const cudaDataType_t type = data_type(y->dtype);
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, (uint64_t)N, (uint64_t)K, N, *out_batch,
                                    out_strides[0], &gemm->a_layout, &gemm->key.a));
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, (uint64_t)K, gemm->n, K, *out_batch,
                                    out_strides[1], &gemm->b_layout, &gemm->key.b));
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, (uint64_t)N, gemm->n, N, *out_batch,
                                    out_strides[2], &gemm->d_layout, &gemm->key.d));
  return NULL;
}

static ember_status* describe_linear(const ember_cublaslt_library* lt, const ember_plan* plan,
                                     const ember_op_desc* op, ember_cuda_gemm* gemm,
                                     int32_t* out_transa) {
  const ember_tensor_desc* x = ember_plan_op_input_tensor(plan, op, 0);
  const ember_tensor_desc* w = ember_plan_op_input_tensor(plan, op, 1);
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  const bool w_is_nk = ember_plan_op_attr(plan, op, EMBER_ATTR_LINEAR_WEIGHT_LAYOUT) == 0;
  const int64_t K = x->dims[x->rank - 1];
  const int64_t N = w_is_nk ? w->dims[0] : w->dims[1];
  const int64_t M = K == 0 ? 0 : (int64_t)(x->numel / (uint64_t)K);
  gemm->a_tensor = ember_plan_op_input(plan, op, 1);
  gemm->b_tensor = ember_plan_op_input(plan, op, 0);
  gemm->bias_tensor = op->num_inputs == 3 ? ember_plan_op_input(plan, op, 2) : EMBER_PLAN_NO_INDEX;
  gemm->m = (uint64_t)N;
  gemm->n = (uint64_t)M;
  gemm->k = (uint64_t)K;
  gemm->calls = 1;
  *out_transa = w_is_nk ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cudaDataType_t type = data_type(y->dtype);
  /* w [N, K] row-major is column-major [K, N] (ld K), used transposed; w [K, N] row-major
   * is column-major [N, K] (ld N), used as is. */
  EMBER_RETURN_IF_ERROR(w_is_nk ? make_layout(lt, type, (uint64_t)K, (uint64_t)N, K, 1, 0,
                                              &gemm->a_layout, &gemm->key.a)
                                : make_layout(lt, type, (uint64_t)N, (uint64_t)K, N, 1, 0,
                                              &gemm->a_layout, &gemm->key.a));
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, (uint64_t)K, (uint64_t)M, K, 1, 0,
                                    &gemm->b_layout, &gemm->key.b));
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, (uint64_t)N, (uint64_t)M, N, 1, 0,
                                    &gemm->d_layout, &gemm->key.d));
  return NULL;
}

static ember_status* gemm_prepare(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                  const ember_cuda_gemm_request* request,
                                  ember_cuda_gemm* gemm) {
  const ember_plan* plan = request->plan;
  const ember_op_desc* op = &plan->ops[request->op_index];
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  gemm->element_size = ember_dtype_size(y->dtype);
  gemm->bias_tensor = EMBER_PLAN_NO_INDEX;
  gemm->d_tensor = ember_plan_op_output(plan, op, 0);

  ember_cuda_gemm_activation activation = EMBER_CUDA_GEMM_ACT_NONE;
  if (request->fused_op_index != EMBER_PLAN_NO_INDEX) {
    const ember_op_desc* fused = &plan->ops[request->fused_op_index];
    activation = fused->opcode == EMBER_OP_RELU ? EMBER_CUDA_GEMM_ACT_RELU
                                                : EMBER_CUDA_GEMM_ACT_GELU_TANH;
    gemm->d_tensor = ember_plan_op_output(plan, fused, 0);
  }

  gemm->key.device = request->device;
  int32_t transa = CUBLAS_OP_N;
  int64_t batch_strides[3] = {0, 0, 0};
  int32_t batch = 1;
  if (op->opcode == EMBER_OP_LINEAR) {
    EMBER_RETURN_IF_ERROR(describe_linear(lt, plan, op, gemm, &transa));
  } else {
    EMBER_RETURN_IF_ERROR(describe_matmul(lt, plan, op, gemm, batch_strides, &batch));
  }
  EMBER_RETURN_IF_ERROR(make_desc(lt, gemm, transa, CUBLAS_OP_N));

  /* Alignments the algorithm may rely on: each pointer's, and each batch or loop step's. */
  const size_t es = gemm->element_size;
  uint32_t alignments[4] = {
      alignment_of(request->address(request->address_context, gemm->a_tensor)),
      alignment_of(request->address(request->address_context, gemm->b_tensor)), 0,
      alignment_of(request->address(request->address_context, gemm->d_tensor))};
  alignments[0] = min_u32(alignments[0], alignment_of((uint64_t)batch_strides[0] * es));
  alignments[1] = min_u32(alignments[1], alignment_of((uint64_t)batch_strides[1] * es));
  alignments[3] = min_u32(alignments[3], alignment_of((uint64_t)batch_strides[2] * es));
  for (uint32_t i = 0; i < gemm->loop_rank; ++i) {
    alignments[0] = min_u32(alignments[0], alignment_of((uint64_t)gemm->a_loop_strides[i] * es));
    alignments[1] = min_u32(alignments[1], alignment_of((uint64_t)gemm->b_loop_strides[i] * es));
    alignments[3] = min_u32(alignments[3], alignment_of((uint64_t)gemm->d_loop_strides[i] * es));
  }
  alignments[2] = alignments[3]; /* C is D */
  const bool has_bias = gemm->bias_tensor != EMBER_PLAN_NO_INDEX;
  const uint64_t bias_address =
      has_bias ? request->address(request->address_context, gemm->bias_tensor) : 0;

  /* Fused bias and activation first; then the bias alone; then a plain GEMM. What the
   * GEMM does not do, the bias_act kernel does after it. */
  const struct {
    bool bias;
    ember_cuda_gemm_activation activation;
  } tries[3] = {{has_bias, activation}, {has_bias, EMBER_CUDA_GEMM_ACT_NONE},
                {false, EMBER_CUDA_GEMM_ACT_NONE}};
  for (int t = 0; t < 3; ++t) {
    if (t > 0 && tries[t].bias == tries[t - 1].bias &&
        tries[t].activation == tries[t - 1].activation) {
      continue;
    }
    bool found = false;
    EMBER_RETURN_IF_ERROR(find_algorithm(lt, handle, gemm,
                                         epilogue_for(tries[t].bias, tries[t].activation),
                                         bias_address, alignments, request->max_workspace,
                                         &found));
    if (found) {
      gemm->bias_fused = tries[t].bias;
      gemm->activation_fused = tries[t].activation;
      gemm->needs_bias_act = (has_bias && !tries[t].bias) || activation != tries[t].activation;
      gemm->bias_act_activation =
          activation != tries[t].activation ? unary_op_for(activation) : EMBER_K_UNARY_IDENTITY;
      return NULL;
    }
  }
  return ember_status_make(EMBER_UNAVAILABLE,
                           "cuda executor: op %" PRIu32 " (%s): cuBLASLt has no algorithm for "
                           "m=%" PRIu64 " n=%" PRIu64 " k=%" PRIu64 " %s",
                           request->op_index, ember_opcode_name(op->opcode), gemm->m, gemm->n,
                           gemm->k, ember_dtype_name(y->dtype));
}

/* The executor loads cuBLASLt only for plans that have GEMMs (executor_needs_cublaslt in
 * cuda_executor.c); a GEMM it missed is a bug in that check, said as such. */
static ember_status* check_loaded(const ember_cublaslt_library* lt, cublasLtHandle_t handle) {
  if (lt != NULL && handle != NULL) return NULL;
  return ember_status_make(EMBER_INTERNAL, "cuda executor: a GEMM is being prepared but "
                           "cuBLASLt was not loaded for this program (executor_needs_cublaslt in "
                           "cuda_executor.c must count this op)");
}

ember_status* ember_cuda_gemm_prepare(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                      const ember_cuda_gemm_request* request,
                                      ember_cuda_gemm* out_gemm) {
  memset(out_gemm, 0, sizeof *out_gemm);
  ember_status* status = check_loaded(lt, handle);
  if (status == NULL) status = gemm_prepare(lt, handle, request, out_gemm);
  if (status != NULL) {
    ember_cuda_gemm_release(lt, out_gemm);
    char context[96];
    snprintf(context, sizeof context, "op %" PRIu32 " (%s)", request->op_index,
             ember_opcode_name(request->plan->ops[request->op_index].opcode));
    if (ember_status_code_of(status) != EMBER_UNAVAILABLE) {
      status = ember_cuda_annotate(status, "%s", context);
    }
  }
  return status;
}

static ember_status* gemm_prepare_plain(const ember_cublaslt_library* lt,
                                        cublasLtHandle_t handle,
                                        const ember_cuda_gemm_plain* request,
                                        ember_cuda_gemm* gemm) {
  gemm->a_tensor = gemm->b_tensor = gemm->bias_tensor = gemm->d_tensor = EMBER_PLAN_NO_INDEX;
  gemm->element_size = ember_dtype_size(request->dtype);
  gemm->m = request->m;
  gemm->n = request->n;
  gemm->k = request->k;
  gemm->calls = 1;
  gemm->key.device = request->device;
  const cudaDataType_t type = data_type(request->dtype);
  const cudaDataType_t d_type = data_type(request->d_dtype);
  EMBER_RETURN_IF_ERROR(
      make_desc(lt, gemm, request->transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N));
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, request->transpose_a ? request->k : request->m,
                                    request->transpose_a ? request->m : request->k, request->lda,
                                    request->batch, request->strides[0], &gemm->a_layout,
                                    &gemm->key.a));
  EMBER_RETURN_IF_ERROR(make_layout(lt, type, request->k, request->n, request->ldb,
                                    request->batch, request->strides[1], &gemm->b_layout,
                                    &gemm->key.b));
  EMBER_RETURN_IF_ERROR(make_layout(lt, d_type, request->m, request->n, request->ldd,
                                    request->batch, request->strides[2], &gemm->d_layout,
                                    &gemm->key.d));
  const size_t es = gemm->element_size, d_es = ember_dtype_size(request->d_dtype);
  uint32_t alignments[4] = {
      min_u32(request->alignments[0], alignment_of((uint64_t)request->strides[0] * es)),
      min_u32(request->alignments[1], alignment_of((uint64_t)request->strides[1] * es)), 0,
      min_u32(request->alignments[2], alignment_of((uint64_t)request->strides[2] * d_es))};
  alignments[2] = alignments[3]; /* C is D */
  bool found = false;
  if (request->relu) {
    EMBER_RETURN_IF_ERROR(find_algorithm(lt, handle, gemm, CUBLASLT_EPILOGUE_RELU, 0,
                                         alignments, request->max_workspace, &found));
    if (found) gemm->activation_fused = EMBER_CUDA_GEMM_ACT_RELU;
  }
  if (!found) {
    EMBER_RETURN_IF_ERROR(find_algorithm(lt, handle, gemm, CUBLASLT_EPILOGUE_DEFAULT, 0,
                                         alignments, request->max_workspace, &found));
  }
  if (!found) {
    return ember_status_make(EMBER_UNAVAILABLE, "cuda executor: cuBLASLt has no algorithm for "
                             "m=%" PRIu64 " n=%" PRIu64 " k=%" PRIu64 " batch %" PRId32 " %s",
                             request->m, request->n, request->k, request->batch,
                             ember_dtype_name(request->dtype));
  }
  return NULL;
}

ember_status* ember_cuda_gemm_prepare_plain(const ember_cublaslt_library* lt,
                                            cublasLtHandle_t handle,
                                            const ember_cuda_gemm_plain* request,
                                            ember_cuda_gemm* out_gemm) {
  memset(out_gemm, 0, sizeof *out_gemm);
  ember_status* status = check_loaded(lt, handle);
  if (status == NULL) status = gemm_prepare_plain(lt, handle, request, out_gemm);
  if (status != NULL) ember_cuda_gemm_release(lt, out_gemm);
  return status;
}

ember_status* ember_cuda_gemm_enqueue(const ember_cublaslt_library* lt, cublasLtHandle_t handle,
                                      const ember_cuda_gemm* gemm, uint64_t a, uint64_t b,
                                      uint64_t bias, uint64_t c, uint64_t d, uint64_t workspace,
                                      CUstream stream) {
  if (gemm->bias_fused) {
    const void* bias_pointer = (const void*)(uintptr_t)bias;
    LT_CHECK(lt, lt->cublasLtMatmulDescSetAttribute(gemm->desc,
                                                    CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias_pointer, sizeof bias_pointer),
             "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  const float alpha = 1.0f, beta = c != 0 ? 1.0f : 0.0f;
  const uint64_t es = gemm->element_size;
  for (uint64_t call = 0; call < gemm->calls; ++call) {
    int64_t a_offset = 0, b_offset = 0, d_offset = 0;
    uint64_t rest = call;
    for (uint32_t i = gemm->loop_rank; i-- > 0;) {
      const int64_t index = (int64_t)(rest % (uint64_t)gemm->loop_dims[i]);
      rest /= (uint64_t)gemm->loop_dims[i];
      a_offset += index * gemm->a_loop_strides[i];
      b_offset += index * gemm->b_loop_strides[i];
      d_offset += index * gemm->d_loop_strides[i];
    }
    void* d_pointer = (void*)(uintptr_t)(d + (uint64_t)d_offset * es);
    /* C has D's layout (and so its batch stride and offsets); with beta 0 it is not read. */
    const void* c_pointer = c != 0 ? (const void*)(uintptr_t)(c + (uint64_t)d_offset * es) : d_pointer;
    LT_CHECK(lt,
             lt->cublasLtMatmul(handle, gemm->desc, &alpha,
                                (const void*)(uintptr_t)(a + (uint64_t)a_offset * es),
                                gemm->a_layout,
                                (const void*)(uintptr_t)(b + (uint64_t)b_offset * es),
                                gemm->b_layout, &beta, c_pointer, gemm->d_layout, d_pointer,
                                gemm->d_layout, &gemm->algo,
                                (void*)(uintptr_t)workspace, gemm->workspace_size, stream),
             "cublasLtMatmul");
  }
  return NULL;
}

void ember_cuda_gemm_release(const ember_cublaslt_library* lt, ember_cuda_gemm* gemm) {
  if (lt != NULL) {
    if (gemm->a_layout != NULL) lt->cublasLtMatrixLayoutDestroy(gemm->a_layout);
    if (gemm->b_layout != NULL) lt->cublasLtMatrixLayoutDestroy(gemm->b_layout);
    if (gemm->d_layout != NULL) lt->cublasLtMatrixLayoutDestroy(gemm->d_layout);
    if (gemm->desc != NULL) lt->cublasLtMatmulDescDestroy(gemm->desc);
  }
  memset(gemm, 0, sizeof *gemm);
}

/* ---- the heuristic cache (cuda_gemm.h) ------------------------------------------------ */

_Static_assert(sizeof(ember_cuda_gemm_key) % sizeof(uint64_t) == 0 &&
                   sizeof(ember_cuda_gemm_layout_key) == 6 * sizeof(uint64_t),
               "the key is 64-bit fields only, without padding, so memcmp compares it");

typedef struct cache_entry {
  uint64_t hash;
  ember_cuda_gemm_key key;
  ember_cuda_gemm_candidates candidates;
} cache_entry;

/* Static storage: bounded, never freed, untouched pages cost nothing. A linear scan
 * over at most 512 hashes is noise beside one heuristic call (~ms). */
static pthread_mutex_t cache_mutex = PTHREAD_MUTEX_INITIALIZER;
static cache_entry cache_entries[EMBER_CUDA_GEMM_CACHE_ENTRIES];
static uint32_t cache_count;
static uint64_t cache_hits, cache_misses;

static uint64_t key_hash(const ember_cuda_gemm_key* key) {
  const uint8_t* bytes = (const uint8_t*)key;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < sizeof *key; ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

/* The entry holding `key`, or NULL. Call with cache_mutex held. */
static const cache_entry* cache_lookup(const ember_cuda_gemm_key* key, uint64_t hash) {
  for (uint32_t i = 0; i < cache_count; ++i) {
    const cache_entry* entry = &cache_entries[i];
    if (entry->hash == hash && memcmp(&entry->key, key, sizeof *key) == 0) return entry;
  }
  return NULL;
}

bool ember_cuda_gemm_cache_find(const ember_cuda_gemm_key* key,
                                ember_cuda_gemm_candidates* out_candidates) {
  const uint64_t hash = key_hash(key);
  pthread_mutex_lock(&cache_mutex);
  const cache_entry* entry = cache_lookup(key, hash);
  if (entry != NULL) {
    *out_candidates = entry->candidates;
    ++cache_hits;
  } else {
    ++cache_misses;
  }
  pthread_mutex_unlock(&cache_mutex);
  return entry != NULL;
}

void ember_cuda_gemm_cache_add(const ember_cuda_gemm_key* key,
                               const ember_cuda_gemm_candidates* candidates) {
  const uint64_t hash = key_hash(key);
  pthread_mutex_lock(&cache_mutex);
  /* Two threads may ask about one key at once; the first answer is kept. */
  if (cache_count < EMBER_CUDA_GEMM_CACHE_ENTRIES && cache_lookup(key, hash) == NULL) {
    cache_entry* entry = &cache_entries[cache_count++];
    entry->hash = hash;
    entry->key = *key;
    entry->candidates = *candidates;
  }
  pthread_mutex_unlock(&cache_mutex);
}

void ember_cuda_gemm_cache_get_stats(ember_cuda_gemm_cache_stats* out_stats) {
  pthread_mutex_lock(&cache_mutex);
  out_stats->hits = cache_hits;
  out_stats->misses = cache_misses;
  out_stats->entries = cache_count;
  pthread_mutex_unlock(&cache_mutex);
}
