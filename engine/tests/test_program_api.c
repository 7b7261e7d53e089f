/* The public API around a program: argument checks, bindings checked against the plan
 * with messages naming the input or output, executor choice, info getters, status
 * helpers, and that a program keeps no pointer into the caller's plan.
 *
 * Usage: test_program_api DATA_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static int checks;
#define COUNT(stmt) \
  do {              \
    ++checks;       \
    stmt;           \
  } while (0)

static void test_status_and_names(void) {
  COUNT(CHECK(ember_status_code_of(NULL) == EMBER_OK, "code of NULL"));
  COUNT(CHECK(strcmp(ember_status_message(NULL), "ok") == 0, "message of NULL"));
  ember_status_free(NULL);
  COUNT(CHECK(strcmp(ember_status_code_name(EMBER_INVALID_PLAN), "EMBER_INVALID_PLAN") == 0,
              "code name"));
  COUNT(CHECK(strcmp(ember_status_code_name((ember_status_code)42), "unknown") == 0,
              "unknown code name"));
  COUNT(CHECK(ember_dtype_size(EMBER_DTYPE_FLOAT32) == 4 &&
                  ember_dtype_size(EMBER_DTYPE_FLOAT16) == 2 &&
                  ember_dtype_size(EMBER_DTYPE_BFLOAT16) == 2 &&
                  ember_dtype_size(EMBER_DTYPE_INT64) == 8 &&
                  ember_dtype_size(EMBER_DTYPE_INT32) == 4 && ember_dtype_size(EMBER_DTYPE_BOOL) == 1 &&
                  ember_dtype_size((ember_dtype)0) == 0 && ember_dtype_size((ember_dtype)7) == 0,
              "dtype sizes"));
  COUNT(CHECK(strcmp(ember_dtype_name(EMBER_DTYPE_BFLOAT16), "bfloat16") == 0 &&
                  strcmp(ember_dtype_name((ember_dtype)99), "unknown") == 0,
              "dtype names"));
  COUNT(CHECK(strcmp(ember_executor_kind_name(EMBER_EXECUTOR_CUDA), "cuda") == 0 &&
                  strcmp(ember_executor_kind_name((ember_executor_kind)9), "unknown") == 0,
              "executor names"));
  COUNT(CHECK(strcmp(ember_version_string(), "0.1.0") == 0, "version %s",
              ember_version_string()));
  ember_program_options options;
  memset(&options, 0x5A, sizeof options);
  ember_program_options_initialize(&options);
  COUNT(CHECK(options.executor == EMBER_EXECUTOR_AUTO, "default executor"));
  ember_program_options_initialize(NULL);
}

static void test_create_errors(const test_case* test) {
  ember_program* program = NULL;
  COUNT(CHECK_STATUS(ember_program_create(test->plan, test->plan_size, NULL, NULL),
                     EMBER_INVALID_ARGUMENT, "out_program is NULL"));
  COUNT(CHECK_STATUS(ember_program_create(NULL, 10, NULL, &program), EMBER_INVALID_ARGUMENT,
                     "plan is NULL"));
  COUNT(CHECK_STATUS(ember_plan_verify(NULL, 0), EMBER_INVALID_ARGUMENT,
                     "plan pointer is NULL"));
  ember_program_options options;
  ember_program_options_initialize(&options);
  options.executor = EMBER_EXECUTOR_CUDA;
#if defined(EMBER_TEST_CUDA_BUILD)
  /* A CUDA build: with a GPU this works; without one the error names what is missing
   * (tests/cuda/test_cuda_executor_choice.c checks the messages). */
  ember_status* cuda_status = ember_program_create(test->plan, test->plan_size, &options,
                                                   &program);
  if (cuda_status == NULL) {
    COUNT(CHECK(ember_program_executor(program) == EMBER_EXECUTOR_CUDA, "CUDA requested"));
    ember_program_destroy(program);
    program = NULL;
  } else {
    COUNT(CHECK_STATUS(cuda_status, EMBER_UNAVAILABLE, "CUDA executor"));
  }
