/* Plan reader: decodes plan bytes into an ember_plan and checks their structure (level 1
 * of docs/plan-format.md "Verification").
 *
 * Every field is loaded with an explicit little-endian load, so the bytes need no
 * alignment. Nothing is read before the bytes it needs are known to be there: the header
 * is bounded by header_size and the buffer size, each table by its section, and each
 * section by plan_size; counts and products go through checked_math.h. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "plan.h"

enum {
  SECTION_STRINGS = 0,
  SECTION_TENSORS,
  SECTION_IO,
  SECTION_OPS,
  SECTION_OPERANDS,
  SECTION_ATTRS,
  SECTION_CONSTANTS,
  SECTION_SYMBOLS, /* in headers of EMBER_PLAN_HEADER_SIZE_SYMBOLS bytes or more */
  SECTION_COUNT,
};

static const char* const kSectionNames[SECTION_COUNT] = {
    "strings", "tensors", "io", "ops", "operands", "attrs", "constants", "symbols",
};

static const uint8_t kMagic[8] = {'E', 'M', 'B', 'R', 'P', 'L', 'A', 'N'};

/* Offsets of header fields (docs/plan-format.md "Header"). */
enum {
  HEADER_MAGIC = 0,
  HEADER_FORMAT_VERSION = 8,
  HEADER_HEADER_SIZE = 12,
  HEADER_PLAN_SIZE = 16,
  HEADER_FLAGS = 24,
  HEADER_TENSOR_RECORD_SIZE = 28,
  HEADER_OP_RECORD_SIZE = 32,
  HEADER_NUM_TENSORS = 36,
  HEADER_NUM_OPS = 40,
  HEADER_NUM_INPUTS = 44,
  HEADER_NUM_OUTPUTS = 48,
  HEADER_NUM_OPERANDS = 52,
  HEADER_ARENA_SIZE = 56,
  HEADER_SECTIONS = 64,
};

/* Offsets of tensor record fields. */
enum {
  TENSOR_NAME_OFFSET = 0,
  TENSOR_NAME_LENGTH = 4,
  TENSOR_DTYPE = 8,
  TENSOR_STORAGE = 9,
  TENSOR_RANK = 10,
  TENSOR_RESERVED_BYTE = 11,
  TENSOR_RESERVED_WORD = 12,
  TENSOR_DATA_OFFSET = 16,
  TENSOR_NBYTES = 24,
  TENSOR_DIMS = 32,
  TENSOR_DIM_SYMBOLS = 96, /* in records of EMBER_PLAN_TENSOR_RECORD_SIZE_SYMBOLS or more */
};

/* Offsets of op record fields. */
enum {
  OP_OPCODE = 0,
  OP_FIRST_OPERAND = 4,
  OP_NUM_INPUTS = 8,
  OP_NUM_OUTPUTS = 10,
  OP_FIRST_ATTR = 12,
  OP_NUM_ATTRS = 16,
  OP_RESERVED = 20,
};

