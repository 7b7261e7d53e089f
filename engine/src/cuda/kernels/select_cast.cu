/* WHERE (a broadcast select of element bytes, by element size) and CAST (between any two
 * dtypes, with the CPU reference executor's conversion rules). */
#include "kernel_common.cuh"

namespace ember {

template <typename E>
__device__ void where(const ember_k_where_params& p) {
  const int64_t count = (int64_t)p.count;
  const int rank = (int)p.rank;
  const uint8_t* cond = reinterpret_cast<const uint8_t*>(p.cond);
  const E* a = reinterpret_cast<const E*>(p.a);
  const E* b = reinterpret_cast<const E*>(p.b);
  E* y = reinterpret_cast<E*>(p.y);
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    int64_t rest = i, oc = 0, oa = 0, ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t index = rest % p.dims[d];
      rest /= p.dims[d];
      oc += index * p.cond_strides[d];
      oa += index * p.a_strides[d];
      ob += index * p.b_strides[d];
    }
    y[i] = cond[oc] != 0 ? a[oa] : b[ob];
  }
}

/* ember_dtype codes (ember.h): 1 float32, 2 float16, 3 bfloat16, 4 int64, 5 int32, 6 bool. */
__device__ __forceinline__ bool is_float_code(int dtype) { return dtype >= 1 && dtype <= 3; }

/* A float element, widened to double exactly (as the CPU loads it). */
__device__ __forceinline__ double load_float(uint64_t base, int dtype, int64_t i) {
  if (dtype == 1) return load<float>(base, i);
  if (dtype == 2) return load<__half>(base, i);
  return load<__nv_bfloat16>(base, i);
}

__device__ __forceinline__ int64_t load_int(uint64_t base, int dtype, int64_t i) {
  if (dtype == 4) return reinterpret_cast<const int64_t*>(base)[i];
  if (dtype == 5) return reinterpret_cast<const int32_t*>(base)[i];
  return reinterpret_cast<const uint8_t*>(base)[i] != 0;
}

/* Through float32, round to nearest even, as ember_cpu_store. */
__device__ __forceinline__ void store_float(uint64_t base, int dtype, int64_t i, double v) {
  const float f = (float)v;
  if (dtype == 1) {
    store<float>(base, i, f);
  } else if (dtype == 2) {
    store<__half>(base, i, f);
  } else {
    store<__nv_bfloat16>(base, i, f);
  }
}

__device__ __forceinline__ void store_int(uint64_t base, int dtype, int64_t i, int64_t v) {
  if (dtype == 4) {
    reinterpret_cast<int64_t*>(base)[i] = v;
  } else if (dtype == 5) {
    reinterpret_cast<int32_t*>(base)[i] = (int32_t)(uint32_t)(uint64_t)v;
  } else {
    reinterpret_cast<uint8_t*>(base)[i] = v != 0;
  }
}

/* Toward zero; NaN gives 0; out of range saturates (float_to_int in cpu_ops_elementwise.c). */
__device__ __forceinline__ int64_t float_to_int(double v, int dtype) {
  const double low = dtype == 5 ? -2147483648.0 : -9223372036854775808.0;
  const double high = dtype == 5 ? 2147483647.0 : 9223372036854775807.0;
  if (isnan(v)) return 0;
  if (v <= low) return (int64_t)low;
  if (v >= high) return dtype == 5 ? (int64_t)2147483647 : (int64_t)9223372036854775807LL;
  return (int64_t)v;
}

__device__ void cast(const ember_k_cast_params& p) {
  const int64_t count = (int64_t)p.count;
  const int xd = p.x_dtype, yd = p.y_dtype;
  for (int64_t i = global_thread(); i < count; i += global_stride()) {
    if (is_float_code(yd)) {
      /* An integer to float32 rounded once, as PyTorch (and the CPU executor) do. */
      const double v =
          is_float_code(xd) ? load_float(p.x, xd, i) : (double)(float)load_int(p.x, xd, i);
      store_float(p.y, yd, i, v);
    } else if (is_float_code(xd)) {
      const double v = load_float(p.x, xd, i);
      store_int(p.y, yd, i, yd == 6 ? (int64_t)(v != 0.0) : float_to_int(v, yd)); /* NaN: true */
    } else {
      store_int(p.y, yd, i, load_int(p.x, xd, i));
    }
  }
}

}  // namespace ember

#define EMBER_K_WHERE(SIZE, TYPE)                             \
  extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) \
      ember_where_##SIZE(const ember_k_where_params p) {      \
    ember::begin_after_previous_grid();                       \
    ember::where<TYPE>(p);                                    \
  }
EMBER_K_WHERE(1, uint8_t)
EMBER_K_WHERE(2, uint16_t)
EMBER_K_WHERE(4, uint32_t)
EMBER_K_WHERE(8, uint64_t)

extern "C" __global__ void __launch_bounds__(EMBER_K_BLOCK) ember_cast(const ember_k_cast_params p) {
  ember::begin_after_previous_grid();
  ember::cast(p);
}
