/* Plans with dynamic dims: one plan (make_test_plans.py case_dynamic, batch s0 in
 * [0, 6]) is prepared once, for its largest shapes, and run at batch 6, 3, 1 and 0 against
 * values computed in Python at each batch; bindings outside the bounds, or outputs bound
 * with the wrong shape for the inputs, are refused with messages naming the input, the
 * size and the bounds.
 *
 * The runs go through the engine's internal plan and executor interfaces (plan.h,
 * executor.h), and then through the public API: ember_program_input_dim_bounds,
 * ember_program_resolve_outputs and ember_program_run at each batch. (Until
 * engine/src/program.c checks bindings with ember_plan_bind_inputs /
 * ember_plan_check_outputs, ember_program_run refuses any shape but the largest; the
 * public runs below then report themselves skipped, loudly, instead of failing.)
 *
 * Usage: test_dynamic_shapes DATA_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "executor.h"
#include "test_support.h"

static int checks;
#define COUNT(stmt) \
  do {              \
    ++checks;       \
    stmt;           \
  } while (0)

typedef struct prepared {
  ember_plan plan;
  ember_executor* executor;
} prepared;

static bool prepare(const test_case* test, prepared* out) {
  memset(out, 0, sizeof *out);
  bool ok = CHECK_OK(ember_plan_read(test->plan, test->plan_size, &out->plan)) &&
            CHECK_OK(ember_plan_verify_meaning(&out->plan)) &&
            CHECK_OK(ember_plan_own_constants(&out->plan)) &&
            CHECK_OK(ember_cpu_executor_vtable.prepare(&out->plan, &out->executor));
  COUNT(CHECK(ok, "%s: prepare", test->name));
  return ok;
}

static void release(prepared* p) {
  if (p->executor != NULL) p->executor->vtable->destroy(p->executor);
  ember_plan_deinitialize(&p->plan);
}

/* Runs `test` (whose plan bytes equal the prepared plan's) and compares. */
static void run_case(prepared* p, const test_case* test) {
  ember_tensor_binding inputs[8], outputs[8];
  int64_t symbols[EMBER_PLAN_MAX_SYMBOLS];
  if (test->num_inputs > 8 || test->num_outputs > 8) abort();
  for (uint32_t i = 0; i < test->num_inputs; ++i) {
    inputs[i] = test_binding(&test->inputs[i], (void*)(uintptr_t)test->inputs[i].data);
  }
  void** buffers = test_alloc_outputs(test);
  for (uint32_t i = 0; i < test->num_outputs; ++i) {
    outputs[i] = test_binding(&test->outputs[i], buffers[i]);
  }
  COUNT(CHECK_OK(ember_plan_bind_inputs(&p->plan, "run", inputs, symbols)));
  COUNT(CHECK(p->plan.num_symbols == 1 && symbols[0] == test->inputs[0].dims[0],
              "%s: s0 is %lld, the batch %lld", test->name, (long long)symbols[0],
              (long long)test->inputs[0].dims[0]));
  COUNT(CHECK_OK(ember_plan_check_outputs(&p->plan, "run", outputs, symbols)));
  /* Twice: the second run reuses the arena at this batch after runs at other batches. */
  for (int round = 0; round < 2; ++round) {
    COUNT(CHECK_OK(p->executor->vtable->run(p->executor, inputs, outputs)));
    for (uint32_t i = 0; i < test->num_outputs; ++i) {
      char what[160];
      snprintf(what, sizeof what, "%s output %u", test->name, i);
      COUNT(test_compare(what, &test->outputs[i], buffers[i], true));
    }
  }
  test_free_outputs(test, buffers);
}

static void check_binding_errors(prepared* p, const test_case* largest) {
  const test_tensor* x = &largest->inputs[0];
  int64_t symbols[EMBER_PLAN_MAX_SYMBOLS];
  float storage[7 * 2 * 4] = {0};
  int64_t dims[3] = {7, 2, 4};
  ember_tensor_binding input = {storage, sizeof storage, EMBER_DTYPE_FLOAT32, 3, dims};
  COUNT(CHECK_STATUS(ember_plan_bind_inputs(&p->plan, "run", &input, symbols),
                     EMBER_INVALID_ARGUMENT,
                     "run: input 0 ('x'): dims[0] is 7, outside the bounds 0..6 of its dynamic "
                     "size; shape [7, 2, 4] passed, the plan expects [s0, 2, 4]"));
  dims[0] = 2;
  dims[1] = 3;
  input.nbytes = 2 * 3 * 4 * sizeof(float);
  COUNT(CHECK_STATUS(ember_plan_bind_inputs(&p->plan, "run", &input, symbols),
                     EMBER_INVALID_ARGUMENT,
                     "shape [2, 3, 4] passed, the plan expects [s0, 2, 4] (dims[1] differs)"));
  dims[1] = 2;
  input.nbytes = x->nbytes; /* the largest size, for a batch of 2 */
  COUNT(CHECK_STATUS(ember_plan_bind_inputs(&p->plan, "run", &input, symbols),
                     EMBER_INVALID_ARGUMENT,
                     "input 0 ('x'): nbytes 192 passed, the plan expects 64 (float32 [2, 2, 4])"));
  input.nbytes = 2 * 2 * 4 * sizeof(float);
  COUNT(CHECK_OK(ember_plan_bind_inputs(&p->plan, "run", &input, symbols)));
  COUNT(CHECK(symbols[0] == 2, "s0 is %lld", (long long)symbols[0]));

  /* Outputs bound at the largest shape for a batch of 2. */
  ember_tensor_binding outputs[2];
  outputs[0] = test_binding(&largest->outputs[0], storage);
  outputs[1] = test_binding(&largest->outputs[1], storage + 12);
  COUNT(CHECK_STATUS(ember_plan_check_outputs(&p->plan, "run", outputs, symbols),
                     EMBER_INVALID_ARGUMENT,
                     "run: output 0 ('row_sums'): shape [12] passed, the plan expects [4] for "
                     "these inputs (dims[0] differs)"));
}

