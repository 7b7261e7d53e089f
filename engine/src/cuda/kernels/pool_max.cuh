/* The max of 16-bit (or 32-bit) floats, a 16-byte vector of channels at a time: by
 * MAX_POOL2D's rule, "tap > max ? tap : max" in tap order (a NaN wins, the first NaN
 * stays), for the pools (conv_pool.cu); and by the hardware's NaN-propagating max
 * (max_nan), for the halo conv's pooled epilogue (conv_halo.cu). */
#ifndef EMBER_SRC_CUDA_KERNELS_POOL_MAX_CUH_
#define EMBER_SRC_CUDA_KERNELS_POOL_MAX_CUH_

#include "kernel_common.cuh"

namespace ember {

/* Two 16-bit elements as the packed type their comparisons take. */
template <typename T>
struct Pair;
template <>
struct Pair<__half> {
  typedef __half2 type;
};
template <>
struct Pair<__nv_bfloat16> {
  typedef __nv_bfloat162 type;
};

template <typename T>
__device__ __forceinline__ typename Pair<T>::type as_pair(uint32_t bits) {
  typename Pair<T>::type v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/* Two 16-bit elements' running max and a tap's, packed: "tap > acc ? tap : acc" element
 * by element on their bits (the exact max where neither holds a NaN). */
template <typename T>
__device__ __forceinline__ uint32_t max_pair_bits(uint32_t acc, uint32_t tap) {
  const uint32_t take = __hgt2_mask(as_pair<T>(tap), as_pair<T>(acc));
  return (tap & take) | (acc & ~take);
}

/* One word of a running max and a tap's word of the same elements: the max by "tap >
 * max ? tap : max" (max_pool2d_rows' rule, the exact one without a NaN), two elements at
 * once on their packed bits for float16 and bfloat16 (max_pair_bits). Sets nan when the
 * tap holds one. */
template <typename T>
__device__ __forceinline__ uint32_t max_word(uint32_t acc, uint32_t tap, bool& nan) {
  if constexpr (sizeof(T) == 2) {
    const typename Pair<T>::type pair = as_pair<T>(tap);
    nan = nan || !__hbeq2(pair, pair);
    return max_pair_bits<T>(acc, tap);
  } else {
    const float value = __uint_as_float(tap);
    nan = nan || isnan(value);
    return value > __uint_as_float(acc) ? tap : acc;
  }
}

/* best = the larger of best and tap, element by element, by max_pool_one's rule (a NaN
 * wins, the first NaN stays), keeping the winner's bits. */
template <typename T>
__device__ __forceinline__ void max_exact(Vec16<T>& best, const uint4& tap) {
  Vec16<T> v;
  v.raw = tap;
#pragma unroll
  for (int k = 0; k < Vec16<T>::kCount; ++k) {
    const float value = best.get(k);
    if (!(v.get(k) <= value || isnan(value))) best.bits[k] = v.bits[k];
  }
}

/* The max of a window's N taps (16 bytes of kCount channels each; -inf where outside the
 * input), compared a word at a time (max_word); a window holding a NaN is done again,
 * element by element, by max_pool_one's rule (max_exact). */
template <typename T, int N>
__device__ __forceinline__ Vec16<T> max_of_taps(const uint4 (&taps)[N], const Vec16<T>& neg_inf) {
  Vec16<T> best = neg_inf;
  bool nan = false;
  uint4 acc = neg_inf.raw;
#pragma unroll
  for (int t = 0; t < N; ++t) {
    acc.x = max_word<T>(acc.x, taps[t].x, nan);
    acc.y = max_word<T>(acc.y, taps[t].y, nan);
    acc.z = max_word<T>(acc.z, taps[t].z, nan);
    acc.w = max_word<T>(acc.w, taps[t].w, nan);
  }
  if (!nan) {
    best.raw = acc;
  } else {
#pragma unroll
    for (int t = 0; t < N; ++t) max_exact<T>(best, taps[t]);
  }
  return best;
}

/* A vector of -inf: a window's start, and what a tap outside the input reads as. */
template <typename Vec>
__device__ __forceinline__ Vec all_neg_inf() {
  Vec v;
#pragma unroll
  for (int k = 0; k < Vec::kCount; ++k) v.set(k, __int_as_float(0xff800000u));
  return v;
}

/* 16-bit a and b's max element by element in one instruction a word, a NaN in either
 * giving a NaN: the rule above up to which of two equal values (+0 and -0) and which NaN's
 * payload it keeps. */
template <typename T>
__device__ __forceinline__ uint4 max_nan(const uint4& a, const uint4& b) {
  const uint32_t x[4] = {a.x, a.y, a.z, a.w}, y[4] = {b.x, b.y, b.z, b.w};
  uint32_t m[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const typename Pair<T>::type v = __hmax2_nan(as_pair<T>(x[i]), as_pair<T>(y[i]));
    memcpy(&m[i], &v, sizeof m[i]);
  }
  return make_uint4(m[0], m[1], m[2], m[3]);
}

}  // namespace ember

#endif /* EMBER_SRC_CUDA_KERNELS_POOL_MAX_CUH_ */
