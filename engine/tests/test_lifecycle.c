/* 1000 cycles of create, run, destroy: nothing leaks (under ASan/LSan) and every cycle
 * gives the right answer.
 *
 * Usage: test_lifecycle DATA_DIR */
#include <stdio.h>

#include "test_support.h"

enum { kCycles = 1000 };

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  const char* names[2] = {"mlp_f32", "layer_norm_bias_only_f16"};
  test_case cases[2];
  test_case_load(argv[1], names[0], &cases[0]);
  test_case_load(argv[1], names[1], &cases[1]);
  int good = 0;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    test_case* test = &cases[cycle % 2];
    ember_program* program = NULL;
    if (!CHECK_OK(ember_program_create(test->plan, test->plan_size, NULL, &program))) break;
    void** outputs = test_alloc_outputs(test);
    if (test_run_and_compare(program, test, outputs, true)) ++good;
    test_free_outputs(test, outputs);
    ember_program_destroy(program);
  }
  CHECK(good == kCycles, "%d of %d cycles gave the right answer", good, kCycles);
  printf("%d create/run/destroy cycles\n", good);
  test_case_free(&cases[0]);
  test_case_free(&cases[1]);
  return test_finish("test_lifecycle", kCycles);
}
