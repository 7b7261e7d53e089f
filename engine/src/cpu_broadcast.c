/* Broadcast walks for the CPU kernels (elementwise ops, WHERE, EXPAND, matmul batches). */
#include "cpu_ops.h"

/* Element strides of an input of dims[0..rank) broadcast to an output of out_rank dims,
 * aligned at the last dim; `unit` is the stride of the input's last dim. */
static void broadcast_strides(const int64_t* dims, uint32_t rank, size_t unit,
                              uint32_t out_rank, size_t* out_strides) {
  size_t stride = unit;
  for (uint32_t i = 0; i < out_rank; ++i) {
    const uint32_t d = out_rank - 1 - i; /* output dim, counted from the back */
    if (i < rank && dims[rank - 1 - i] != 1) {
      out_strides[d] = stride;
      stride *= (size_t)dims[rank - 1 - i];
    } else {
      out_strides[d] = 0; /* missing or size-1 dim: broadcast */
    }
  }
}

void ember_cpu_broadcast_walk_init(ember_cpu_broadcast_walk* walk, const int64_t* out_dims,
                                   uint32_t out_rank, const int64_t* a_dims, uint32_t a_rank,
                                   size_t a_unit, const int64_t* b_dims, uint32_t b_rank,
                                   size_t b_unit) {
  memset(walk, 0, sizeof *walk);
  walk->rank = out_rank;
  for (uint32_t d = 0; d < out_rank; ++d) walk->dims[d] = (size_t)out_dims[d];
  broadcast_strides(a_dims, a_rank, a_unit, out_rank, walk->strides[0]);
  broadcast_strides(b_dims, b_rank, b_unit, out_rank, walk->strides[1]);
}

void ember_cpu_broadcast_walk_set(ember_cpu_broadcast_walk* walk, uint32_t k,
                                  const int64_t* dims, uint32_t rank, size_t unit) {
  broadcast_strides(dims, rank, unit, walk->rank, walk->strides[k]);
  walk->offset[k] = 0;
}
