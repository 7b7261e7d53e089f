/* The device memory API (ember.h, "device memory"), in every build and on every machine.
 *
 * Without CUDA (a build without it, or no driver or device) every call that needs the
 * device must be EMBER_UNAVAILABLE with a message, and the no-op forms (free NULL, copy 0
 * bytes) must succeed. With a device: allocation (alignment, 0 bytes, too much), round
 * trips through both copies, the counters moving by exactly what was done, pointers that
 * are not that device's memory refused with a message, bad device indices and
 * alignments refused, and the same from several threads at once.
 *
 * Prints "test_device_memory: no CUDA here (...)" when it runs the first part, so a GPU
 * check can tell that it did not run the second (tools/gpu_check.sh fails on it). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static int g_checks;

#define EXPECT(cond, ...)                                             \
  do {                                                                \
    ++g_checks;                                                       \
    if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)
#define EXPECT_OK(expr) (++g_checks, CHECK_OK(expr))
#define EXPECT_STATUS(expr, code, text) (++g_checks, CHECK_STATUS((expr), (code), (text)))

static void check_without_cuda(const char* why) {
  printf("test_device_memory: no CUDA here (%s)\n", why);
  EXPECT(strlen(why) > 10, "the reason is too short to help: '%s'", why);
  void* pointer = (void*)0x1;
  EXPECT_STATUS(ember_device_allocate(0, 64, 0, &pointer), EMBER_UNAVAILABLE, "");
  EXPECT(pointer == NULL, "a failed allocation left %p in out_ptr", pointer);
  uint8_t host[16] = {0};
  EXPECT_STATUS(ember_device_copy_host_to_device(0, host, host, sizeof host), EMBER_UNAVAILABLE,
                "");
  EXPECT_STATUS(ember_device_copy_device_to_host(0, host, host, sizeof host), EMBER_UNAVAILABLE,
                "");
  /* The no-op forms need no device. */
  EXPECT_OK(ember_device_free(0, NULL));
  EXPECT_OK(ember_device_copy_host_to_device(0, host, host, 0));
  EXPECT_OK(ember_device_copy_device_to_host(0, host, host, 0));
  ember_device_memory_stats stats;
  ember_device_memory_get_stats(&stats);
  EXPECT(stats.allocations == 0 && stats.bytes_host_to_device == 0 &&
             stats.bytes_device_to_host == 0,
         "counters moved without a device");
}

static void check_round_trip(size_t nbytes, size_t alignment) {
  ember_device_memory_stats before, after;
  ember_device_memory_get_stats(&before);
  void* device = NULL;
  if (!EXPECT_OK(ember_device_allocate(0, nbytes, alignment, &device))) return;
  EXPECT(device != NULL, "allocate(%zu) returned NULL", nbytes);
  EXPECT((uintptr_t)device % 256 == 0, "allocate(%zu) gave %p, not 256-byte aligned", nbytes,
         device);
  uint8_t* source = malloc(nbytes + 1);
  uint8_t* back = malloc(nbytes + 1);
  for (size_t i = 0; i < nbytes; ++i) source[i] = (uint8_t)(i * 131u + 7u);
  memset(back, 0xA5, nbytes + 1);
  EXPECT_OK(ember_device_copy_host_to_device(0, device, source, nbytes));
  EXPECT_OK(ember_device_copy_device_to_host(0, back, device, nbytes));
  EXPECT(memcmp(source, back, nbytes) == 0, "round trip of %zu bytes differs", nbytes);
  EXPECT(back[nbytes] == 0xA5, "copy_device_to_host wrote past %zu bytes", nbytes);
  EXPECT_OK(ember_device_free(0, device));
  ember_device_memory_get_stats(&after);
  const uint64_t copies = nbytes == 0 ? 0 : 1;
  EXPECT(after.allocations - before.allocations == 1 && after.frees - before.frees == 1,
         "allocations/frees moved by %llu/%llu",
         (unsigned long long)(after.allocations - before.allocations),
         (unsigned long long)(after.frees - before.frees));
  EXPECT(after.bytes_allocated - before.bytes_allocated == nbytes, "bytes_allocated moved by %llu",
         (unsigned long long)(after.bytes_allocated - before.bytes_allocated));
  EXPECT(after.copies_host_to_device - before.copies_host_to_device == copies &&
             after.copies_device_to_host - before.copies_device_to_host == copies,
         "copy counts moved wrongly");
  EXPECT(after.bytes_host_to_device - before.bytes_host_to_device == nbytes &&
             after.bytes_device_to_host - before.bytes_device_to_host == nbytes,
         "copied bytes moved by %llu/%llu for %zu",
         (unsigned long long)(after.bytes_host_to_device - before.bytes_host_to_device),
         (unsigned long long)(after.bytes_device_to_host - before.bytes_device_to_host), nbytes);
  free(source);
  free(back);
}

