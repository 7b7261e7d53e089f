/* Numerics of every op: each plan written by make_test_plans.py runs on the CPU executor
 * and its outputs are compared with values computed independently in Python.
 *
 * Usage: test_ops DATA_DIR [CASE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static int run_case(const char* data_dir, const char* name) {
  int checks = 0;
  test_case test;
  test_case_load(data_dir, name, &test);

  ++checks;
  CHECK_OK(ember_plan_verify(test.plan, test.plan_size));

  ember_program_options options;
  ember_program_options_initialize(&options);
  options.executor = EMBER_EXECUTOR_CPU;
  ember_program* program = NULL;
  ++checks;
  if (!CHECK_OK(ember_program_create(test.plan, test.plan_size, &options, &program))) {
    test_case_free(&test);
    return checks;
  }
  ++checks;
  CHECK(ember_program_executor(program) == EMBER_EXECUTOR_CPU, "%s: executor", name);
  ++checks;
  CHECK(ember_program_input_count(program) == test.num_inputs &&
            ember_program_output_count(program) == test.num_outputs,
        "%s: I/O counts %zu/%zu, case has %u/%u", name, ember_program_input_count(program),
        ember_program_output_count(program), test.num_inputs, test.num_outputs);
  for (uint32_t i = 0; i < test.num_outputs; ++i) {
    ember_tensor_info info;
    ++checks;
    if (CHECK_OK(ember_program_output_info(program, i, &info))) {
      CHECK(info.dtype == test.outputs[i].dtype && info.rank == test.outputs[i].rank &&
                info.nbytes == test.outputs[i].nbytes &&
                memcmp(info.dims, test.outputs[i].dims, sizeof info.dims) == 0,
            "%s: output %u info differs from the case", name, i);
    }
  }

  /* Twice: the second run reuses the arena and must give the same answer. */
  void** outputs = test_alloc_outputs(&test);
  for (int round = 0; round < 2; ++round) {
    ++checks;
    test_run_and_compare(program, &test, outputs, true);
  }
  test_free_outputs(&test, outputs);
  ember_program_destroy(program);
  test_case_free(&test);
  return checks;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR [CASE]\n", argv[0]);
    return 2;
  }
  int checks = 0;
  if (argc >= 3) {
    checks += run_case(argv[1], argv[2]);
    return test_finish(argv[2], checks);
  }
  char* list = test_join(argv[1], "valid/cases.txt", "");
  size_t count;
  char** names = test_read_lines(list, &count);
  for (size_t i = 0; i < count; ++i) {
    int before = test_failure_count();
    checks += run_case(argv[1], names[i]);
    printf("%-32s %s\n", names[i], test_failure_count() == before ? "ok" : "FAILED");
  }
  printf("%zu op cases\n", count);
  CHECK(count >= 30, "only %zu cases in %s", count, list);
  test_free_lines(names, count);
  free(list);
  return test_finish("test_ops", checks);
}
