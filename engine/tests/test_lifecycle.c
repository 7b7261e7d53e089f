/* 1000 cycles of create, run, destroy: nothing leaks (under ASan/LSan), host memory stays
 * flat (resident set after the first 100 cycles against after the last, in builds without
 * sanitizers, whose allocators hold freed memory on purpose), and every cycle gives the
 * right answer. On a machine with a GPU the programs run on the CUDA executor (AUTO).
 *
 * Usage: test_lifecycle DATA_DIR */
#include <stdio.h>
#include <unistd.h>

#include "test_support.h"

enum { kCycles = 1000, kWarmupCycles = 100 };

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EMBER_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define EMBER_TEST_SANITIZED 1
#endif
#endif

/* Resident set size in KiB, from /proc/self/statm; -1 where it cannot be read. */
static long resident_kib(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  long pages_total = 0, pages_resident = -1;
  if (f == NULL) return -1;
  if (fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = -1;
  fclose(f);
  return pages_resident < 0 ? -1 : pages_resident * (sysconf(_SC_PAGESIZE) / 1024);
}

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
  long warm_kib = -1;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == kWarmupCycles) warm_kib = resident_kib();
    test_case* test = &cases[cycle % 2];
    ember_program* program = NULL;
    if (!CHECK_OK(ember_program_create(test->plan, test->plan_size, NULL, &program))) break;
    void** outputs = test_alloc_outputs(test);
    if (test_run_and_compare(program, test, outputs, true)) ++good;
    test_free_outputs(test, outputs);
    ember_program_destroy(program);
  }
  CHECK(good == kCycles, "%d of %d cycles gave the right answer", good, kCycles);
  const long end_kib = resident_kib();
  printf("%d create/run/destroy cycles; resident set %ld KiB after %d cycles, %ld KiB after "
         "%d\n", good, warm_kib, kWarmupCycles, end_kib, kCycles);
#if !defined(EMBER_TEST_SANITIZED)
  /* 900 more cycles may not grow the process by more than 1 MiB (a leak of one plan's
   * arena or constants per cycle would be tens of MiB). */
  CHECK(warm_kib > 0 && end_kib > 0 && end_kib - warm_kib <= 1024,
        "host memory grew from %ld KiB to %ld KiB over %d cycles", warm_kib, end_kib,
        kCycles - kWarmupCycles);
#endif
  test_case_free(&cases[0]);
  test_case_free(&cases[1]);
  return test_finish("test_lifecycle", kCycles);
}