static uint16_t load_u16(const uint8_t* p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t load_u32(const uint8_t* p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
         ((uint32_t)p[3] << 24);
}

static uint64_t load_u64(const uint8_t* p) {
  return (uint64_t)load_u32(p) | ((uint64_t)load_u32(p + 4) << 32);
}

static int64_t load_i64(const uint8_t* p) {
  uint64_t bits = load_u64(p);
  int64_t value;
  memcpy(&value, &bits, sizeof value); /* two's complement reinterpretation, no UB */
  return value;
}

typedef struct plan_section {
  uint64_t offset;
  uint64_t size;
} plan_section;

typedef struct plan_header {
  uint32_t header_size;
  uint64_t plan_size;
  uint32_t tensor_record_size;
  uint32_t op_record_size;
  uint32_t num_tensors;
  uint32_t num_ops;
  uint32_t num_inputs;
  uint32_t num_outputs;
  uint32_t num_operands;
  uint64_t arena_size;
  plan_section sections[SECTION_COUNT];
  /* Sections the header holds: SECTION_COUNT, or SECTION_SYMBOLS for a header too short
   * for the symbols entry (whose section is then empty). */
  uint32_t num_sections;
} plan_header;

static ember_status* read_header(const uint8_t* bytes, size_t size, plan_header* out) {
  /* The magic and version come first so that a plan of another version is reported as
   * such even when its header has another shape. */
  if (size < HEADER_HEADER_SIZE) {
    return EMBER_PLAN_ERROR("%zu bytes is too short to hold the magic and format_version "
                            "(the version 1 header is %u bytes)",
                            size, EMBER_PLAN_HEADER_SIZE_V1);
  }
  if (memcmp(bytes + HEADER_MAGIC, kMagic, sizeof kMagic) != 0) {
    return EMBER_PLAN_ERROR("magic is not \"EMBRPLAN\"; these bytes are not an Ember plan");
  }
  uint32_t version = load_u32(bytes + HEADER_FORMAT_VERSION);
  if (version != EMBER_PLAN_FORMAT_VERSION) {
    return ember_status_make(EMBER_UNSUPPORTED_VERSION,
                             "plan: format_version %" PRIu32 " is not supported; this engine "
                             "reads version %u",
                             version, EMBER_PLAN_FORMAT_VERSION);
  }
  if (size < EMBER_PLAN_HEADER_SIZE_V1) {
    return EMBER_PLAN_ERROR("%zu bytes is too short to hold the %u-byte version 1 header", size,
                            EMBER_PLAN_HEADER_SIZE_V1);
  }
  out->header_size = load_u32(bytes + HEADER_HEADER_SIZE);
  if (out->header_size < EMBER_PLAN_HEADER_SIZE_V1) {
    return EMBER_PLAN_ERROR("header_size %" PRIu32 " is below the version 1 minimum of %u",
                            out->header_size, EMBER_PLAN_HEADER_SIZE_V1);
  }
  if (out->header_size > size) {
    return EMBER_PLAN_ERROR("header_size %" PRIu32 " exceeds the buffer size %zu",
                            out->header_size, size);
  }
  out->plan_size = load_u64(bytes + HEADER_PLAN_SIZE);
  if (out->plan_size != (uint64_t)size) {
    return EMBER_PLAN_ERROR("plan_size %" PRIu64 " does not equal the buffer size %zu "
                            "(truncated or padded plan)",
                            out->plan_size, size);
  }
  uint32_t flags = load_u32(bytes + HEADER_FLAGS);
  if (flags != 0) {
    return EMBER_PLAN_ERROR("flags 0x%" PRIx32 " must be 0 in version 1", flags);
  }
  out->tensor_record_size = load_u32(bytes + HEADER_TENSOR_RECORD_SIZE);
  if (out->tensor_record_size < EMBER_PLAN_TENSOR_RECORD_SIZE_V1) {
    return EMBER_PLAN_ERROR("tensor_record_size %" PRIu32 " is below the minimum of %u",
                            out->tensor_record_size, EMBER_PLAN_TENSOR_RECORD_SIZE_V1);
  }
  out->op_record_size = load_u32(bytes + HEADER_OP_RECORD_SIZE);
  if (out->op_record_size < EMBER_PLAN_OP_RECORD_SIZE_V1) {
    return EMBER_PLAN_ERROR("op_record_size %" PRIu32 " is below the minimum of %u",
                            out->op_record_size, EMBER_PLAN_OP_RECORD_SIZE_V1);
  }
  out->num_tensors = load_u32(bytes + HEADER_NUM_TENSORS);
  out->num_ops = load_u32(bytes + HEADER_NUM_OPS);
  out->num_inputs = load_u32(bytes + HEADER_NUM_INPUTS);
  out->num_outputs = load_u32(bytes + HEADER_NUM_OUTPUTS);
  out->num_operands = load_u32(bytes + HEADER_NUM_OPERANDS);
  out->arena_size = load_u64(bytes + HEADER_ARENA_SIZE);
  if (out->num_tensors == 0) return EMBER_PLAN_ERROR("num_tensors is 0; it must be >= 1");
  if (out->num_ops == 0) return EMBER_PLAN_ERROR("num_ops is 0; it must be >= 1");
  if (out->num_outputs == 0) return EMBER_PLAN_ERROR("num_outputs is 0; it must be >= 1");
  out->num_sections =
      out->header_size >= EMBER_PLAN_HEADER_SIZE_SYMBOLS ? SECTION_COUNT : SECTION_SYMBOLS;
  for (uint32_t i = 0; i < out->num_sections; ++i) {
    out->sections[i].offset = load_u64(bytes + HEADER_SECTIONS + 16u * i);
    out->sections[i].size = load_u64(bytes + HEADER_SECTIONS + 16u * i + 8u);
  }
  return NULL;
}

static ember_status* check_sections(const plan_header* header) {
  for (uint32_t i = 0; i < header->num_sections; ++i) {
    const plan_section* s = &header->sections[i];
    uint64_t end;
    if (s->offset < header->header_size) {
      return EMBER_PLAN_ERROR("section %s: offset %" PRIu64 " lies inside the header "
                              "(header_size %" PRIu32 ")",
                              kSectionNames[i], s->offset, header->header_size);
    }
    if (!ember_checked_add_u64(s->offset, s->size, &end) || end > header->plan_size) {
      return EMBER_PLAN_ERROR("section %s: offset %" PRIu64 " + size %" PRIu64
                              " exceeds plan_size %" PRIu64,
                              kSectionNames[i], s->offset, s->size, header->plan_size);
    }
    uint64_t alignment = i == SECTION_CONSTANTS ? EMBER_DATA_ALIGNMENT : 8u;
    if (s->offset % alignment != 0) {
      return EMBER_PLAN_ERROR("section %s: offset %" PRIu64 " is not a multiple of %" PRIu64,
                              kSectionNames[i], s->offset, alignment);
    }
  }
  for (uint32_t i = 0; i < header->num_sections; ++i) {
    for (uint32_t j = i + 1; j < header->num_sections; ++j) {
      const plan_section* a = &header->sections[i];
      const plan_section* b = &header->sections[j];
      if (ember_ranges_overlap(a->offset, a->size, b->offset, b->size)) {
        return EMBER_PLAN_ERROR("sections %s [%" PRIu64 ", %" PRIu64 ") and %s [%" PRIu64
                                ", %" PRIu64 ") overlap",
                                kSectionNames[i], a->offset, a->offset + a->size,
                                kSectionNames[j], b->offset, b->offset + b->size);
      }
    }
  }

  /* Sections whose size follows from counts. All factors are u32 or small, so these
   * products fit in u64, but they go through the checked helpers all the same. */
  struct {
    uint32_t section;
    uint64_t count;
    uint64_t record_size;
    const char* count_name;
    const char* size_name;
  } const tables[] = {
      {SECTION_TENSORS, header->num_tensors, header->tensor_record_size, "num_tensors",
       "tensor_record_size"},
      {SECTION_IO, (uint64_t)header->num_inputs + header->num_outputs, 4,
       "num_inputs + num_outputs", "entry size"},
      {SECTION_OPS, header->num_ops, header->op_record_size, "num_ops", "op_record_size"},
      {SECTION_OPERANDS, header->num_operands, 4, "num_operands", "entry size"},
  };
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; ++i) {
    uint64_t expected;
    const plan_section* s = &header->sections[tables[i].section];
    if (!ember_checked_mul_u64(tables[i].count, tables[i].record_size, &expected) ||
        expected != s->size) {
      return EMBER_PLAN_ERROR("section %s is %" PRIu64 " bytes; %s %" PRIu64 " x %s %" PRIu64
                              " needs %" PRIu64 " (count does not match the section)",
                              kSectionNames[tables[i].section], s->size, tables[i].count_name,
                              tables[i].count, tables[i].size_name, tables[i].record_size,
                              tables[i].count * tables[i].record_size);
    }
  }
  const plan_section* attrs = &header->sections[SECTION_ATTRS];
  if (attrs->size % 8u != 0) {
    return EMBER_PLAN_ERROR("section attrs is %" PRIu64 " bytes, not a multiple of 8",
                            attrs->size);
  }
  if (attrs->size / 8u > UINT32_MAX) {
    return EMBER_PLAN_ERROR("section attrs holds %" PRIu64 " words; first_attr can address "
                            "at most %" PRIu32,
                            attrs->size / 8u, UINT32_MAX);
  }
  const plan_section* symbols = &header->sections[SECTION_SYMBOLS];
  if (symbols->size % EMBER_PLAN_SYMBOL_RECORD_SIZE != 0 ||
      symbols->size / EMBER_PLAN_SYMBOL_RECORD_SIZE > EMBER_PLAN_MAX_SYMBOLS) {
    return EMBER_PLAN_ERROR("section symbols is %" PRIu64 " bytes; it must hold whole %u-byte "
                            "records, at most %u of them",
                            symbols->size, EMBER_PLAN_SYMBOL_RECORD_SIZE,
                            EMBER_PLAN_MAX_SYMBOLS);
  }
  return NULL;
}