#else
  COUNT(CHECK_STATUS(ember_program_create(test->plan, test->plan_size, &options, &program),
                     EMBER_UNAVAILABLE, "this engine was built without CUDA"));
#endif
  COUNT(CHECK(program == NULL, "program set after a failed create"));
  options.executor = (ember_executor_kind)7;
  COUNT(CHECK_STATUS(ember_program_create(test->plan, test->plan_size, &options, &program),
                     EMBER_INVALID_ARGUMENT, "options->executor 7 is not"));
  options.executor = EMBER_EXECUTOR_AUTO;
  COUNT(CHECK_OK(ember_program_create(test->plan, test->plan_size, &options, &program)));
  /* AUTO gives CUDA where it can run, else the CPU with the reason kept. */
  COUNT(CHECK(ember_program_executor(program) == EMBER_EXECUTOR_CUDA
                  ? ember_program_fallback_reason(program) == NULL
                  : ember_program_executor(program) == EMBER_EXECUTOR_CPU &&
                        ember_program_fallback_reason(program) != NULL,
              "AUTO gives CUDA, or the CPU with a fallback reason"));
  ember_program_destroy(program);
  ember_program_destroy(NULL);
  COUNT(CHECK(ember_program_executor(NULL) == EMBER_EXECUTOR_AUTO, "executor of NULL"));
  COUNT(CHECK(ember_program_input_count(NULL) == 0 && ember_program_output_count(NULL) == 0,
              "counts of NULL"));
}

static void test_info(ember_program* program) {
  ember_tensor_info info;
  COUNT(CHECK_OK(ember_program_input_info(program, 0, &info)));
  COUNT(CHECK(strcmp(info.name, "tokens") == 0 && info.dtype == EMBER_DTYPE_FLOAT32 &&
                  info.rank == 2 && info.dims[0] == 4 && info.dims[1] == 8 && info.dims[2] == 0 &&
                  info.nbytes == 128,
              "input 0 info: %s rank %u", info.name, info.rank));
  COUNT(CHECK_OK(ember_program_output_info(program, 1, &info)));
  COUNT(CHECK(strcmp(info.name, "gate") == 0 && info.dims[1] == 16, "output 1 info: %s",
              info.name));
  COUNT(CHECK_STATUS(ember_program_input_info(program, 1, &info), EMBER_INVALID_ARGUMENT,
                     "index 1 is out of range; the program has 1 inputs"));
  COUNT(CHECK_STATUS(ember_program_output_info(program, 2, &info), EMBER_INVALID_ARGUMENT,
                     "index 2 is out of range; the program has 2 outputs"));
  COUNT(CHECK_STATUS(ember_program_output_info(program, 0, NULL), EMBER_INVALID_ARGUMENT,
                     "out_info is NULL"));
  COUNT(CHECK_STATUS(ember_program_input_info(NULL, 0, &info), EMBER_INVALID_ARGUMENT,
                     "program is NULL"));
}

/* Runs with the case's bindings after `mutate` has changed one of them. */
typedef struct bindings {
  ember_tensor_binding inputs[4];
  ember_tensor_binding outputs[4];
  int64_t dims[EMBER_MAX_RANK];
} bindings;

static void reset(const test_case* test, void** outputs, bindings* b) {
  for (uint32_t i = 0; i < test->num_inputs; ++i) {
    b->inputs[i] = test_binding(&test->inputs[i], (void*)(uintptr_t)test->inputs[i].data);
  }
  for (uint32_t i = 0; i < test->num_outputs; ++i) {
    b->outputs[i] = test_binding(&test->outputs[i], outputs[i]);
  }
}

