/* Device memory for a host framework's allocator (ember.h, "device memory").
 *
 * Plain cuMemAlloc/cuMemFree and synchronous copies through the driver table the CUDA
 * executor uses (cuda/cuda_driver.h: libcuda.so.1 is dlopen'ed on first use, nothing is
 * linked). Each device's primary context is retained on first use and kept for the life
 * of the process: memory handed out lives in it, and releasing the last reference would
 * destroy the context with the memory. Copies go through one non-blocking stream per
 * device and wait for it, so they are complete when the call returns, whatever the other
 * streams of the process (the CUDA executor's, PyTorch's) are doing.
 *
 * In a build without CUDA every fallible function says so with EMBER_UNAVAILABLE. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ember/ember.h"
#include "status.h"

#if defined(EMBER_HAVE_CUDA)
#include <pthread.h>

#include "cuda_driver.h"
#endif

/* cuMemAlloc's documented alignment: every allocation is aligned to at least this. */
#define EMBER_DEVICE_ALIGNMENT 256u
/* Devices whose contexts are kept; a larger ordinal is refused. */
#define EMBER_MAX_DEVICES 64

static atomic_uint_fast64_t stat_allocations;
static atomic_uint_fast64_t stat_frees;
static atomic_uint_fast64_t stat_bytes_allocated;
static atomic_uint_fast64_t stat_copies_host_to_device;
static atomic_uint_fast64_t stat_copies_device_to_host;
static atomic_uint_fast64_t stat_bytes_host_to_device;
static atomic_uint_fast64_t stat_bytes_device_to_host;

void ember_device_memory_get_stats(ember_device_memory_stats* out_stats) {
  if (out_stats == NULL) return;
  memset(out_stats, 0, sizeof *out_stats);
  out_stats->allocations = (uint64_t)atomic_load(&stat_allocations);
  out_stats->frees = (uint64_t)atomic_load(&stat_frees);
  out_stats->bytes_allocated = (uint64_t)atomic_load(&stat_bytes_allocated);
  out_stats->copies_host_to_device = (uint64_t)atomic_load(&stat_copies_host_to_device);
  out_stats->copies_device_to_host = (uint64_t)atomic_load(&stat_copies_device_to_host);
  out_stats->bytes_host_to_device = (uint64_t)atomic_load(&stat_bytes_host_to_device);
  out_stats->bytes_device_to_host = (uint64_t)atomic_load(&stat_bytes_device_to_host);
}

#if !defined(EMBER_HAVE_CUDA)

static ember_status* no_cuda(const char* function) {
  return ember_status_make(EMBER_UNAVAILABLE,
                           "%s: this Ember engine was built without CUDA (EMBER_CUDA=OFF), "
                           "so it has no device memory",
                           function);
}

ember_status* ember_device_count(int* out_count) {
  if (out_count != NULL) *out_count = 0;
  return no_cuda("ember_device_count");
}

ember_status* ember_device_allocate(int device_index, size_t nbytes, size_t alignment,
                                    void** out_ptr) {
  (void)device_index, (void)nbytes, (void)alignment;
  if (out_ptr != NULL) *out_ptr = NULL;
  return no_cuda("ember_device_allocate");
}

ember_status* ember_device_free(int device_index, void* ptr) {
  (void)device_index;
  if (ptr == NULL) return NULL;
  return no_cuda("ember_device_free");
}

ember_status* ember_device_copy_host_to_device(int device_index, void* dst, const void* src,
                                               size_t nbytes) {
  (void)device_index, (void)dst, (void)src;
  if (nbytes == 0) return NULL;
  return no_cuda("ember_device_copy_host_to_device");
}

ember_status* ember_device_copy_device_to_host(int device_index, void* dst, const void* src,
                                               size_t nbytes) {
  (void)device_index, (void)dst, (void)src;
  if (nbytes == 0) return NULL;
  return no_cuda("ember_device_copy_device_to_host");
}

#else /* EMBER_HAVE_CUDA */

/* One device's context and copy stream, made once and kept until the process ends. */
typedef struct device_slot {
  bool ready;
  CUcontext context;
  CUstream stream;
} device_slot;

static pthread_mutex_t devices_mutex = PTHREAD_MUTEX_INITIALIZER;
static device_slot devices[EMBER_MAX_DEVICES];