static ember_status* allocate_array(uint64_t count, size_t element_size, void** out) {
  *out = NULL;
  if (count == 0) return NULL;
  uint64_t total;
  size_t total_size;
  if (!ember_checked_mul_u64(count, element_size, &total) ||
      !ember_u64_to_size(total, &total_size)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "plan: %" PRIu64 " table entries of %zu "
                             "bytes do not fit in memory", count, element_size);
  }
  *out = calloc(1, total_size);
  if (*out == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "plan: out of memory allocating %zu bytes "
                             "for a table of %" PRIu64 " entries", total_size, count);
  }
  return NULL;
}

static ember_status* read_symbols(const uint8_t* bytes, const plan_header* header,
                                  ember_plan* plan) {
  const plan_section* section = &header->sections[SECTION_SYMBOLS];
  const uint32_t count = (uint32_t)(section->size / EMBER_PLAN_SYMBOL_RECORD_SIZE);
  EMBER_RETURN_IF_ERROR(allocate_array(count, sizeof(ember_symbol_desc),
                                       (void**)&plan->symbols));
  plan->num_symbols = count;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* record = bytes + section->offset + (uint64_t)i * EMBER_PLAN_SYMBOL_RECORD_SIZE;
    ember_symbol_desc* symbol = &plan->symbols[i];
    symbol->min = load_i64(record);
    symbol->max = load_i64(record + 8u);
    if (symbol->min < 0 || symbol->max < 1 || symbol->min > symbol->max) {
      return EMBER_PLAN_ERROR("symbol %" PRIu32 ": bounds [%" PRId64 ", %" PRId64 "] must "
                              "satisfy 0 <= min <= max and max >= 1",
                              i, symbol->min, symbol->max);
    }
  }
  return NULL;
}

