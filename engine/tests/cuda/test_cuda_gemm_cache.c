/* The GEMM heuristic cache (cuda_gemm.c), on any machine: no GPU, no cuBLASLt. GEMMs are
 * prepared against a fake cuBLASLt table whose heuristic answers from everything it is
 * given (descriptor, layouts, preference) and counts its calls, so this checks:
 *
 *   - the same GEMM prepared twice asks the heuristic once and gets the same candidates;
 *   - a GEMM that differs in any one thing the heuristic sees (dtype, transpose,
 *     epilogue, sizes, leading dims, batch and strides, alignments, workspace, device,
 *     the bias pointer's alignment) asks again, and gets what the heuristic says for it;
 *   - "no algorithm" is kept too; a heuristic error is not;
 *   - the workspace covers the candidates the executor times, not all 8;
 *   - a GEMM prepared without cuBLASLt loaded is an EMBER_INTERNAL error naming the check;
 *   - the cache from several threads at once, and when full (it stops adding).
 *
 * Usage: test_cuda_gemm_cache DATA_DIR (the CUDA op plans: a LINEAR with a bias) */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_gemm.h"
#include "test_support.h"

#define COUNT(x) TEST_COUNT(x)
#define EXPECT(cond, ...) TEST_EXPECT(cond, __VA_ARGS__)

/* ---- a fake cuBLASLt ------------------------------------------------------------------ */

typedef struct fake_layout {
  int64_t values[7]; /* type, rows, cols, ld, batch count, batch offset, (unused) */
} fake_layout;

typedef struct fake_desc {
  int64_t compute, scale, transa, transb, epilogue;
  uintptr_t bias;
  bool bias_set;
} fake_desc;

typedef struct fake_preference {
  uint64_t workspace;
  uint32_t alignments[4];
} fake_preference;

static int g_heuristic_calls;
static int g_live_objects; /* created minus destroyed */

static uint64_t mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xffu)) * 1099511628211ull;
  return h;
}

