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

/* The op, then the fused ReLU if any (activate()'s: NaN passes). Rounding to the dtype
 * after the ReLU gives what rounding before it would: the ReLU keeps signs and order. */
__device__ __forceinline__ float apply_binary_relu(int op, bool relu, float a, float b) {
  const float v = apply_binary(op, a, b);
  return relu && v < 0.0f ? 0.0f : v;
}

/* The vector path (16 bytes of y a thread) takes y as rows of `cols` elements (rank 1: one
 * row) and reads each operand either as contiguous along the row (inner stride 1, a
 * vector load) or as one element broadcast along the row (inner stride 0): same-shape
 * operands, a scalar, a bias along the last dim, a per-row value. */
template <typename T>
__device__ __forceinline__ bool vector_operand(uint64_t base, const int64_t* strides,
                                               uint32_t rank) {
  const int64_t inner = strides[rank - 1];
  if (inner == 0) return true;
  /* Every vector then starts at a multiple of kCount elements of an aligned base. */
  return inner == 1 && aligned16(base) && (rank == 1 || strides[0] % Vec16<T>::kCount == 0);
}

/* One operand's 16 bytes: a vector when contiguous along the row, else one element (the
 * row's broadcast value). Kept packed until used, which saves registers. */
template <typename T>
struct VectorOperand {
  Vec16<T> vector;
  float broadcast;
  bool contiguous;
  __device__ __forceinline__ void read(uint64_t base, uint32_t offset) {
    if (contiguous) {
      vector.load(base, offset / Vec16<T>::kCount);
    } else {
      broadcast = load<T>(base, offset);
    }
  }
  __device__ __forceinline__ float get(int k) const {
    return contiguous ? vector.get(k) : broadcast;
  }
};

/* kOp is the op as a constant, so its switch folds away out of the per-element loop. */
template <typename T, int kOp>
__device__ void binary_vectors(const ember_k_binary_params& p, uint32_t vectors) {
  constexpr int kCount = Vec16<T>::kCount;
  const bool two_d = p.rank == 2;
  const uint32_t cols = two_d ? (uint32_t)p.dims[1] : (uint32_t)p.count;
  const uint32_t a_outer = two_d ? (uint32_t)p.a_strides[0] : 0u;
  const uint32_t b_outer = two_d ? (uint32_t)p.b_strides[0] : 0u;
  VectorOperand<T> a, b;
  a.contiguous = p.a_strides[p.rank - 1] == 1;
  b.contiguous = p.b_strides[p.rank - 1] == 1;
  const bool relu = p.relu != 0;
  for (uint32_t v = global_thread32(); v < vectors; v += global_stride32()) {
    const uint32_t i = v * kCount;
    const uint32_t row = two_d ? i / cols : 0u, col = i - row * cols;
    a.read(p.a, row * a_outer + (a.contiguous ? col : 0u));
    b.read(p.b, row * b_outer + (b.contiguous ? col : 0u));
    Vec16<T> y;
#pragma unroll
    for (int k = 0; k < kCount; ++k) y.set(k, apply_binary_relu(kOp, relu, a.get(k), b.get(k)));
    y.store(p.y, v);
  }
}

template <typename T>
__device__ void binary(const ember_k_binary_params& p) {
  const int64_t count = (int64_t)p.count;
  int64_t done = 0; /* elements the vector path wrote */
  /* Rank 2 needs whole vectors per row; rank 1 leaves a tail to the loops below. */
  if (p.count <= INT32_MAX && aligned16(p.y) &&
      (p.rank == 1 || (p.rank == 2 && p.dims[1] % Vec16<T>::kCount == 0)) &&
      vector_operand<T>(p.a, p.a_strides, p.rank) && vector_operand<T>(p.b, p.b_strides, p.rank)) {
    const uint32_t vectors = (uint32_t)p.count / Vec16<T>::kCount;
    switch (p.op) {
      case EMBER_K_BINARY_ADD: binary_vectors<T, EMBER_K_BINARY_ADD>(p, vectors); break;
      case EMBER_K_BINARY_SUB: binary_vectors<T, EMBER_K_BINARY_SUB>(p, vectors); break;
      case EMBER_K_BINARY_MUL: binary_vectors<T, EMBER_K_BINARY_MUL>(p, vectors); break;
      case EMBER_K_BINARY_POW: binary_vectors<T, EMBER_K_BINARY_POW>(p, vectors); break;
      case EMBER_K_BINARY_MAXIMUM: binary_vectors<T, EMBER_K_BINARY_MAXIMUM>(p, vectors); break;
      case EMBER_K_BINARY_MINIMUM: binary_vectors<T, EMBER_K_BINARY_MINIMUM>(p, vectors); break;
      default: binary_vectors<T, EMBER_K_BINARY_DIV>(p, vectors); break; /* as apply_binary */
    }
    done = (int64_t)vectors * Vec16<T>::kCount;
  }
  if (p.rank == 1) {
    const int64_t sa = p.a_strides[0], sb = p.b_strides[0];
    for (int64_t i = done + global_thread(); i < count; i += global_stride()) {
      store<T>(p.y, i, apply_binary_relu(p.op, p.relu != 0, load<T>(p.a, i * sa), load<T>(p.b, i * sb)));
    }
    return;
  }
  const int rank = (int)p.rank;
  for (int64_t i = done + global_thread(); i < count; i += global_stride()) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t index = rest % p.dims[d];
      rest /= p.dims[d];
      oa += index * p.a_strides[d];
      ob += index * p.b_strides[d];
    }
    store<T>(p.y, i, apply_binary_relu(p.op, p.relu != 0, load<T>(p.a, oa), load<T>(p.b, ob)));
  }
}

}  // namespace ember

EMBER_K_FOR_EACH_DTYPE(ember_binary, ember::binary, ember_k_binary_params)