static void test_binding_errors(ember_program* program, const test_case* test) {
  void** outputs = test_alloc_outputs(test);
  bindings b;
  const size_t ni = test->num_inputs, no = test->num_outputs;

  reset(test, outputs, &b);
  COUNT(CHECK_OK(ember_program_run(program, b.inputs, ni, b.outputs, no)));
  COUNT(CHECK_STATUS(ember_program_run(NULL, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT, "program is NULL"));
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni + 1, b.outputs, no),
                     EMBER_INVALID_ARGUMENT, "2 inputs and 2 outputs passed, the plan takes 1 "
                                             "inputs and 2 outputs"));
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no - 1),
                     EMBER_INVALID_ARGUMENT, "1 outputs passed"));
  COUNT(CHECK_STATUS(ember_program_run(program, NULL, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT, "the inputs array is NULL"));
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, NULL, no),
                     EMBER_INVALID_ARGUMENT, "the outputs array is NULL"));

  b.inputs[0].dtype = EMBER_DTYPE_FLOAT16;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "input 0 ('tokens'): dtype float16 (2) passed, the plan expects float32"));
  reset(test, outputs, &b);
  b.outputs[1].dtype = (ember_dtype)77;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "output 1 ('gate'): dtype unknown (77) passed, the plan expects float32"));
  reset(test, outputs, &b);
  b.inputs[0].rank = 3;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "input 0 ('tokens'): rank 3 passed, the plan expects rank 2 [4, 8]"));
  reset(test, outputs, &b);
  b.outputs[0].dims = NULL;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT, "output 0 ('hidden'): dims is NULL for rank 2"));
  reset(test, outputs, &b);
  b.dims[0] = 8;
  b.dims[1] = 4;
  b.inputs[0].dims = b.dims;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "input 0 ('tokens'): shape [8, 4] passed, the plan expects [4, 8] "
                     "(dims[0] differs)"));
  reset(test, outputs, &b);
  b.outputs[0].nbytes = 64;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "output 0 ('hidden'): nbytes 64 passed, the plan expects 128 (float32 "
                     "[4, 8])"));
  reset(test, outputs, &b);
  b.inputs[0].data = NULL;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "input 0 ('tokens'): data is NULL; the plan expects 128 bytes"));
  reset(test, outputs, &b);
  b.outputs[1].data = NULL;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT, "output 1 ('gate'): data is NULL"));

  /* Aliasing: an output over an input, and two outputs over each other. */
  uint8_t* shared = calloc(1, 512);
  reset(test, outputs, &b);
  memcpy(shared, test->inputs[0].data, test->inputs[0].nbytes);
  b.inputs[0].data = shared;
  b.outputs[0].data = shared + 64;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "output 0 ('hidden') shares memory with input 0 ('tokens')"));
  reset(test, outputs, &b);
  b.outputs[0].data = shared;
  b.outputs[1].data = shared + 100;
  COUNT(CHECK_STATUS(ember_program_run(program, b.inputs, ni, b.outputs, no),
                     EMBER_INVALID_ARGUMENT,
                     "output 0 ('hidden') shares memory with output 1 ('gate')"));
  /* Adjacent, not overlapping: accepted. */
  reset(test, outputs, &b);
  b.outputs[0].data = shared;
  b.outputs[1].data = shared + 128;
  COUNT(CHECK_OK(ember_program_run(program, b.inputs, ni, b.outputs, no)));
  free(shared);

  /* Nothing above touched the outputs of the first, good run... and a good run still
   * works after all those errors. */
  COUNT(CHECK(test_run_and_compare(program, test, outputs, true), "run after errors"));
  test_free_outputs(test, outputs);
}

/* The program copies what it needs: the plan buffer can be scribbled over and freed. */
static void test_plan_not_retained(const test_case* test) {
  uint8_t* copy = malloc(test->plan_size);
  memcpy(copy, test->plan, test->plan_size);
  ember_program* program = NULL;
  COUNT(CHECK_OK(ember_program_create(copy, test->plan_size, NULL, &program)));
  memset(copy, 0xEE, test->plan_size);
  free(copy);
  void** outputs = test_alloc_outputs(test);
  ember_tensor_info info;
  COUNT(CHECK_OK(ember_program_input_info(program, 0, &info)));
  COUNT(CHECK(strcmp(info.name, "tokens") == 0, "name after the plan was freed: %s",
              info.name));
  COUNT(CHECK(test_run_and_compare(program, test, outputs, true), "run after freeing the plan"));
  test_free_outputs(test, outputs);
  ember_program_destroy(program);
}