static cublasStatus_t fake_desc_create(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                       cudaDataType_t scale) {
  fake_desc* d = calloc(1, sizeof *d);
  d->compute = compute;
  d->scale = scale;
  ++g_live_objects;
  *desc = (cublasLtMatmulDesc_t)(void*)d;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_desc_destroy(cublasLtMatmulDesc_t desc) {
  free(desc);
  --g_live_objects;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_desc_set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                    const void* buf, size_t size) {
  fake_desc* d = (fake_desc*)(void*)desc;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: memcpy(&i32, buf, sizeof i32); d->transa = i32; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: memcpy(&i32, buf, sizeof i32); d->transb = i32; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: memcpy(&u32, buf, sizeof u32); d->epilogue = u32; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      memcpy(&d->bias, buf, sizeof d->bias);
      d->bias_set = true;
      break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  (void)size;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_layout_create(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                         uint64_t rows, uint64_t cols, int64_t ld) {
  fake_layout* l = calloc(1, sizeof *l);
  l->values[0] = type;
  l->values[1] = (int64_t)rows;
  l->values[2] = (int64_t)cols;
  l->values[3] = ld;
  l->values[4] = 1;
  ++g_live_objects;
  *layout = (cublasLtMatrixLayout_t)(void*)l;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_layout_destroy(cublasLtMatrixLayout_t layout) {
  free(layout);
  --g_live_objects;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_layout_set(cublasLtMatrixLayout_t layout,
                                      cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                      size_t size) {
  fake_layout* l = (fake_layout*)(void*)layout;
  if (attr == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) {
    int32_t count;
    memcpy(&count, buf, sizeof count);
    l->values[4] = count;
  } else if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) {
    memcpy(&l->values[5], buf, sizeof l->values[5]);
  } else {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  (void)size;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_preference_create(cublasLtMatmulPreference_t* preference) {
  fake_preference* p = calloc(1, sizeof *p);
  ++g_live_objects;
  *preference = (cublasLtMatmulPreference_t)(void*)p;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_preference_destroy(cublasLtMatmulPreference_t preference) {
  free(preference);
  --g_live_objects;
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t fake_preference_set(cublasLtMatmulPreference_t preference,
                                          cublasLtMatmulPreferenceAttributes_t attr,
                                          const void* buf, size_t size) {
  fake_preference* p = (fake_preference*)(void*)preference;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: memcpy(&p->workspace, buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: memcpy(&p->alignments[0], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: memcpy(&p->alignments[1], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: memcpy(&p->alignments[2], buf, size); break;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: memcpy(&p->alignments[3], buf, size); break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
  }
  return CUBLAS_STATUS_SUCCESS;
}

/* The handle stands for a device: which one is what it points at. */
static int g_devices[2] = {0, 1};

/* The algorithms the fake heuristic gives for everything it saw: a hash of it. */
static uint64_t fake_answer(cublasLtHandle_t handle, const fake_desc* d, const fake_layout* a,
                            const fake_layout* b, const fake_layout* c, const fake_layout* dl,
                            const fake_preference* p, int requested) {
  uint64_t h = 1469598103934665603ull;
  h = mix(h, (uint64_t)*(const int*)(const void*)handle);
  h = mix(h, (uint64_t)d->compute);
  h = mix(h, (uint64_t)d->scale);
  h = mix(h, (uint64_t)d->transa);
  h = mix(h, (uint64_t)d->transb);
  h = mix(h, (uint64_t)d->epilogue);
  h = mix(h, d->bias_set);
  /* Like cuBLASLt, it reads the bias pointer's alignment, not where it points. */
  h = mix(h, d->bias & 255u);
  const fake_layout* layouts[4] = {a, b, c, dl};
  for (int l = 0; l < 4; ++l) {
    for (int v = 0; v < 6; ++v) h = mix(h, (uint64_t)layouts[l]->values[v]);
  }
  h = mix(h, p->workspace);
  for (int i = 0; i < 4; ++i) h = mix(h, p->alignments[i]);
  return mix(h, (uint64_t)requested);
}

/* Rows (A's first dim) that make the fake answer "nothing" (NOT_SUPPORTED) for a ReLU
 * epilogue, and an error for anything. */
#define FAKE_NO_RELU_ROWS 77
#define FAKE_ERROR_ROWS 13

static cublasStatus_t fake_heuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                     cublasLtMatmulPreference_t preference, int requested,
                                     cublasLtMatmulHeuristicResult_t results[], int* returned) {
  ++g_heuristic_calls;
  const fake_desc* fd = (const fake_desc*)(const void*)desc;
  const fake_layout* fa = (const fake_layout*)(const void*)a;
  if (fa->values[1] == FAKE_ERROR_ROWS) return CUBLAS_STATUS_INTERNAL_ERROR;
  if (fa->values[1] == FAKE_NO_RELU_ROWS && fd->epilogue == CUBLASLT_EPILOGUE_RELU) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const uint64_t answer = fake_answer(handle, fd, fa, (const fake_layout*)(const void*)b,
                                      (const fake_layout*)(const void*)c,
                                      (const fake_layout*)(const void*)d,
                                      (const fake_preference*)(const void*)preference, requested);
  for (int i = 0; i < requested; ++i) {
    memset(&results[i], 0, sizeof results[i]);
    results[i].algo.data[0] = answer;
    results[i].algo.data[1] = (uint64_t)i;
    results[i].workspaceSize = (size_t)(i + 1) * 1024u;
    results[i].state = CUBLAS_STATUS_SUCCESS;
  }
  *returned = requested;
  return CUBLAS_STATUS_SUCCESS;
}

static ember_cublaslt_library fake_library(void) {
  ember_cublaslt_library lt;
  memset(&lt, 0, sizeof lt);
  lt.cublasLtMatmulDescCreate = fake_desc_create;
  lt.cublasLtMatmulDescDestroy = fake_desc_destroy;
  lt.cublasLtMatmulDescSetAttribute = fake_desc_set;
  lt.cublasLtMatrixLayoutCreate = fake_layout_create;
  lt.cublasLtMatrixLayoutDestroy = fake_layout_destroy;
  lt.cublasLtMatrixLayoutSetAttribute = fake_layout_set;
  lt.cublasLtMatmulPreferenceCreate = fake_preference_create;
  lt.cublasLtMatmulPreferenceDestroy = fake_preference_destroy;
  lt.cublasLtMatmulPreferenceSetAttribute = fake_preference_set;
  lt.cublasLtMatmulAlgoGetHeuristic = fake_heuristic;
  return lt;
}

/* ---- plain GEMMs: one field at a time --------------------------------------------------- */

static ember_cuda_gemm_plain base_request(void) {
  ember_cuda_gemm_plain r;
  memset(&r, 0, sizeof r);
  r.dtype = EMBER_DTYPE_FLOAT16;
  r.d_dtype = EMBER_DTYPE_FLOAT16;
  r.m = 64;
  r.n = 32;
  r.k = 48;
  r.lda = 64;
  r.ldb = 48;
  r.ldd = 64;
  r.batch = 3;
  r.strides[0] = 64 * 48;
  r.strides[1] = 48 * 32;
  r.strides[2] = 64 * 32;
  r.alignments[0] = r.alignments[1] = r.alignments[2] = 256;
  r.max_workspace = 1u << 20;
  r.device = 0;
  return r;
}

typedef struct prepared {
  ember_status* status;
  int calls; /* heuristic calls it made */
  uint32_t hits, misses;
  uint32_t count;
  cublasLtMatmulAlgo_t first;
  ember_cuda_gemm_activation activation;
  size_t workspace;
} prepared;

static prepared prepare_plain(const ember_cublaslt_library* lt, const ember_cuda_gemm_plain* r) {
  prepared p;
  memset(&p, 0, sizeof p);
  ember_cuda_gemm gemm;
  const int before = g_heuristic_calls;
  cublasLtHandle_t handle = (cublasLtHandle_t)(void*)&g_devices[r->device];
  p.status = ember_cuda_gemm_prepare_plain(lt, handle, r, &gemm);
  p.calls = g_heuristic_calls - before;
  if (p.status == NULL) {
    p.hits = gemm.heuristic_hits;
    p.misses = gemm.heuristic_misses;
    p.count = gemm.num_candidates;
    p.first = gemm.candidates[0];
    p.activation = gemm.activation_fused;
    p.workspace = ember_cuda_gemm_max_candidate_workspace(&gemm);
    ember_cuda_gemm_release(lt, &gemm);
  }
  return p;
}

/* What the fake heuristic says for r, asked directly (not through the cache). */
static uint64_t direct_answer(const ember_cuda_gemm_plain* r) {
  fake_desc d = {.compute = CUBLAS_COMPUTE_32F, .scale = CUDA_R_32F,
                 .transa = r->transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, .transb = CUBLAS_OP_N,
                 .epilogue = r->relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT};
  const int64_t type = r->dtype == EMBER_DTYPE_FLOAT16 ? CUDA_R_16F
                       : r->dtype == EMBER_DTYPE_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
  const int64_t d_type = r->d_dtype == EMBER_DTYPE_FLOAT16 ? CUDA_R_16F
                         : r->d_dtype == EMBER_DTYPE_BFLOAT16 ? CUDA_R_16BF : CUDA_R_32F;
  const int64_t batch = r->batch > 1 ? r->batch : 1;
  fake_layout a = {{type, (int64_t)(r->transpose_a ? r->k : r->m),
                    (int64_t)(r->transpose_a ? r->m : r->k), r->lda, batch,
                    batch > 1 ? r->strides[0] : 0, 0}};
  fake_layout b = {{type, (int64_t)r->k, (int64_t)r->n, r->ldb, batch,
                    batch > 1 ? r->strides[1] : 0, 0}};
  fake_layout dl = {{d_type, (int64_t)r->m, (int64_t)r->n, r->ldd, batch,
                     batch > 1 ? r->strides[2] : 0, 0}};
  /* Alignments as cuda_gemm.c computes them: the address's and each stride's. */
  const size_t es = ember_dtype_size(r->dtype), d_es = ember_dtype_size(r->d_dtype);
  uint32_t al[3];
  for (int i = 0; i < 3; ++i) {
    const uint64_t stride_bytes = (uint64_t)(batch > 1 ? r->strides[i] : 0) * (i == 2 ? d_es : es);
    uint32_t s = 256u;
    if (stride_bytes != 0) {
      const uint64_t lowest = stride_bytes & (~stride_bytes + 1u);
      s = lowest >= 256u ? 256u : (uint32_t)lowest;
    }
    al[i] = r->alignments[i] < s ? r->alignments[i] : s;
  }
  fake_preference p = {.workspace = r->max_workspace, .alignments = {al[0], al[1], al[2], al[2]}};
  return fake_answer((cublasLtHandle_t)(void*)&g_devices[r->device], &d, &a, &b, &dl, &dl, &p,
                     EMBER_CUDA_GEMM_CANDIDATES);
}

static void check_plain(const ember_cublaslt_library* lt) {
  const ember_cuda_gemm_plain base = base_request();
  const prepared first = prepare_plain(lt, &base);
  if (!COUNT(CHECK_OK(first.status))) return;
  EXPECT(first.calls == 1 && first.misses == 1 && first.hits == 0,
         "first GEMM: %d heuristic calls, %u misses, %u hits (expected 1, 1, 0)", first.calls,
         first.misses, first.hits);
  EXPECT(first.count == EMBER_CUDA_GEMM_CANDIDATES, "%u candidates", first.count);
  EXPECT(first.first.data[0] == direct_answer(&base),
         "the candidates are not what the heuristic says for this GEMM");
  /* Candidate c needs (c + 1) KiB: only the timed ones count. */
  EXPECT(first.workspace == EMBER_CUDA_GEMM_TIMED_CANDIDATES * 1024u,
         "workspace %zu covers candidates the executor never times (expected %u)",
         first.workspace, EMBER_CUDA_GEMM_TIMED_CANDIDATES * 1024u);

  const prepared again = prepare_plain(lt, &base);
  if (COUNT(CHECK_OK(again.status))) {
    EXPECT(again.calls == 0 && again.hits == 1 && again.misses == 0,
           "the same GEMM again: %d heuristic calls, %u hits (expected 0, 1)", again.calls,
           again.hits);
    EXPECT(again.count == first.count &&
               memcmp(&again.first, &first.first, sizeof first.first) == 0,
           "the cache gave other candidates than the heuristic did");
  }

  /* One field at a time: each must ask the heuristic again, and get its own answer. */
  ember_cuda_gemm_plain variants[24];
  const char* names[24];
  int n = 0;
#define VARIANT(field_name, statement)       \
  do {                                       \
    variants[n] = base;                      \
    ember_cuda_gemm_plain* v = &variants[n]; \
    statement;                               \
    names[n++] = field_name;                 \
  } while (0)
  VARIANT("dtype", v->dtype = EMBER_DTYPE_BFLOAT16);
  VARIANT("d_dtype", v->d_dtype = EMBER_DTYPE_FLOAT32);
  VARIANT("transpose_a", (v->transpose_a = true, v->lda = 48));
  VARIANT("relu (epilogue)", v->relu = true);
  VARIANT("m", (v->m = 72, v->lda = 72, v->ldd = 72));
  VARIANT("n", v->n = 40);
  VARIANT("k", (v->k = 56, v->ldb = 56));
  VARIANT("lda", v->lda = 80);
  VARIANT("ldb", v->ldb = 64);
  VARIANT("ldd", v->ldd = 96);
  VARIANT("batch", v->batch = 5);
  VARIANT("batch 1 (no batch attributes)", v->batch = 1);
  VARIANT("A's batch stride", v->strides[0] = 64 * 48 + 8);
  VARIANT("B's batch stride", v->strides[1] = 0);
  VARIANT("D's batch stride", v->strides[2] = 64 * 32 * 2);
  VARIANT("A's alignment", v->alignments[0] = 16);
  VARIANT("B's alignment", v->alignments[1] = 8);
  VARIANT("D's alignment", v->alignments[2] = 4);
  VARIANT("max workspace", v->max_workspace = 1u << 21);
  VARIANT("device", v->device = 1);
#undef VARIANT
  for (int i = 0; i < n; ++i) {
    const prepared p = prepare_plain(lt, &variants[i]);
    if (!COUNT(CHECK_OK(p.status))) continue;
    EXPECT(p.calls == 1 && p.misses == 1 && p.hits == 0,
           "a GEMM differing in %s was answered from the cache (%d heuristic calls)", names[i],
           p.calls);
    EXPECT(p.first.data[0] == direct_answer(&variants[i]),
           "%s: the candidates are not what the heuristic says for this GEMM", names[i]);
    EXPECT(p.first.data[0] != first.first.data[0], "%s: same answer as the base GEMM", names[i]);
    const prepared hit = prepare_plain(lt, &variants[i]);
    if (COUNT(CHECK_OK(hit.status))) {
      EXPECT(hit.calls == 0 && hit.hits == 1 &&
                 memcmp(&hit.first, &p.first, sizeof p.first) == 0,
             "%s, prepared again: %d heuristic calls, or other candidates", names[i], hit.calls);
    }
  }

  /* No ReLU algorithm: the plain one is used, and both answers are kept. */
  ember_cuda_gemm_plain no_relu = base;
  no_relu.relu = true;
  no_relu.m = FAKE_NO_RELU_ROWS;
  no_relu.lda = no_relu.ldd = FAKE_NO_RELU_ROWS;
  for (int round = 0; round < 2; ++round) {
    const prepared p = prepare_plain(lt, &no_relu);
    if (!COUNT(CHECK_OK(p.status))) continue;
    EXPECT(p.activation == EMBER_CUDA_GEMM_ACT_NONE, "round %d: ReLU fused without an algorithm",
           round);
    EXPECT(p.calls == (round == 0 ? 2 : 0) && p.hits == (round == 0 ? 0u : 2u),
           "round %d: %d heuristic calls, %u hits (the \"none\" for ReLU is cached too)", round,
           p.calls, p.hits);
  }

  /* A heuristic error is returned, and not cached: asked again next time. */
  ember_cuda_gemm_plain failing = base;
  failing.m = FAKE_ERROR_ROWS;
  failing.lda = failing.ldd = FAKE_ERROR_ROWS;
  for (int round = 0; round < 2; ++round) {
    const prepared p = prepare_plain(lt, &failing);
    COUNT(CHECK_STATUS(p.status, EMBER_INTERNAL, "cublasLtMatmulAlgoGetHeuristic"));
    EXPECT(p.calls == 1, "round %d: a failed heuristic was not asked again", round);
  }

  /* Not loaded: a bug in the executor's check, said as such. */
  ember_cuda_gemm gemm;
  COUNT(CHECK_STATUS(ember_cuda_gemm_prepare_plain(NULL, NULL, &base, &gemm), EMBER_INTERNAL,
                     "executor_needs_cublaslt"));
}

/* ---- a LINEAR from a plan: the bias pointer's alignment ----------------------------------- */

static uint64_t g_bias_address;
static uint32_t g_bias_tensor;

static uint64_t address_of(void* context, uint32_t tensor) {
  (void)context;
  return tensor == g_bias_tensor ? g_bias_address : 0x7f0000000000ull + 256u * tensor;
}

static void check_linear(const ember_cublaslt_library* lt, const char* dir) {
  char* path = test_join(dir, "linear_l0_bias_f32", ".plan");
  size_t size;
  uint8_t* bytes = test_read_file(path, &size);
  free(path);
  ember_plan plan;
  if (!COUNT(CHECK_OK(ember_plan_read(bytes, size, &plan)))) {
    free(bytes);
    return;
  }
  uint32_t op = UINT32_MAX;
  if (COUNT(CHECK_OK(ember_plan_verify_meaning(&plan)))) {
    for (uint32_t i = 0; i < plan.num_ops; ++i) {
      if (plan.ops[i].opcode == EMBER_OP_LINEAR && plan.ops[i].num_inputs == 3) op = i;
    }
  }
  if (EXPECT(op != UINT32_MAX, "linear_l0_bias_f32 has no LINEAR with a bias")) {
    g_bias_tensor = ember_plan_op_input(&plan, &plan.ops[op], 2);
    const ember_cuda_gemm_request request = {.plan = &plan, .op_index = op,
                                             .fused_op_index = EMBER_PLAN_NO_INDEX,
                                             .address = address_of, .max_workspace = 1u << 20};
    const uint64_t bias_addresses[3] = {0x7f0000100000ull, 0x7f0000200004ull,
                                        0x7f0000300000ull};
    /* 256-aligned: asks; 4-aligned: asks again; elsewhere but 256-aligned: cached. */
    const int expected_calls[3] = {1, 1, 0};
    cublasLtHandle_t handle = (cublasLtHandle_t)(void*)&g_devices[0];
    for (int i = 0; i < 3; ++i) {
      g_bias_address = bias_addresses[i];
      ember_cuda_gemm gemm;
      const int before = g_heuristic_calls;
      if (!COUNT(CHECK_OK(ember_cuda_gemm_prepare(lt, handle, &request, &gemm)))) continue;
      EXPECT(gemm.bias_fused, "bias %d not fused", i);
      EXPECT(g_heuristic_calls - before == expected_calls[i],
             "bias at 0x%" PRIx64 ": %d heuristic calls, expected %d", bias_addresses[i],
             g_heuristic_calls - before, expected_calls[i]);
      ember_cuda_gemm_release(lt, &gemm);
    }
  }
  ember_plan_deinitialize(&plan);
  free(bytes);
}

/* ---- the cache itself: threads, and full -------------------------------------------------- */

static ember_cuda_gemm_key numbered_key(uint64_t number) {
  ember_cuda_gemm_key key;
  memset(&key, 0, sizeof key);
  key.device = 7; /* no prepared GEMM above has it */
  key.a.rows = number;
  return key;
}

static ember_cuda_gemm_candidates numbered_candidates(uint64_t number) {
  ember_cuda_gemm_candidates c;
  memset(&c, 0, sizeof c);
  c.count = 1;
  c.algos[0].data[0] = number;
  return c;
}

#define THREAD_KEYS 64
static void* thread_body(void* arg) {
  const uint64_t offset = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < THREAD_KEYS; ++i) {
    const uint64_t number = 1000000u + (i + offset) % THREAD_KEYS;
    const ember_cuda_gemm_key key = numbered_key(number);
    ember_cuda_gemm_candidates found;
    if (!ember_cuda_gemm_cache_find(&key, &found)) {
      const ember_cuda_gemm_candidates c = numbered_candidates(number);
      ember_cuda_gemm_cache_add(&key, &c);
    } else if (found.algos[0].data[0] != number) {
      return (void*)1;
    }
  }
  return NULL;
}

static void check_threads(void) {
  ember_cuda_gemm_cache_stats before, after;
  ember_cuda_gemm_cache_get_stats(&before);
  pthread_t threads[4];
  for (uintptr_t t = 0; t < 4; ++t) pthread_create(&threads[t], NULL, thread_body, (void*)(t * 16));
  bool all_right = true;
  for (int t = 0; t < 4; ++t) {
    void* result;
    pthread_join(threads[t], &result);
    if (result != NULL) all_right = false;
  }
  EXPECT(all_right, "a thread found another key's candidates");
  ember_cuda_gemm_cache_get_stats(&after);
  EXPECT(after.entries - before.entries == THREAD_KEYS,
         "%u entries added by 4 threads over %d keys (each key once)",
         after.entries - before.entries, THREAD_KEYS);
  EXPECT(after.hits + after.misses - before.hits - before.misses == 4u * THREAD_KEYS,
         "hits and misses do not add up to the lookups");
}

static void check_full(void) {
  ember_cuda_gemm_cache_stats stats;
  ember_cuda_gemm_cache_get_stats(&stats);
  const uint32_t room = EMBER_CUDA_GEMM_CACHE_ENTRIES - stats.entries;
  for (uint32_t i = 0; i <= room; ++i) { /* one more than fits */
    const ember_cuda_gemm_key key = numbered_key(2000000u + i);
    const ember_cuda_gemm_candidates c = numbered_candidates(2000000u + i);
    ember_cuda_gemm_cache_add(&key, &c);
  }
  ember_cuda_gemm_cache_get_stats(&stats);
  EXPECT(stats.entries == EMBER_CUDA_GEMM_CACHE_ENTRIES, "%u entries in a cache of %d",
         stats.entries, EMBER_CUDA_GEMM_CACHE_ENTRIES);
  ember_cuda_gemm_candidates found;
  const ember_cuda_gemm_key last_in = numbered_key(2000000u + room - 1u);
  const ember_cuda_gemm_key left_out = numbered_key(2000000u + room);
  EXPECT(room == 0 || (ember_cuda_gemm_cache_find(&last_in, &found) &&
                       found.algos[0].data[0] == 2000000u + room - 1u),
         "the last key that fitted is not found");
  EXPECT(!ember_cuda_gemm_cache_find(&left_out, &found), "a key past the bound was kept");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  const ember_cublaslt_library lt = fake_library();
  check_plain(&lt);
  check_linear(&lt, argv[1]);
  EXPECT(g_live_objects == 0, "%d fake cuBLASLt objects not destroyed", g_live_objects);
  check_threads();
  check_full();
  ember_cuda_gemm_cache_stats stats;
  ember_cuda_gemm_cache_get_stats(&stats);
  printf("heuristic cache: %" PRIu64 " hits, %" PRIu64 " misses, %u entries; %d heuristic "
         "calls\n", stats.hits, stats.misses, stats.entries, g_heuristic_calls);
  return test_finish("test_cuda_gemm_cache", test_counted_checks());
}
