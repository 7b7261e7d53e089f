/* Broadcasting binary kernels: ADD SUB MUL DIV POW MAXIMUM MINIMUM. The host has collapsed the dims (merged
 * neighbours that broadcast alike), so most launches take the rank-1 path. */
#include "kernel_common.cuh"

namespace ember {

__device__ __forceinline__ float apply_binary(int op, float a, float b) {
  switch (op) {
    case EMBER_K_BINARY_ADD: return a + b;
    case EMBER_K_BINARY_SUB: return a - b;
    case EMBER_K_BINARY_MUL: return a * b;
    case EMBER_K_BINARY_POW: return powf(a, b);
    case EMBER_K_BINARY_MAXIMUM: return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : (a > b ? a : b);
    case EMBER_K_BINARY_MINIMUM: return isnan(a) || isnan(b) ? __int_as_float(0x7fc00000) : (a < b ? a : b);
    default: return a / b; /* IEEE division: x/0 is inf or NaN, as on the CPU */
  }
}

template <typename T>
__device__ void binary(const ember_k_binary_params& p) {
  const int64_t count = (int64_t)p.count;
  if (p.rank == 1) {
    const int64_t sa = p.a_strides[0], sb = p.b_strides[0];
    for (int64_t i = global_thread(); i < count; i += global_stride()) {
      store<T>(p.y, i, apply_binary(p.op, load<T>(p.a, i * sa), load<T>(p.b, i * sb)));
    }
    return;
  }
  const int rank = (int)p.rank;
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t index = rest % p.dims[d];
      rest /= p.dims[d];
      oa += index * p.a_strides[d];
      ob += index * p.b_strides[d];
    }
    store<T>(p.y, i, apply_binary(p.op, load<T>(p.a, oa), load<T>(p.b, ob)));
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_binary, ember::binary, ember_k_binary_params)