/* A plan without inputs, and zero-size tensors whose data may be NULL. */
static void test_edge_bindings(const char* data_dir) {
  test_case test;
  test_case_load(data_dir, "constants_only", &test);
  ember_program* program = NULL;
  COUNT(CHECK_OK(ember_program_create(test.plan, test.plan_size, NULL, &program)));
  void** outputs = test_alloc_outputs(&test);
  ember_tensor_binding out = test_binding(&test.outputs[0], outputs[0]);
  COUNT(CHECK_OK(ember_program_run(program, NULL, 0, &out, 1)));
  COUNT(CHECK(test_compare("constants_only", &test.outputs[0], outputs[0], true), "values"));
  test_free_outputs(&test, outputs);
  ember_program_destroy(program);
  test_case_free(&test);

  test_case_load(data_dir, "zero_size", &test);
  COUNT(CHECK_OK(ember_program_create(test.plan, test.plan_size, NULL, &program)));
  outputs = test_alloc_outputs(&test);
  ember_tensor_binding in[2] = {test_binding(&test.inputs[0], NULL),
                                test_binding(&test.inputs[1], NULL)};
  ember_tensor_binding outs[2] = {test_binding(&test.outputs[0], NULL),
                                  test_binding(&test.outputs[1], outputs[1])};
  COUNT(CHECK_OK(ember_program_run(program, in, 2, outs, 2)));
  COUNT(CHECK(test_compare("zero_size bias rows", &test.outputs[1], outputs[1], true),
              "values"));
  test_free_outputs(&test, outputs);
  ember_program_destroy(program);
  test_case_free(&test);
}

/* Data a plan cannot rule out: an EMBEDDING index out of range is an error of the run,
 * naming the op, the index and its position, and the program stays usable. */
static void test_run_time_errors(const char* data_dir) {
  test_case test;
  test_case_load(data_dir, "embedding", &test);
  ember_program_options options;
  ember_program_options_initialize(&options);
  options.executor = EMBER_EXECUTOR_CPU;
  ember_program* program = NULL;
  COUNT(CHECK_OK(ember_program_create(test.plan, test.plan_size, &options, &program)));
  if (program != NULL) {
    int64_t indices[6];
    memcpy(indices, test.inputs[0].data, sizeof indices);
    void** outputs = test_alloc_outputs(&test);
    ember_tensor_binding inputs[2], results[2];
    for (uint32_t k = 0; k < 2; ++k) {
      inputs[k] = test_binding(&test.inputs[k], (void*)(uintptr_t)test.inputs[k].data);
      results[k] = test_binding(&test.outputs[k], outputs[k]);
    }
    for (int bad = 0; bad < 2; ++bad) {
      int64_t wrong[6];
      memcpy(wrong, indices, sizeof wrong);
      wrong[1] = bad == 0 ? 10 : -1;
      inputs[0].data = wrong;
      COUNT(CHECK_STATUS(ember_program_run(program, inputs, 2, results, 2),
                         EMBER_INVALID_ARGUMENT,
                         bad == 0 ? "op 0 (EMBEDDING): index 10 at position 1 of"
                                  : "op 0 (EMBEDDING): index -1 at position 1 of"));
    }
    inputs[0].data = (void*)(uintptr_t)test.inputs[0].data;
    COUNT(CHECK(test_run_and_compare(program, &test, outputs, true), "run after the error"));
    test_free_outputs(&test, outputs);
    ember_program_destroy(program);
  }
  test_case_free(&test);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  test_case test;
  test_case_load(argv[1], "mlp_f32", &test);
  test_status_and_names();
  test_create_errors(&test);
  ember_program* program = NULL;
  COUNT(CHECK_OK(ember_program_create(test.plan, test.plan_size, NULL, &program)));
  if (program != NULL) {
    test_info(program);
    test_binding_errors(program, &test);
    ember_program_destroy(program);
  }
  test_plan_not_retained(&test);
  test_edge_bindings(argv[1]);
  test_run_time_errors(argv[1]);
  test_case_free(&test);
  return test_finish("test_program_api", checks);
}