/* The length of the valid UTF-8 prefix of bytes[0, length): the whole length when it is
 * all UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
static size_t utf8_valid_prefix(const uint8_t* bytes, size_t length) {
  size_t i = 0;
  while (i < length) {
    const uint8_t b = bytes[i];
    size_t extra;
    uint32_t min, code;
    if (b < 0x80) {
      ++i;
      continue;
    } else if ((b & 0xe0) == 0xc0) {
      extra = 1, min = 0x80, code = b & 0x1fu;
    } else if ((b & 0xf0) == 0xe0) {
      extra = 2, min = 0x800, code = b & 0x0fu;
    } else if ((b & 0xf8) == 0xf0) {
      extra = 3, min = 0x10000, code = b & 0x07u;
    } else {
      return i;
    }
    if (length - i <= extra) return i;
    for (size_t k = 1; k <= extra; ++k) {
      if ((bytes[i + k] & 0xc0) != 0x80) return i;
      code = code << 6 | (bytes[i + k] & 0x3fu);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return i;
    i += extra + 1;
  }
  return i;
}

/* Checks the name slice of tensor `index` and adds its length + 1 to *names_size. */
static ember_status* check_tensor_name(const uint8_t* bytes, const plan_header* header,
                                       uint32_t index, const uint8_t* record,
                                       uint64_t* names_size) {
  const plan_section* strings = &header->sections[SECTION_STRINGS];
  uint32_t name_offset = load_u32(record + TENSOR_NAME_OFFSET);
  uint32_t name_length = load_u32(record + TENSOR_NAME_LENGTH);
  if (name_length == 0 || name_length > EMBER_PLAN_MAX_NAME_LENGTH) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 ": name_length %" PRIu32 " must be 1..%u", index,
                            name_length, EMBER_PLAN_MAX_NAME_LENGTH);
  }
  if ((uint64_t)name_offset + name_length > strings->size) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 ": name [%" PRIu32 ", %" PRIu64 ") lies outside "
                            "the strings section (%" PRIu64 " bytes)",
                            index, name_offset, (uint64_t)name_offset + name_length,
                            strings->size);
  }
  const uint8_t* name = bytes + strings->offset + name_offset;
  const void* nul = memchr(name, '\0', name_length);
  if (nul != NULL) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 ": name contains a NUL byte at position %td",
                            index, (const uint8_t*)nul - name);
  }
  /* Names reach messages and logs, whose readers (ExecuTorch's Python bindings) decode
   * UTF-8. */
  const size_t valid = utf8_valid_prefix(name, name_length);
  if (valid != name_length) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 ": name is not UTF-8 (byte %zu of %" PRIu32 ")",
                            index, valid, name_length);
  }
  if (!ember_checked_add_u64(*names_size, (uint64_t)name_length + 1u, names_size)) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 ": total name length overflows", index);
  }
  return NULL;
}

