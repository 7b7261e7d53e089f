/* Dtype sizes and names (docs/plan-format.md "Dtypes"). */
#include "ember/ember.h"

size_t ember_dtype_size(ember_dtype dtype) {
  switch (dtype) {
    case EMBER_DTYPE_FLOAT32: return 4;
    case EMBER_DTYPE_FLOAT16: return 2;
    case EMBER_DTYPE_BFLOAT16: return 2;
    case EMBER_DTYPE_INT64: return 8;
    case EMBER_DTYPE_INT32: return 4;
    case EMBER_DTYPE_BOOL: return 1;
  }
  return 0;
}

const char* ember_dtype_name(ember_dtype dtype) {
  switch (dtype) {
    case EMBER_DTYPE_FLOAT32: return "float32";
    case EMBER_DTYPE_FLOAT16: return "float16";
    case EMBER_DTYPE_BFLOAT16: return "bfloat16";
    case EMBER_DTYPE_INT64: return "int64";
    case EMBER_DTYPE_INT32: return "int32";
    case EMBER_DTYPE_BOOL: return "bool";
  }
  return "unknown";
}