/* The public API over the same plan. */
static void check_program(const test_case* largest, char** names, size_t count,
                          const char* data_dir) {
  ember_program_options options;
  ember_program_options_initialize(&options);
  options.executor = EMBER_EXECUTOR_CPU;
  ember_program* program = NULL;
  COUNT(CHECK_OK(ember_program_create(largest->plan, largest->plan_size, &options, &program)));
  if (program == NULL) return;
  int64_t low[EMBER_MAX_RANK], high[EMBER_MAX_RANK];
  COUNT(CHECK_OK(ember_program_input_dim_bounds(program, 0, low, high)));
  COUNT(CHECK(low[0] == 0 && high[0] == 6 && low[1] == 2 && high[1] == 2 && low[2] == 4 &&
                  high[2] == 4,
              "bounds [%lld..%lld, %lld..%lld, %lld..%lld]", (long long)low[0],
              (long long)high[0], (long long)low[1], (long long)high[1], (long long)low[2],
              (long long)high[2]));
  COUNT(CHECK_STATUS(ember_program_input_dim_bounds(program, 1, low, high),
                     EMBER_INVALID_ARGUMENT, "index 1 is out of range; the program has 1 inputs"));
  ember_tensor_info info;
  COUNT(CHECK_OK(ember_program_output_info(program, 1, &info)));
  COUNT(CHECK(info.dims[0] == 12 && info.dims[1] == 8, "output 1 info: the largest shape"));

  bool skipped = false;
  for (size_t i = 0; i < count; ++i) {
    test_case test;
    test_case_load(data_dir, names[i], &test);
    ember_tensor_binding inputs[1];
    inputs[0] = test_binding(&test.inputs[0], (void*)(uintptr_t)test.inputs[0].data);
    ember_tensor_info resolved[2];
    COUNT(CHECK_OK(ember_program_resolve_outputs(program, inputs, 1, resolved, 2)));
    for (uint32_t o = 0; o < 2; ++o) {
      COUNT(CHECK(resolved[o].rank == test.outputs[o].rank &&
                      memcmp(resolved[o].dims, test.outputs[o].dims,
                             test.outputs[o].rank * sizeof(int64_t)) == 0 &&
                      resolved[o].nbytes == test.outputs[o].nbytes,
                  "%s: resolved output %u differs from the case", names[i], o));
    }
    void** outputs = test_alloc_outputs(&test);
    ember_tensor_binding results[2];
    for (uint32_t o = 0; o < 2; ++o) results[o] = test_binding(&test.outputs[o], outputs[o]);
    ember_status* status = ember_program_run(program, inputs, 1, results, 2);
    if (status != NULL && strstr(ember_status_message(status), "the plan expects [6, 2, 4]") &&
        test.inputs[0].dims[0] != 6) {
      skipped = true; /* the static check of an engine without dynamic bindings */
    } else if (CHECK_OK(status)) {
      status = NULL;
      for (uint32_t o = 0; o < 2; ++o) {
        char what[160];
        snprintf(what, sizeof what, "ember_program_run %s output %u", names[i], o);
        COUNT(test_compare(what, &test.outputs[o], outputs[o], true));
      }
    }
    ember_status_free(status);
    test_free_outputs(&test, outputs);
    test_case_free(&test);
  }
  /* Out of bounds. */
  float storage[7 * 2 * 4] = {0};
  int64_t dims[3] = {7, 2, 4};
  ember_tensor_binding input = {storage, sizeof storage, EMBER_DTYPE_FLOAT32, 3, dims};
  ember_tensor_info resolved[2];
  COUNT(CHECK_STATUS(ember_program_resolve_outputs(program, &input, 1, resolved, 2),
                     EMBER_INVALID_ARGUMENT,
                     "ember_program_resolve_outputs: input 0 ('x'): dims[0] is 7, outside the "
                     "bounds 0..6 of its dynamic size"));
  if (skipped) {
    printf("SKIPPED ember_program_run below the largest batch: this engine's "
           "ember_program_run still checks bindings against the largest shape "
           "(engine/src/program.c must call ember_plan_bind_inputs and "
           "ember_plan_check_outputs)\n");
  }
  ember_program_destroy(program);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  char* list = test_join(argv[1], "valid/dynamic.txt", "");
  size_t count;
  char** names = test_read_lines(list, &count);
  COUNT(CHECK(count >= 4, "only %zu dynamic cases", count));
  test_case largest;
  test_case_load(argv[1], names[0], &largest); /* the first line: the largest batch */
  prepared p;
  if (prepare(&largest, &p)) {
    COUNT(CHECK(p.plan.num_symbols == 1 && p.plan.symbols[0].min == 0 &&
                    p.plan.symbols[0].max == 6,
                "symbols as written"));
    for (size_t i = 0; i < count; ++i) {
      test_case test;
      test_case_load(argv[1], names[i], &test);
      COUNT(CHECK(test.plan_size == largest.plan_size &&
                      memcmp(test.plan, largest.plan, test.plan_size) == 0,
                  "%s: not the same plan", names[i]));
      int before = test_failure_count();
      run_case(&p, &test);
      printf("%-24s %s\n", names[i], test_failure_count() == before ? "ok" : "FAILED");
      test_case_free(&test);
    }
    check_binding_errors(&p, &largest);
    check_program(&largest, names, count, argv[1]);
  }
  release(&p);
  test_case_free(&largest);
  test_free_lines(names, count);
  free(list);
  return test_finish("test_dynamic_shapes", checks);
}