static ember_status* read_tensor(const uint8_t* record, const plan_header* header,
                                 const ember_plan* plan, uint32_t index,
                                 ember_tensor_desc* tensor) {
  const char* name = tensor->name;
  uint8_t dtype = record[TENSOR_DTYPE];
  uint8_t storage = record[TENSOR_STORAGE];
  uint8_t rank = record[TENSOR_RANK];
  size_t dtype_size = ember_dtype_size((ember_dtype)dtype);
  if (dtype_size == 0) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): dtype %u is not a dtype code (1..6)",
                            index, name, dtype);
  }
  if (storage > EMBER_STORAGE_CONSTANT) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): storage %u is not a storage code "
                            "(0 input, 1 output, 2 intermediate, 3 constant)",
                            index, name, storage);
  }
  if (rank > EMBER_MAX_RANK) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): rank %u exceeds the maximum of %u",
                            index, name, rank, EMBER_MAX_RANK);
  }
  if (record[TENSOR_RESERVED_BYTE] != 0 || load_u32(record + TENSOR_RESERVED_WORD) != 0) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): reserved fields must be 0", index,
                            name);
  }
  tensor->dtype = (ember_dtype)dtype;
  tensor->storage = (ember_storage)storage;
  tensor->rank = rank;
  uint64_t numel = 1;
  for (uint32_t d = 0; d < EMBER_MAX_RANK; ++d) {
    int64_t dim = load_i64(record + TENSOR_DIMS + 8u * d);
    tensor->dims[d] = dim;
    if (d >= rank) {
      if (dim != 0) {
        return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): dims[%" PRIu32 "] is %" PRId64
                                " past rank %u; unused dims must be 0",
                                index, name, d, dim, rank);
      }
      continue;
    }
    if (dim < 0) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): dims[%" PRIu32 "] is %" PRId64
                              "; dims must be >= 0",
                              index, name, d, dim);
    }
    if (!ember_checked_mul_u64(numel, (uint64_t)dim, &numel)) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): the product of dims overflows 64 "
                              "bits at dims[%" PRIu32 "]",
                              index, name, d);
    }
  }
  if (header->tensor_record_size >= EMBER_PLAN_TENSOR_RECORD_SIZE_SYMBOLS) {
    for (uint32_t d = 0; d < EMBER_MAX_RANK; ++d) {
      const uint8_t symbol = record[TENSOR_DIM_SYMBOLS + d];
      tensor->dim_symbols[d] = symbol;
      if (symbol == 0) continue;
      if (d >= rank) {
        return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): dim_symbols[%" PRIu32 "] is %u "
                                "past rank %u; unused entries must be 0",
                                index, name, d, symbol, rank);
      }
      if (symbol > plan->num_symbols) {
        return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): dim_symbols[%" PRIu32 "] names "
                                "symbol %u; the plan has %" PRIu32 " symbols",
                                index, name, d, symbol - 1u, plan->num_symbols);
      }
      if (storage == EMBER_STORAGE_CONSTANT) {
        return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): a constant cannot have a "
                                "dynamic dim (dims[%" PRIu32 "] names symbol %u)",
                                index, name, d, symbol - 1u);
      }
      const int64_t max = plan->symbols[symbol - 1u].max;
      if (tensor->dims[d] < max || tensor->dims[d] % max != 0) {
        return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): dims[%" PRIu32 "] = %" PRId64
                                " is not a positive multiple of symbol %u's max %" PRId64,
                                index, name, d, tensor->dims[d], symbol - 1u, max);
      }
      tensor->dynamic = true;
    }
  }
  uint64_t computed_nbytes;
  if (!ember_checked_mul_u64(numel, dtype_size, &computed_nbytes) ||
      !ember_u64_to_size(computed_nbytes, &tensor->nbytes)) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): the product of dims (%" PRIu64
                            ") x dtype size %zu overflows",
                            index, name, numel, dtype_size);
  }
  tensor->numel = numel;
  uint64_t nbytes = load_u64(record + TENSOR_NBYTES);
  if (nbytes != computed_nbytes) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): nbytes %" PRIu64 " does not equal "
                            "product(dims) %" PRIu64 " x %s size %zu = %" PRIu64,
                            index, name, nbytes, numel, ember_dtype_name(tensor->dtype),
                            dtype_size, computed_nbytes);
  }
  tensor->data_offset = load_u64(record + TENSOR_DATA_OFFSET);
  if (storage == EMBER_STORAGE_INPUT || storage == EMBER_STORAGE_OUTPUT) {
    if (tensor->data_offset != 0) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): data_offset %" PRIu64 " must be 0 "
                              "for storage %s",
                              index, name, tensor->data_offset, ember_storage_name(storage));
    }
  } else if (tensor->data_offset % EMBER_DATA_ALIGNMENT != 0) {
    return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): data_offset %" PRIu64 " (storage %s) "
                            "is not a multiple of %u",
                            index, name, tensor->data_offset, ember_storage_name(storage),
                            EMBER_DATA_ALIGNMENT);
  }
  if (storage == EMBER_STORAGE_CONSTANT) {
    uint64_t end;
    const uint64_t section_size = header->sections[SECTION_CONSTANTS].size;
    if (!ember_checked_add_u64(tensor->data_offset, nbytes, &end) || end > section_size) {
      return EMBER_PLAN_ERROR("tensor %" PRIu32 " ('%s'): data_offset %" PRIu64 " + nbytes "
                              "%" PRIu64 " exceeds the constants section (%" PRIu64 " bytes)",
                              index, name, tensor->data_offset, nbytes, section_size);
    }
  }
  /* Filled by the verifier. */
  tensor->io_index = EMBER_PLAN_NO_INDEX;
  tensor->first_op = EMBER_PLAN_NO_INDEX;
  tensor->last_op = EMBER_PLAN_NO_INDEX;
  tensor->view_of = index;
  return NULL;
}