/* The driver, and device `device_index`'s slot made ready. */
static ember_status* open_device(const char* function, int device_index,
                                 const ember_cuda_driver** out_driver,
                                 const device_slot** out_slot) {
  *out_driver = NULL;
  *out_slot = NULL;
  const ember_cuda_driver* driver = NULL;
  ember_status* status = ember_cuda_driver_get(&driver);
  if (status != NULL) return ember_cuda_annotate(status, "%s", function);
  int count = 0;
  CUresult result = driver->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    return ember_cuda_annotate(ember_cuda_status(driver, result, "cuDeviceGetCount"), "%s",
                               function);
  }
  if (device_index < 0 || device_index >= count || device_index >= EMBER_MAX_DEVICES) {
    return ember_status_make(EMBER_INVALID_ARGUMENT,
                             "%s: CUDA device %d does not exist; the driver sees %d device%s",
                             function, device_index, count, count == 1 ? "" : "s");
  }
  if (pthread_mutex_lock(&devices_mutex) != 0) {
    return ember_status_make(EMBER_INTERNAL, "%s: pthread_mutex_lock failed", function);
  }
  device_slot* slot = &devices[device_index];
  status = NULL;
  if (!slot->ready) {
    CUdevice device = 0;
    CUcontext context = NULL;
    CUstream stream = NULL;
    result = driver->cuDeviceGet(&device, device_index);
    if (result != CUDA_SUCCESS) {
      status = ember_cuda_status(driver, result, "cuDeviceGet");
    } else if ((result = driver->cuDevicePrimaryCtxRetain(&context, device)) != CUDA_SUCCESS) {
      status = ember_cuda_status(driver, result, "cuDevicePrimaryCtxRetain");
    } else if ((result = driver->cuCtxPushCurrent(context)) != CUDA_SUCCESS) {
      status = ember_cuda_status(driver, result, "cuCtxPushCurrent");
      driver->cuDevicePrimaryCtxRelease(device);
    } else {
      result = driver->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
      CUcontext popped;
      driver->cuCtxPopCurrent(&popped);
      if (result != CUDA_SUCCESS) {
        status = ember_cuda_status(driver, result, "cuStreamCreate(device memory copies)");
        driver->cuDevicePrimaryCtxRelease(device);
      } else {
        slot->context = context;
        slot->stream = stream;
        slot->ready = true;
      }
    }
  }
  pthread_mutex_unlock(&devices_mutex);
  if (status != NULL) {
    return ember_cuda_annotate(status, "%s (device %d)", function, device_index);
  }
  *out_driver = driver;
  *out_slot = slot;
  return NULL;
}

ember_status* ember_device_count(int* out_count) {
  if (out_count == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_device_count: out_count is NULL");
  }
  *out_count = 0;
  const ember_cuda_driver* driver = NULL;
  ember_status* status = ember_cuda_driver_get(&driver);
  if (status != NULL) return ember_cuda_annotate(status, "ember_device_count");
  int count = 0;
  CUresult result = driver->cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS) {
    return ember_cuda_annotate(ember_cuda_status(driver, result, "cuDeviceGetCount"),
                               "ember_device_count");
  }
  *out_count = count;
  return NULL;
}

/* Says whether `pointer` is memory of device `device_index` (or managed memory), with an
 * error naming `role` when it is not. */
static ember_status* check_device_pointer(const ember_cuda_driver* driver, const char* function,
                                          const char* role, const void* pointer,
                                          int device_index) {
  unsigned int memory_type = 0;
  int ordinal = -1;
  uint32_t managed = 0;
  CUpointer_attribute attributes[3] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                       CU_POINTER_ATTRIBUTE_IS_MANAGED};
  void* values[3] = {&memory_type, &ordinal, &managed};
  CUresult result =
      driver->cuPointerGetAttributes(3, attributes, values, (CUdeviceptr)(uintptr_t)pointer);
  if (result != CUDA_SUCCESS || (managed == 0 && memory_type != CU_MEMORYTYPE_DEVICE)) {
    return ember_status_make(EMBER_INVALID_ARGUMENT,
                             "%s: the %s (%p) is not CUDA device memory", function, role,
                             pointer);
  }
  if (managed == 0 && ordinal != device_index) {
    return ember_status_make(EMBER_INVALID_ARGUMENT,
                             "%s: the %s (%p) is memory of CUDA device %d, not of device %d",
                             function, role, pointer, ordinal, device_index);
  }
  return NULL;
}

ember_status* ember_device_allocate(int device_index, size_t nbytes, size_t alignment,
                                    void** out_ptr) {
  static const char function[] = "ember_device_allocate";
  if (out_ptr == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: out_ptr is NULL", function);
  }
  *out_ptr = NULL;
  if (alignment != 0 && ((alignment & (alignment - 1)) != 0 || alignment > EMBER_DEVICE_ALIGNMENT)) {
    return ember_status_make(EMBER_INVALID_ARGUMENT,
                             "%s: alignment %zu is not a power of two up to %u (device memory "
                             "comes %u-byte aligned from the driver)",
                             function, alignment, EMBER_DEVICE_ALIGNMENT, EMBER_DEVICE_ALIGNMENT);
  }
  const ember_cuda_driver* driver;
  const device_slot* slot;
  EMBER_RETURN_IF_ERROR(open_device(function, device_index, &driver, &slot));
  /* cuMemAlloc refuses 0 bytes; a 0-byte request still gets a distinct, freeable block. */
  const size_t request = nbytes == 0 ? 1 : nbytes;
  CUresult result = driver->cuCtxPushCurrent(slot->context);
  if (result != CUDA_SUCCESS) {
    return ember_cuda_annotate(ember_cuda_status(driver, result, "cuCtxPushCurrent"), "%s",
                               function);
  }
  CUdeviceptr pointer = 0;
  result = driver->cuMemAlloc(&pointer, request);
  CUcontext popped;
  driver->cuCtxPopCurrent(&popped);
  if (result != CUDA_SUCCESS) {
    char call[96];
    snprintf(call, sizeof call, "cuMemAlloc(%zu bytes on device %d)", nbytes, device_index);
    return ember_cuda_annotate(ember_cuda_status(driver, result, call), "%s", function);
  }
  atomic_fetch_add(&stat_allocations, 1);
  atomic_fetch_add(&stat_bytes_allocated, (uint_fast64_t)nbytes);
  *out_ptr = (void*)(uintptr_t)pointer;
  return NULL;
}

