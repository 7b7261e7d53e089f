/* CPU kernels that move elements without computing on them (any dtype): RESHAPE and COPY
 * (bytes copied in order), PERMUTE, EXPAND, SLICE, CAT; and EMBEDDING, a gather of rows. */
#include <inttypes.h>

#include "cpu_ops.h"

void ember_cpu_copy(const ember_cpu_op_args* args) {
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  void* y_data = ember_cpu_output_data(args, 0);
  const void* x_data = ember_cpu_input_data(args, 0);
  /* A RESHAPE at its input's arena offset is a view: the bytes are already there (and a
   * memcpy onto itself is undefined). */
  if (y->nbytes == 0 || y_data == x_data) return;
  memcpy(y_data, x_data, y->nbytes);
}

/* Copies y (dims[0..rank), row-major) element by element from x, where a step along y's
 * dim d moves x by strides[d] elements, starting at x element `offset`. */
static void strided_copy(uint8_t* y_data, const uint8_t* x_data, size_t element_size,
                         uint32_t rank, const size_t* dims, const size_t* strides, size_t offset,
                         size_t count) {
  size_t index[EMBER_MAX_RANK] = {0};
  size_t x_offset = offset;
  for (size_t i = 0; i < count; ++i) {
    memcpy(y_data + i * element_size, x_data + x_offset * element_size, element_size);
    for (uint32_t d = rank; d-- > 0;) {
      ++index[d];
      x_offset += strides[d];
      if (index[d] < dims[d]) break;
      x_offset -= strides[d] * dims[d];
      index[d] = 0;
    }
  }
}

/* x's contiguous element strides. */
static void contiguous_strides(const ember_tensor_desc* x, size_t* strides) {
  size_t stride = 1;
  for (uint32_t d = x->rank; d-- > 0;) {
    strides[d] = stride;
    stride *= (size_t)x->dims[d];
  }
}

void ember_cpu_permute(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  size_t x_strides[EMBER_MAX_RANK], strides[EMBER_MAX_RANK], dims[EMBER_MAX_RANK];
  contiguous_strides(x, x_strides);
  /* Reordered so that step d of y moves x by strides[d]. */
  for (uint32_t d = 0; d < x->rank; ++d) {
    strides[d] = x_strides[ember_cpu_attr(args, d)];
    dims[d] = (size_t)y->dims[d];
  }
  strided_copy(ember_cpu_output_data(args, 0), ember_cpu_input_data(args, 0),
               ember_dtype_size(y->dtype), x->rank, dims, strides, 0, (size_t)y->numel);
}

void ember_cpu_expand(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  ember_cpu_broadcast_walk walk;
  ember_cpu_broadcast_walk_init(&walk, y->dims, y->rank, x->dims, x->rank, 1, NULL, 0, 1);
  strided_copy(ember_cpu_output_data(args, 0), ember_cpu_input_data(args, 0),
               ember_dtype_size(y->dtype), y->rank, walk.dims, walk.strides[0], 0,
               (size_t)y->numel);
}

void ember_cpu_slice(const ember_cpu_op_args* args) {
  const ember_tensor_desc* x = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const uint32_t dim = (uint32_t)ember_cpu_attr(args, EMBER_ATTR_SLICE_DIM);
  const size_t start = (size_t)ember_cpu_attr(args, EMBER_ATTR_SLICE_START);
  const size_t step = (size_t)ember_cpu_attr(args, EMBER_ATTR_SLICE_STEP);
  size_t strides[EMBER_MAX_RANK], dims[EMBER_MAX_RANK];
  contiguous_strides(x, strides);
  const size_t offset = start * strides[dim];
  strides[dim] *= step;
  for (uint32_t d = 0; d < y->rank; ++d) dims[d] = (size_t)y->dims[d];
  strided_copy(ember_cpu_output_data(args, 0), ember_cpu_input_data(args, 0),
               ember_dtype_size(y->dtype), y->rank, dims, strides, offset, (size_t)y->numel);
}

void ember_cpu_cat(const ember_cpu_op_args* args) {
  const ember_tensor_desc* y = ember_cpu_output_tensor(args, 0);
  if (y->numel == 0) return;
  const uint32_t dim = (uint32_t)ember_cpu_attr(args, EMBER_ATTR_CAT_DIM);
  const size_t element_size = ember_dtype_size(y->dtype);
  /* Each input contributes a block of inner * dims[dim] elements per outer index. */
  const size_t outer = ember_cpu_dims_product(y->dims, 0, dim);
  const size_t inner = ember_cpu_dims_product(y->dims, dim + 1, y->rank) * element_size;
  const size_t y_row = (size_t)y->dims[dim] * inner;
  uint8_t* y_data = ember_cpu_output_data(args, 0);
  size_t column = 0;
  for (uint32_t i = 0; i < args->op->num_inputs; ++i) {
    const ember_tensor_desc* x = ember_cpu_input_tensor(args, i);
    const uint8_t* x_data = ember_cpu_input_data(args, i);
    const size_t x_row = (size_t)x->dims[dim] * inner;
    if (x_row != 0) {
      for (size_t o = 0; o < outer; ++o) {
        memcpy(y_data + o * y_row + column, x_data + o * x_row, x_row);
      }
    }
    column += x_row;
  }
}

ember_status* ember_cpu_embedding(const ember_cpu_op_args* args) {
  const ember_tensor_desc* w = ember_cpu_input_tensor(args, 0);
  const ember_tensor_desc* indices = ember_cpu_input_tensor(args, 1);
  const uint8_t* w_data = ember_cpu_input_data(args, 0);
  const void* index_data = ember_cpu_input_data(args, 1);
  uint8_t* y_data = ember_cpu_output_data(args, 0);
  const size_t row = (size_t)w->dims[1] * ember_dtype_size(w->dtype);
  const int64_t rows = w->dims[0];
  for (size_t i = 0; i < (size_t)indices->numel; ++i) {
    const int64_t index = ember_cpu_load_int(index_data, indices->dtype, i);
    if (index < 0 || index >= rows) {
      return ember_status_make(EMBER_INVALID_ARGUMENT, "op %" PRIu32 " (EMBEDDING): index %"
                               PRId64 " at position %zu of '%s' is out of range for the %"
                               PRId64 " rows of '%s'; indices must be in 0..rows-1, as "
                               "torch.nn.functional.embedding requires",
                               args->op_index, index, i, indices->name, rows, w->name);
    }
    if (row != 0) memcpy(y_data + i * row, w_data + (size_t)index * row, row);
  }
  return NULL;
}