static ember_status* read_tensors(const uint8_t* bytes, const plan_header* header,
                                  ember_plan* plan) {
  const uint64_t table = header->sections[SECTION_TENSORS].offset;
  const uint64_t strings = header->sections[SECTION_STRINGS].offset;
  /* Records lie inside the tensors section (checked above), so `table + i * size` is in
   * bounds; it is computed in u64 from u32 factors and cannot overflow. */
  uint64_t names_size = 0;
  for (uint32_t i = 0; i < header->num_tensors; ++i) {
    const uint8_t* record = bytes + table + (uint64_t)i * header->tensor_record_size;
    EMBER_RETURN_IF_ERROR(check_tensor_name(bytes, header, i, record, &names_size));
  }
  size_t names_bytes;
  if (!ember_u64_to_size(names_size, &names_bytes)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "plan: names do not fit in memory");
  }
  EMBER_RETURN_IF_ERROR(allocate_array(names_bytes, 1, (void**)&plan->names));
  EMBER_RETURN_IF_ERROR(allocate_array(header->num_tensors, sizeof(ember_tensor_desc),
                                       (void**)&plan->tensors));
  plan->num_tensors = header->num_tensors;
  char* cursor = plan->names;
  for (uint32_t i = 0; i < header->num_tensors; ++i) {
    const uint8_t* record = bytes + table + (uint64_t)i * header->tensor_record_size;
    uint32_t name_offset = load_u32(record + TENSOR_NAME_OFFSET);
    uint32_t name_length = load_u32(record + TENSOR_NAME_LENGTH);
    memcpy(cursor, bytes + strings + name_offset, name_length);
    cursor[name_length] = '\0';
    plan->tensors[i].name = cursor;
    cursor += name_length + 1u;
    EMBER_RETURN_IF_ERROR(read_tensor(record, header, plan, i, &plan->tensors[i]));
  }
  return NULL;
}