ember_status* ember_device_free(int device_index, void* ptr) {
  static const char function[] = "ember_device_free";
  if (ptr == NULL) return NULL;
  const ember_cuda_driver* driver;
  const device_slot* slot;
  EMBER_RETURN_IF_ERROR(open_device(function, device_index, &driver, &slot));
  CUresult result = driver->cuCtxPushCurrent(slot->context);
  if (result != CUDA_SUCCESS) {
    return ember_cuda_annotate(ember_cuda_status(driver, result, "cuCtxPushCurrent"), "%s",
                               function);
  }
  /* A pointer the driver does not know as this device's memory is refused with a message
   * rather than handed to cuMemFree. */
  ember_status* status = check_device_pointer(driver, function, "pointer", ptr, device_index);
  if (status == NULL) result = driver->cuMemFree((CUdeviceptr)(uintptr_t)ptr);
  CUcontext popped;
  driver->cuCtxPopCurrent(&popped);
  if (status != NULL) return status;
  if (result != CUDA_SUCCESS) {
    char call[96];
    snprintf(call, sizeof call, "cuMemFree(%p on device %d)", ptr, device_index);
    return ember_cuda_annotate(ember_cuda_status(driver, result, call), "%s", function);
  }
  atomic_fetch_add(&stat_frees, 1);
  return NULL;
}

typedef enum copy_direction { HOST_TO_DEVICE, DEVICE_TO_HOST } copy_direction;

static ember_status* copy(const char* function, copy_direction direction, int device_index,
                          void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return NULL;
  if (dst == NULL || src == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s is NULL for a copy of %zu bytes",
                             function, dst == NULL ? "dst" : "src", nbytes);
  }
  const ember_cuda_driver* driver;
  const device_slot* slot;
  EMBER_RETURN_IF_ERROR(open_device(function, device_index, &driver, &slot));
  CUresult result = driver->cuCtxPushCurrent(slot->context);
  if (result != CUDA_SUCCESS) {
    return ember_cuda_annotate(ember_cuda_status(driver, result, "cuCtxPushCurrent"), "%s",
                               function);
  }
  const void* device_side = direction == HOST_TO_DEVICE ? (const void*)dst : src;
  ember_status* status = check_device_pointer(
      driver, function, direction == HOST_TO_DEVICE ? "destination" : "source", device_side,
      device_index);
  if (status != NULL) {
    CUcontext popped;
    driver->cuCtxPopCurrent(&popped);
    return status;
  }
  const char* call = NULL;
  if (direction == HOST_TO_DEVICE) {
    call = "cuMemcpyHtoDAsync";
    result = driver->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, nbytes, slot->stream);
  } else {
    call = "cuMemcpyDtoHAsync";
    result = driver->cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, nbytes, slot->stream);
  }
  if (result == CUDA_SUCCESS) {
    call = "cuStreamSynchronize(device memory copy)";
    result = driver->cuStreamSynchronize(slot->stream);
  }
  CUcontext popped;
  driver->cuCtxPopCurrent(&popped);
  if (result != CUDA_SUCCESS) {
    char text[128];
    snprintf(text, sizeof text, "%s (%zu bytes, device %d)", call, nbytes, device_index);
    return ember_cuda_annotate(ember_cuda_status(driver, result, text), "%s", function);
  }
  if (direction == HOST_TO_DEVICE) {
    atomic_fetch_add(&stat_copies_host_to_device, 1);
    atomic_fetch_add(&stat_bytes_host_to_device, (uint_fast64_t)nbytes);
  } else {
    atomic_fetch_add(&stat_copies_device_to_host, 1);
    atomic_fetch_add(&stat_bytes_device_to_host, (uint_fast64_t)nbytes);
  }
  return NULL;
}

ember_status* ember_device_copy_host_to_device(int device_index, void* dst, const void* src,
                                               size_t nbytes) {
  return copy("ember_device_copy_host_to_device", HOST_TO_DEVICE, device_index, dst, src,
              nbytes);
}

ember_status* ember_device_copy_device_to_host(int device_index, void* dst, const void* src,
                                               size_t nbytes) {
  return copy("ember_device_copy_device_to_host", DEVICE_TO_HOST, device_index, dst, src,
              nbytes);
}

#endif /* EMBER_HAVE_CUDA */