static void* thread_main(void* arg) {
  const size_t nbytes = 4096 + (size_t)(uintptr_t)arg * 64;
  uint8_t* host = malloc(nbytes);
  uint8_t* back = malloc(nbytes);
  for (int iteration = 0; iteration < 50; ++iteration) {
    void* device = NULL;
    if (!CHECK_OK(ember_device_allocate(0, nbytes, 0, &device))) break;
    memset(host, (int)(iteration + (int)(uintptr_t)arg), nbytes);
    CHECK_OK(ember_device_copy_host_to_device(0, device, host, nbytes));
    CHECK_OK(ember_device_copy_device_to_host(0, back, device, nbytes));
    CHECK(memcmp(host, back, nbytes) == 0, "thread %d iteration %d: round trip differs",
          (int)(uintptr_t)arg, iteration);
    CHECK_OK(ember_device_free(0, device));
  }
  free(host);
  free(back);
  return NULL;
}

static void check_with_cuda(int count) {
  printf("test_device_memory: %d CUDA device%s\n", count, count == 1 ? "" : "s");
  check_round_trip(1, 0);
  check_round_trip(1000, 16);
  check_round_trip((size_t)3 << 20, 256);
  check_round_trip(0, 0);

  void* pointer = (void*)0x1;
  EXPECT_STATUS(ember_device_allocate(0, 64, 512, &pointer), EMBER_INVALID_ARGUMENT, "alignment");
  EXPECT(pointer == NULL, "a refused allocation left %p in out_ptr", pointer);
  EXPECT_STATUS(ember_device_allocate(0, 64, 24, &pointer), EMBER_INVALID_ARGUMENT, "power of two");
  EXPECT_STATUS(ember_device_allocate(-1, 64, 0, &pointer), EMBER_INVALID_ARGUMENT, "device -1");
  EXPECT_STATUS(ember_device_allocate(count, 64, 0, &pointer), EMBER_INVALID_ARGUMENT,
                "does not exist");
  EXPECT_STATUS(ember_device_allocate(0, 64, 0, NULL), EMBER_INVALID_ARGUMENT, "out_ptr");
  EXPECT_STATUS(ember_device_allocate(0, (size_t)1 << 52, 0, &pointer), EMBER_OUT_OF_MEMORY,
                "cuMemAlloc");
  EXPECT(pointer == NULL, "a failed allocation left %p in out_ptr", pointer);

  /* Host memory where device memory is expected: refused, with a message, untouched. */
  uint8_t host[64];
  memset(host, 0x11, sizeof host);
  EXPECT_STATUS(ember_device_copy_host_to_device(0, host, host, sizeof host),
                EMBER_INVALID_ARGUMENT, "not CUDA device memory");
  EXPECT_STATUS(ember_device_copy_device_to_host(0, host, host, sizeof host),
                EMBER_INVALID_ARGUMENT, "not CUDA device memory");
  EXPECT_STATUS(ember_device_free(0, host), EMBER_INVALID_ARGUMENT, "not CUDA device memory");
  void* device = NULL;
  if (EXPECT_OK(ember_device_allocate(0, 64, 0, &device))) {
    EXPECT_STATUS(ember_device_copy_host_to_device(0, device, NULL, 64), EMBER_INVALID_ARGUMENT,
                  "src is NULL");
    if (count > 1) {
      EXPECT_STATUS(ember_device_copy_host_to_device(1, device, host, 64),
                    EMBER_INVALID_ARGUMENT, "not of device 1");
    }
    EXPECT_OK(ember_device_free(0, device));
  }

  pthread_t threads[4];
  for (uintptr_t t = 0; t < 4; ++t) pthread_create(&threads[t], NULL, thread_main, (void*)t);
  for (int t = 0; t < 4; ++t) pthread_join(threads[t], NULL);
  ++g_checks;
}

int main(void) {
  int count = -1;
  ember_status* status = ember_device_count(&count);
  if (status != NULL) {
    EXPECT(ember_status_code_of(status) == EMBER_UNAVAILABLE,
           "ember_device_count failed with %s, expected EMBER_UNAVAILABLE",
           ember_status_code_name(ember_status_code_of(status)));
    EXPECT(count == 0, "count %d with an error", count);
    check_without_cuda(ember_status_message(status));
    ember_status_free(status);
  } else if (count == 0) {
    check_without_cuda("the driver reports 0 devices");
  } else {
    check_with_cuda(count);
  }
  return test_finish("test_device_memory", g_checks);
}