static ember_status* read_ops(const uint8_t* bytes, const plan_header* header,
                              ember_plan* plan) {
  EMBER_RETURN_IF_ERROR(
      allocate_array(header->num_ops, sizeof(ember_op_desc), (void**)&plan->ops));
  plan->num_ops = header->num_ops;
  const uint64_t table = header->sections[SECTION_OPS].offset;
  for (uint32_t i = 0; i < header->num_ops; ++i) {
    const uint8_t* record = bytes + table + (uint64_t)i * header->op_record_size;
    uint32_t opcode = load_u32(record + OP_OPCODE);
    if (opcode < EMBER_OP_FIRST || opcode > EMBER_OP_LAST) {
      return EMBER_PLAN_ERROR("op %" PRIu32 ": opcode %" PRIu32 " is not an opcode (%d..%d)",
                              i, opcode, EMBER_OP_FIRST, EMBER_OP_LAST);
    }
    if (load_u32(record + OP_RESERVED) != 0) {
      return EMBER_PLAN_ERROR("op %" PRIu32 " (%s): reserved field must be 0", i,
                              ember_opcode_name(opcode));
    }
    ember_op_desc* op = &plan->ops[i];
    op->opcode = (ember_opcode)opcode;
    op->first_operand = load_u32(record + OP_FIRST_OPERAND);
    op->num_inputs = load_u16(record + OP_NUM_INPUTS);
    op->num_outputs = load_u16(record + OP_NUM_OUTPUTS);
    op->first_attr = load_u32(record + OP_FIRST_ATTR);
    op->num_attrs = load_u32(record + OP_NUM_ATTRS);
  }
  return NULL;
}

static ember_status* read_u32_table(const uint8_t* at, uint32_t count, uint32_t** out) {
  EMBER_RETURN_IF_ERROR(allocate_array(count, sizeof(uint32_t), (void**)out));
  for (uint32_t i = 0; i < count; ++i) (*out)[i] = load_u32(at + 4u * (uint64_t)i);
  return NULL;
}

static ember_status* read_plan(const uint8_t* bytes, size_t size, ember_plan* plan) {
  plan_header header;
  memset(&header, 0, sizeof header);
  EMBER_RETURN_IF_ERROR(read_header(bytes, size, &header));
  EMBER_RETURN_IF_ERROR(check_sections(&header));
  EMBER_RETURN_IF_ERROR(read_symbols(bytes, &header, plan));
  EMBER_RETURN_IF_ERROR(read_tensors(bytes, &header, plan));
  EMBER_RETURN_IF_ERROR(read_ops(bytes, &header, plan));

  const uint8_t* io = bytes + header.sections[SECTION_IO].offset;
  EMBER_RETURN_IF_ERROR(read_u32_table(io, header.num_inputs, &plan->inputs));
  plan->num_inputs = header.num_inputs;
  EMBER_RETURN_IF_ERROR(
      read_u32_table(io + 4u * (uint64_t)header.num_inputs, header.num_outputs, &plan->outputs));
  plan->num_outputs = header.num_outputs;
  EMBER_RETURN_IF_ERROR(read_u32_table(bytes + header.sections[SECTION_OPERANDS].offset,
                                       header.num_operands, &plan->operands));
  plan->num_operands = header.num_operands;

  uint32_t num_attrs = (uint32_t)(header.sections[SECTION_ATTRS].size / 8u);
  EMBER_RETURN_IF_ERROR(allocate_array(num_attrs, sizeof(int64_t), (void**)&plan->attrs));
  const uint8_t* attrs = bytes + header.sections[SECTION_ATTRS].offset;
  for (uint32_t i = 0; i < num_attrs; ++i) plan->attrs[i] = load_i64(attrs + 8u * (uint64_t)i);
  plan->num_attrs = num_attrs;

  plan->arena_size = header.arena_size;
  plan->constants = bytes + header.sections[SECTION_CONSTANTS].offset;
  plan->constants_size = header.sections[SECTION_CONSTANTS].size;
  plan->constants_owned = false;
  return NULL;
}

