/* Run-time loading of the CUDA driver (cuda_driver.h says why and how). */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Where the one load attempt's outcome is kept: the table, or the reason there is none
 * (a message and its code, rebuilt into a fresh status for each caller). */
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static ember_cuda_driver driver_table;
static ember_status_code driver_error_code = EMBER_OK;
static char driver_error[512];

static void driver_fail(ember_status_code code, const char* format, ...)
    EMBER_PRINTF_FORMAT(2, 3);

static void driver_fail(ember_status_code code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(driver_error, sizeof driver_error, format, args);
  va_end(args);
  driver_error_code = code;
}

typedef CUresult (*get_proc_address_fn)(const char* symbol, void** pfn, int cuda_version,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* symbol_status);
typedef CUresult (*driver_get_version_fn)(int* version);

static void driver_load(void) {
  /* RTLD_LOCAL: the driver's symbols stay out of the global namespace. libcuda is never
   * dlclose'd (the driver does not support being unloaded while contexts exist). */
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char* why = dlerror();
    driver_fail(EMBER_UNAVAILABLE,
                "no NVIDIA driver (libcuda.so.1 could not be loaded: %s); the CUDA executor "
                "needs an NVIDIA GPU and its driver (CUDA %d.%d or newer)",
                why != NULL ? why : "unknown reason", CUDA_VERSION / 1000,
                (CUDA_VERSION % 1000) / 10);
    return;
  }
  driver_get_version_fn get_version =
      (driver_get_version_fn)(uintptr_t)dlsym(library, "cuDriverGetVersion");
  int version = 0;
  if (get_version == NULL || get_version(&version) != CUDA_SUCCESS) version = 0;
  /* cuGetProcAddress_v2 appeared with CUDA 12.0; an older driver cannot serve the CUDA
   * 13 ABI anyway. */
  get_proc_address_fn get_proc =
      (get_proc_address_fn)(uintptr_t)dlsym(library, "cuGetProcAddress_v2");
  if (get_proc == NULL || version < CUDA_VERSION) {
    driver_fail(EMBER_UNAVAILABLE,
                "the NVIDIA driver is too old: it supports CUDA %d.%d, Ember's CUDA executor "
                "needs CUDA %d.%d or newer (update the driver)",
                version / 1000, (version % 1000) / 10, CUDA_VERSION / 1000,
                (CUDA_VERSION % 1000) / 10);
    return;
  }
  driver_table.driver_version = version;
#define EMBER_CUDA_DRIVER_LOOKUP(name)                                                      \
  {                                                                                         \
    void* entry = NULL;                                                                     \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;            \
    CUresult result =                                                                       \
        get_proc(#name, &entry, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found);         \
    if (result != CUDA_SUCCESS || entry == NULL || found != CU_GET_PROC_ADDRESS_SUCCESS) {  \
      driver_fail(EMBER_UNAVAILABLE,                                                        \
                  "the NVIDIA driver (CUDA %d.%d) does not provide %s for CUDA %d.%d "      \
                  "(cuGetProcAddress result %d, status %d); update the driver",             \
                  version / 1000, (version % 1000) / 10, #name, CUDA_VERSION / 1000,        \
                  (CUDA_VERSION % 1000) / 10, (int)result, (int)found);                     \
      return;                                                                               \
    }                                                                                       \
    memcpy(&driver_table.name, &entry, sizeof entry);                                       \
  }
  EMBER_CUDA_DRIVER_SYMBOLS(EMBER_CUDA_DRIVER_LOOKUP)
#undef EMBER_CUDA_DRIVER_LOOKUP

  CUresult result = driver_table.cuInit(0);
  if (result != CUDA_SUCCESS) {
    const char* name = NULL;
    const char* text = NULL;
    driver_table.cuGetErrorName(result, &name);
    driver_table.cuGetErrorString(result, &text);
    driver_fail(EMBER_UNAVAILABLE, "the NVIDIA driver is there but cuInit failed: %s (%s)%s",
                name != NULL ? name : "unknown error", text != NULL ? text : "no description",
                result == CUDA_ERROR_NO_DEVICE ? "; no CUDA device is visible" : "");
    return;
  }
  int count = 0;
  result = driver_table.cuDeviceGetCount(&count);
  if (result != CUDA_SUCCESS || count <= 0) {
    driver_fail(EMBER_UNAVAILABLE, "the NVIDIA driver reports no CUDA device");
    return;
  }
}

ember_status* ember_cuda_driver_get(const ember_cuda_driver** out_driver) {
  *out_driver = NULL;
  if (pthread_once(&driver_once, driver_load) != 0) {
    return ember_status_make(EMBER_INTERNAL, "cuda: pthread_once failed");
  }
  if (driver_error_code != EMBER_OK) {
    return ember_status_make(driver_error_code, "%s", driver_error);
  }
  *out_driver = &driver_table;
  return NULL;
}

ember_status* ember_cuda_status(const ember_cuda_driver* driver, CUresult result,
                                const char* call) {
  const char* name = NULL;
  const char* text = NULL;
  if (driver != NULL) {
    if (driver->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = NULL;
    if (driver->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = NULL;
  }
  ember_status_code code = EMBER_INTERNAL;
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      code = EMBER_OUT_OF_MEMORY;
      break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      code = EMBER_UNAVAILABLE;
      break;
    default:
      break;
  }
  return ember_status_make(code, "cuda: %s failed: %s (%d): %s", call,
                           name != NULL ? name : "CUDA error", (int)result,
                           text != NULL ? text : "no description");
}

ember_status* ember_cuda_annotate(ember_status* status, const char* format, ...) {
  if (status == NULL) return NULL;
  char context[256];
  va_list args;
  va_start(args, format);
  vsnprintf(context, sizeof context, format, args);
  va_end(args);
  ember_status* annotated = ember_status_make(ember_status_code_of(status), "%s: %s", context,
                                              ember_status_message(status));
  ember_status_free(status);
  return annotated;
}
