/* Run-time loading of cuBLASLt (cublaslt_library.h says why and how). */
#include "cublaslt_library.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t library_once = PTHREAD_ONCE_INIT;
static ember_cublaslt_library library_table;
static char library_error[768]; /* empty: loaded */
static atomic_bool library_attempted;

static void library_load(void) {
  atomic_store(&library_attempted, true);
  void* handle = dlopen(EMBER_CUBLASLT_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) {
    const char* why = dlerror();
    snprintf(library_error, sizeof library_error,
             "%s (cuBLASLt, which the CUDA executor needs for GEMMs: MATMUL, LINEAR of more "
             "than a few rows, SDPA, CONV2D) could not be loaded: %s. Install it with "
             "`pip install %s` into the Python environment that "
             "holds ember_executorch_runtime (it lands in site-packages/nvidia/cu13/lib, "
             "which the library's RUNPATH searches), or put it on LD_LIBRARY_PATH",
             EMBER_CUBLASLT_SONAME, why != NULL ? why : "unknown reason",
             EMBER_CUBLASLT_PIP_PACKAGE);
    return;
  }
#define EMBER_CUBLASLT_LOOKUP(name)                                                       \
  {                                                                                       \
    void* entry = dlsym(handle, #name);                                                   \
    if (entry == NULL) {                                                                  \
      snprintf(library_error, sizeof library_error,                                       \
               "%s has no symbol %s; it is not the cuBLASLt Ember was built for "         \
               "(reinstall with `pip install %s`)",                                       \
               EMBER_CUBLASLT_SONAME, #name, EMBER_CUBLASLT_PIP_PACKAGE);                 \
      return;                                                                             \
    }                                                                                     \
    memcpy(&library_table.name, &entry, sizeof entry);                                    \
  }
  EMBER_CUBLASLT_SYMBOLS(EMBER_CUBLASLT_LOOKUP)
#undef EMBER_CUBLASLT_LOOKUP
#define EMBER_CUBLASLT_LOOKUP_OPTIONAL(name)            \
  {                                                     \
    void* entry = dlsym(handle, #name);                 \
    memcpy(&library_table.name, &entry, sizeof entry);  \
  }
  EMBER_CUBLASLT_OPTIONAL_SYMBOLS(EMBER_CUBLASLT_LOOKUP_OPTIONAL)
#undef EMBER_CUBLASLT_LOOKUP_OPTIONAL
  library_table.version = library_table.cublasLtGetVersion();
}

ember_status* ember_cublaslt_library_get(const ember_cublaslt_library** out_library) {
  *out_library = NULL;
  if (pthread_once(&library_once, library_load) != 0) {
    return ember_status_make(EMBER_INTERNAL, "cublasLt: pthread_once failed");
  }
  if (library_error[0] != '\0') return ember_status_make(EMBER_UNAVAILABLE, "%s", library_error);
  *out_library = &library_table;
  return NULL;
}

bool ember_cublaslt_library_attempted(void) { return atomic_load(&library_attempted); }

static const char* status_name(cublasStatus_t result) {
  switch (result) {
#define EMBER_CUBLASLT_NAME_CASE(name, value) \
  case name:                                  \
    return #name;
    EMBER_CUBLAS_STATUS_VALUES(EMBER_CUBLASLT_NAME_CASE)
#undef EMBER_CUBLASLT_NAME_CASE
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

ember_status* ember_cublaslt_status(const ember_cublaslt_library* library,
                                    cublasStatus_t result, const char* call) {
  const char* name = NULL;
  const char* text = NULL;
  if (library != NULL && library->cublasLtGetStatusName != NULL) {
    name = library->cublasLtGetStatusName(result);
  }
  if (library != NULL && library->cublasLtGetStatusString != NULL) {
    text = library->cublasLtGetStatusString(result);
  }
  return ember_status_make(result == CUBLAS_STATUS_ALLOC_FAILED ? EMBER_OUT_OF_MEMORY
                                                                : EMBER_INTERNAL,
                           "cublasLt: %s failed: %s (%d)%s%s", call,
                           name != NULL ? name : status_name(result), (int)result,
                           text != NULL ? ": " : "", text != NULL ? text : "");
}