ember_status* ember_plan_read(const uint8_t* bytes, size_t size, ember_plan* out_plan) {
  memset(out_plan, 0, sizeof *out_plan);
  if (bytes == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "plan: the plan pointer is NULL");
  }
  ember_status* status = read_plan(bytes, size, out_plan);
  if (status != NULL) ember_plan_deinitialize(out_plan);
  return status;
}

ember_status* ember_plan_own_constants(ember_plan* plan) {
  if (plan->constants_owned) return NULL;
  size_t size;
  uint64_t rounded;
  /* aligned_alloc wants a size that is a multiple of the alignment, and at least one
   * block so that an empty section still gets a distinct, aligned pointer. */
  if (!ember_checked_align_u64(plan->constants_size == 0 ? 1u : plan->constants_size,
                               EMBER_DATA_ALIGNMENT, &rounded) ||
      !ember_u64_to_size(rounded, &size)) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "plan: constants section of %" PRIu64
                             " bytes does not fit in memory", plan->constants_size);
  }
  uint8_t* copy = aligned_alloc(EMBER_DATA_ALIGNMENT, size);
  if (copy == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "plan: out of memory copying the constants "
                             "section (%zu bytes)", size);
  }
  if (plan->constants_size != 0) memcpy(copy, plan->constants, (size_t)plan->constants_size);
  memset(copy + plan->constants_size, 0, size - (size_t)plan->constants_size);
  plan->constants = copy;
  plan->constants_owned = true;
  return NULL;
}

void ember_plan_forget_lent_constants(ember_plan* plan) {
  if (!plan->constants_owned) plan->constants = NULL;
}

void ember_plan_deinitialize(ember_plan* plan) {
  if (plan == NULL) return;
  free(plan->tensors);
  free(plan->ops);
  free(plan->operands);
  free(plan->attrs);
  free(plan->inputs);
  free(plan->outputs);
  free(plan->names);
  free(plan->symbols);
  if (plan->constants_owned) free((void*)(uintptr_t)plan->constants);
  memset(plan, 0, sizeof *plan);
}

const char* ember_opcode_name(uint32_t opcode) {
  static const char* const kNames[] = {
      "unknown", "LINEAR", "MATMUL", "RELU", "GELU", "SIGMOID", "TANH", "SILU", "ADD",
      "SUB", "MUL", "DIV", "RESHAPE", "PERMUTE", "SOFTMAX", "LAYER_NORM", "COPY",
      "CONV2D", "MAX_POOL2D", "AVG_POOL2D", "ADAPTIVE_AVG_POOL2D", "REDUCE_SUM",
      "REDUCE_MEAN", "REDUCE_MAX", "POW", "NEG", "EXP", "LOG", "SQRT", "RSQRT", "ABS",
      "RECIPROCAL", "CLAMP", "WHERE", "EXPAND", "SLICE", "CAT", "EMBEDDING", "SDPA", "CAST",
      "MAXIMUM", "MINIMUM",
  };
  _Static_assert(sizeof kNames / sizeof kNames[0] == EMBER_OP_LAST + 1,
                 "one name per opcode");
  return opcode <= EMBER_OP_LAST ? kNames[opcode] : "unknown";
}

const char* ember_storage_name(uint32_t storage) {
  switch (storage) {
    case EMBER_STORAGE_INPUT: return "input";
    case EMBER_STORAGE_OUTPUT: return "output";
    case EMBER_STORAGE_INTERMEDIATE: return "intermediate";
    case EMBER_STORAGE_CONSTANT: return "constant";
  }
  return "unknown";
}
