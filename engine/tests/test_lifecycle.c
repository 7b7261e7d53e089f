/* 1000 cycles of create, run, destroy: nothing leaks (under ASan/LSan), host memory stays
 * flat (resident set after the first 100 cycles against after the last, in builds without
 * sanitizers, whose allocators hold freed memory on purpose), and every cycle gives the
 * right answer. On a machine with a GPU the programs run on the CUDA executor (AUTO), and
 * the device's free memory must stay flat too.
 *
 * Usage: test_lifecycle DATA_DIR */
#include <stdio.h>
#include <unistd.h>

#include "test_support.h"

#if defined(EMBER_TEST_CUDA_BUILD)
#include "cuda_driver.h"

/* Free device memory in KiB (device 0, through the primary context the engine uses); -1
 * where there is no driver or device, so the check is skipped there. */
static long device_free_kib(void) {
  const ember_cuda_driver* driver = NULL;
  ember_status* status = ember_cuda_driver_get(&driver);
  if (status != NULL) {
    ember_status_free(status);
    return -1;
  }
  CUdevice device;
  CUcontext context;
  size_t free_bytes = 0, total_bytes = 0;
  if (driver->cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
      driver->cuDevicePrimaryCtxRetain(&context, device) != CUDA_SUCCESS) {
    return -1;
  }
  long kib = -1;
  if (driver->cuCtxPushCurrent(context) == CUDA_SUCCESS) {
    if (driver->cuMemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS) {
      kib = (long)(free_bytes / 1024);
    }
    CUcontext popped;
    driver->cuCtxPopCurrent(&popped);
  }
  driver->cuDevicePrimaryCtxRelease(device);
  return kib;
}
#else
static long device_free_kib(void) { return -1; }
#endif

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
  long warm_kib = -1, warm_device_free_kib = -1;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == kWarmupCycles) {
      warm_kib = resident_kib();
      warm_device_free_kib = device_free_kib();
    }
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
  /* Device memory (when the programs ran on a GPU): free memory may not shrink by more
   * than 1 MiB over the same cycles. */
  const long end_device_free_kib = device_free_kib();
  if (warm_device_free_kib >= 0 && end_device_free_kib >= 0) {
    printf("device free memory %ld KiB after %d cycles, %ld KiB after %d\n",
           warm_device_free_kib, kWarmupCycles, end_device_free_kib, kCycles);
    CHECK(warm_device_free_kib - end_device_free_kib <= 1024,
          "device memory in use grew by %ld KiB over %d cycles",
          warm_device_free_kib - end_device_free_kib, kCycles - kWarmupCycles);
  }
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
