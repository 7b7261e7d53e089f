// EmberBackend: ExecuTorch's BackendInterface over the Ember engine's C API.
//
// This file is the whole delegate. It registers "EmberBackend" with ExecuTorch's backend
// registry from a static initializer, so loading libexecutorch_backend_ember.so is all a
// process has to do (contract 3). Nothing here is exported: the registry holds a pointer
// to the backend object, and the version script (exports.map) keeps our symbols out of
// the dynamic symbol table.
//
// Rules kept throughout (contract 7): nothing throws (built with -fno-exceptions) or
// aborts; every failure is an ExecuTorch Error with a logged line naming the cause
// (log_error); execute allocates nothing (its scratch arrays are sized once, in init).

#include <array>
#include <cstdarg>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include <cinttypes>
#include <cstdlib>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/platform/log.h>

#include <ember/ember.h>

namespace {

using executorch::aten::ScalarType;
using executorch::aten::SizesType;
using executorch::aten::Tensor;
using executorch::runtime::ArrayRef;
using executorch::runtime::Backend;
using executorch::runtime::BackendExecutionContext;
using executorch::runtime::BackendInitContext;
using executorch::runtime::BackendInterface;
using executorch::runtime::BackendOption;
using executorch::runtime::BackendOptionContext;
using executorch::runtime::CompileSpec;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::Result;
using executorch::runtime::Span;

constexpr const char kBackendName[] = "EmberBackend";
// The compile spec (set ahead of time) and runtime spec (set at load time, wins) that
// force an executor: "auto", "cpu" or "cuda".
constexpr const char kExecutorKey[] = "executor";

// ---- logging ------------------------------------------------------------------------

// Every error line this delegate writes goes through here. ExecuTorch formats a log line
// into a buffer of 256 bytes, and its Python bindings decode each line as UTF-8 and end
// the process on a byte that is not (a plan's tensor name, a compile spec, or a character
// cut at the buffer's end): so a message is written as printable ASCII, any other byte as
// \xNN, in pieces that fit, each after the first marked as a continuation. No allocation:
// execute logs too.
constexpr size_t kLogPiece = 200;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void log_error(const char* format, ...) {
  char text[1024];
  va_list args;
  va_start(args, format);
  const int length = std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  if (length < 0) return;
  char escaped[4 * sizeof text];  // at most 4 characters a byte
  size_t size = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    const unsigned char byte = static_cast<unsigned char>(*c);
    if (byte >= 0x20 && byte < 0x7f) {
      escaped[size++] = static_cast<char>(byte);
    } else {
      size += static_cast<size_t>(
          std::snprintf(escaped + size, sizeof escaped - size, "\\x%02x", byte));
    }
  }
  size_t at = 0;
  do {
    size_t piece = size - at < kLogPiece ? size - at : kLogPiece;
    // Cut after a space where one is near, so that no word is split.
    for (size_t back = 0; at + piece < size && back < 40 && back + 1 < piece; ++back) {
      if (escaped[at + piece - 1 - back] == ' ') {
        piece -= back;
        break;
      }
    }
    ET_LOG(Error, "%s%.*s", at == 0 ? "" : "(continued) ", static_cast<int>(piece),
           escaped + at);
    at += piece;
  } while (at < size);
}

// ---- conversions --------------------------------------------------------------------

Error error_from_status_code(ember_status_code code) {
  switch (code) {
    case EMBER_OK:
      return Error::Ok;
    case EMBER_INVALID_PLAN:
      return Error::InvalidProgram;
    case EMBER_UNSUPPORTED_VERSION:
      return Error::DelegateInvalidCompatibility;
    case EMBER_OUT_OF_MEMORY:
      return Error::MemoryAllocationFailed;
    case EMBER_UNAVAILABLE:
      return Error::NotSupported;
    case EMBER_INVALID_ARGUMENT:
      return Error::InvalidArgument;
    case EMBER_INTERNAL:
    default:
      return Error::Internal;
  }
}

// Logs the engine's message, releases the status and returns the ExecuTorch error.
// `what` names the step that failed ("init", "execute").
Error consume_status(ember_status* status, const char* what) {
  const ember_status_code code = ember_status_code_of(status);
  const Error error = error_from_status_code(code);
  log_error("%s: %s failed (%s): %s", kBackendName, what, ember_status_code_name(code),
            ember_status_message(status));
  ember_status_free(status);
  return error;
}

// False for a ScalarType the engine has no dtype for.
bool dtype_from_scalar_type(ScalarType type, ember_dtype* out_dtype) {
  switch (type) {
    case ScalarType::Float:
      *out_dtype = EMBER_DTYPE_FLOAT32;
      return true;
    case ScalarType::Half:
      *out_dtype = EMBER_DTYPE_FLOAT16;
      return true;
    case ScalarType::BFloat16:
      *out_dtype = EMBER_DTYPE_BFLOAT16;
      return true;
    case ScalarType::Long:
      *out_dtype = EMBER_DTYPE_INT64;
      return true;
    case ScalarType::Int:
      *out_dtype = EMBER_DTYPE_INT32;
      return true;
    case ScalarType::Bool:
      *out_dtype = EMBER_DTYPE_BOOL;
      return true;
    default:
      return false;
  }
}

const char* scalar_type_name(ScalarType type) {
  return executorch::runtime::toString(type);
}

// Compile spec values are byte strings, not NUL-terminated.
bool spec_value_equals(const void* value, size_t nbytes, const char* expected) {
  const size_t length = std::strlen(expected);
  return value != nullptr && nbytes == length && std::memcmp(value, expected, length) == 0;
}

bool executor_from_spec(const void* value, size_t nbytes, ember_executor_kind* out_kind) {
  if (spec_value_equals(value, nbytes, "auto")) {
    *out_kind = EMBER_EXECUTOR_AUTO;
  } else if (spec_value_equals(value, nbytes, "cpu")) {
    *out_kind = EMBER_EXECUTOR_CPU;
  } else if (spec_value_equals(value, nbytes, "cuda")) {
    *out_kind = EMBER_EXECUTOR_CUDA;
  } else {
    return false;
  }
  return true;
}

// ---- the handle ---------------------------------------------------------------------

// One initialized delegate call site: the engine program plus what execute needs, all
// sized in init so execute allocates nothing. Lives in the method's runtime allocator
// (or the heap when there is none) and is torn down by destroy().
struct EmberHandle {
  ember_program* program = nullptr;
  ember_executor_kind executor = EMBER_EXECUTOR_AUTO;
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  // num_inputs + num_outputs entries each, inputs first (the order of execute's args).
  // infos: the plan's I/O table (the largest shapes of a plan with dynamic dims).
  ember_tensor_info* infos = nullptr;
  // num_outputs entries: each output's shape for the current execute.
  ember_tensor_info* resolved = nullptr;
  ember_tensor_binding* bindings = nullptr;
  int64_t* dims = nullptr;  // EMBER_MAX_RANK per binding
  // An ExecuTorch Method is not reentrant, so two executes on one handle at once are a
  // caller bug; they share the scratch arrays above, so one of them is refused.
  std::atomic<bool> busy{false};
  bool heap_allocated = false;
  // The program's counters as last added to the process-wide ones (record_copies).
  ember_program_stats recorded{};
};

// Adds what the handle's program did since the last call to the process-wide counters
// that get_option reports (see "counters and device allocator" below).
void record_copies(EmberHandle& handle);

// Space for a handle and its arrays in one block, carved with checked arithmetic.
struct HandleLayout {
  size_t infos_offset;
  size_t resolved_offset;
  size_t bindings_offset;
  size_t dims_offset;
  size_t total;
};

bool add_array(size_t* cursor, size_t count, size_t element_size, size_t alignment,
               size_t* out_offset) {
  size_t offset = *cursor;
  const size_t misalignment = offset % alignment;
  if (misalignment != 0 && __builtin_add_overflow(offset, alignment - misalignment, &offset)) {
    return false;
  }
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, element_size, &bytes) ||
      __builtin_add_overflow(offset, bytes, cursor)) {
    return false;
  }
  *out_offset = offset;
  return true;
}

bool compute_handle_layout(size_t num_tensors, size_t num_outputs, HandleLayout* out_layout) {
  size_t cursor = sizeof(EmberHandle);
  size_t dims_count = 0;
  if (__builtin_mul_overflow(num_tensors, static_cast<size_t>(EMBER_MAX_RANK), &dims_count)) {
    return false;
  }
  if (!add_array(&cursor, num_tensors, sizeof(ember_tensor_info), alignof(ember_tensor_info),
                 &out_layout->infos_offset) ||
      !add_array(&cursor, num_outputs, sizeof(ember_tensor_info), alignof(ember_tensor_info),
                 &out_layout->resolved_offset) ||
      !add_array(&cursor, num_tensors, sizeof(ember_tensor_binding),
                 alignof(ember_tensor_binding), &out_layout->bindings_offset) ||
      !add_array(&cursor, dims_count, sizeof(int64_t), alignof(int64_t),
                 &out_layout->dims_offset)) {
    return false;
  }
  out_layout->total = cursor;
  return true;
}

constexpr size_t kHandleAlignment = alignof(EmberHandle) > alignof(ember_tensor_info)
                                        ? alignof(EmberHandle)
                                        : alignof(ember_tensor_info);

// Creates the handle around `program`, which it takes over (destroyed on failure too).
Result<EmberHandle*> create_handle(MemoryAllocator* allocator, ember_program* program) {
  const size_t num_inputs = ember_program_input_count(program);
  const size_t num_outputs = ember_program_output_count(program);
  size_t num_tensors = 0;
  HandleLayout layout{};
  if (__builtin_add_overflow(num_inputs, num_outputs, &num_tensors) ||
      !compute_handle_layout(num_tensors, num_outputs, &layout)) {
    log_error("%s: init failed: the plan's I/O counts (%zu inputs, %zu outputs) overflow",
              kBackendName, num_inputs, num_outputs);
    ember_program_destroy(program);
    return Error::InvalidProgram;
  }

  void* memory = nullptr;
  bool heap_allocated = false;
  if (allocator != nullptr) {
    memory = allocator->allocate(layout.total, kHandleAlignment);
  } else {
    memory = ::operator new(layout.total, std::nothrow);
    heap_allocated = true;
  }
  if (memory == nullptr) {
    log_error("%s: init failed: could not allocate %zu bytes for the delegate handle",
              kBackendName, layout.total);
    ember_program_destroy(program);
    return Error::MemoryAllocationFailed;
  }

  auto* bytes = static_cast<unsigned char*>(memory);
  auto* handle = new (memory) EmberHandle();
  handle->program = program;
  handle->executor = ember_program_executor(program);
  handle->num_inputs = num_inputs;
  handle->num_outputs = num_outputs;
  handle->infos = reinterpret_cast<ember_tensor_info*>(bytes + layout.infos_offset);
  handle->resolved = reinterpret_cast<ember_tensor_info*>(bytes + layout.resolved_offset);
  handle->bindings = reinterpret_cast<ember_tensor_binding*>(bytes + layout.bindings_offset);
  handle->dims = reinterpret_cast<int64_t*>(bytes + layout.dims_offset);
  handle->heap_allocated = heap_allocated;

  for (size_t i = 0; i < num_tensors; ++i) {
    const bool is_input = i < num_inputs;
    const size_t index = is_input ? i : i - num_inputs;
    ember_status* status = is_input ? ember_program_input_info(program, index, &handle->infos[i])
                                    : ember_program_output_info(program, index, &handle->infos[i]);
    if (status != nullptr) {
      const Error error = consume_status(status, "init (reading the plan's I/O table)");
      ember_program_destroy(program);
      handle->~EmberHandle();
      if (heap_allocated) {
        ::operator delete(memory);
      }
      return error;
    }
    handle->bindings[i] = ember_tensor_binding{nullptr, 0, handle->infos[i].dtype,
                                               handle->infos[i].rank,
                                               handle->dims + i * EMBER_MAX_RANK};
  }
  return handle;
}

void destroy_handle(EmberHandle* handle) {
  ember_program_destroy(handle->program);
  const bool heap_allocated = handle->heap_allocated;
  handle->~EmberHandle();
  if (heap_allocated) {
    ::operator delete(static_cast<void*>(handle));
  }
  // Otherwise the memory belongs to the method's runtime allocator and goes with it.
}

// ---- argument checks ----------------------------------------------------------------

// Describes argument `i` of execute for messages: "input 0" or "output 1".
struct ArgName {
  const char* kind;
  size_t index;
};

ArgName arg_name(const EmberHandle& handle, size_t i) {
  return i < handle.num_inputs ? ArgName{"input", i} : ArgName{"output", i - handle.num_inputs};
}

// Formats dims as "2, 3" into `out` (no allocation), for messages.
void format_dims(const int64_t* dims, size_t rank, char* out, size_t size) {
  size_t length = 0;
  out[0] = '\0';
  for (size_t d = 0; d < rank && length < size; ++d) {
    const int n = std::snprintf(out + length, size - length, "%s%lld", d == 0 ? "" : ", ",
                                static_cast<long long>(dims[d]));
    length = n > 0 ? length + static_cast<size_t>(n) : length;
  }
}

// Checks one tensor's kind, dtype, rank, layout and device against the plan's I/O entry
// and fills its binding with the tensor's memory and its actual dims. For an output,
// `want` holds the dims this run produces (ember_program_resolve_outputs): an output whose
// shape differs (a dynamic-bound output at its upper bound or its last shape) is resized
// to it first. Input dims are checked by the engine (bounds of dynamic dims included).
Error bind_argument(EmberHandle& handle, size_t i, EValue* value, const ember_tensor_info* want) {
  const ArgName name = arg_name(handle, i);
  const ember_tensor_info& info = handle.infos[i];
  if (value == nullptr || !value->isTensor()) {
    log_error("%s: %s %zu ('%s') is not a tensor (EValue tag %u)", kBackendName, name.kind,
              name.index, info.name,
              value == nullptr ? 0u : static_cast<unsigned>(value->tag));
    return Error::InvalidArgument;
  }
  Tensor& tensor = value->toTensor();

  ember_dtype dtype{};
  if (!dtype_from_scalar_type(tensor.scalar_type(), &dtype)) {
    log_error("%s: %s %zu ('%s') has dtype %s, which Ember does not support", kBackendName,
              name.kind, name.index, info.name, scalar_type_name(tensor.scalar_type()));
    return Error::InvalidArgument;
  }
  if (dtype != info.dtype) {
    log_error("%s: %s %zu ('%s') has dtype %s; the plan expects %s", kBackendName, name.kind,
              name.index, info.name, scalar_type_name(tensor.scalar_type()),
              ember_dtype_name(info.dtype));
    return Error::InvalidArgument;
  }

  const size_t rank = static_cast<size_t>(tensor.dim());
  if (rank != info.rank) {
    log_error("%s: %s %zu ('%s') has rank %zu; the plan expects rank %u", kBackendName,
              name.kind, name.index, info.name, rank, static_cast<unsigned>(info.rank));
    return Error::InvalidArgument;
  }

  if (want != nullptr) {
    // sizes()[d] rather than size(d): the latter carries an ET_CHECK (abort) path.
    bool sizes_match = true;
    for (size_t d = 0; d < rank; ++d) {
      sizes_match = sizes_match && static_cast<int64_t>(tensor.sizes()[d]) == want->dims[d];
    }
    if (!sizes_match) {
      SizesType new_sizes[EMBER_MAX_RANK] = {};
      bool representable = true;
      for (size_t d = 0; d < rank; ++d) {
        new_sizes[d] = static_cast<SizesType>(want->dims[d]);
        representable = representable && static_cast<int64_t>(new_sizes[d]) == want->dims[d];
      }
      sizes_match = representable &&
                    executorch::runtime::resize_tensor(
                        tensor, ArrayRef<SizesType>(new_sizes, rank)) == Error::Ok;
    }
    if (!sizes_match) {
      int64_t actual_dims[EMBER_MAX_RANK] = {};
      for (size_t d = 0; d < rank; ++d) actual_dims[d] = tensor.sizes()[d];
      char actual[8 * 24], expected[8 * 24];
      format_dims(actual_dims, rank, actual, sizeof actual);
      format_dims(want->dims, rank, expected, sizeof expected);
      log_error(
          "%s: output %zu ('%s') has shape [%s]; this run produces [%s] and the output "
          "could not be resized to it (is its memory planned for the largest shape?)",
          kBackendName, name.index, info.name, actual, expected);
      return Error::InvalidArgument;
    }
  }

  // The plan is dense and row-major; a permuted dim order would be read wrongly.
  const auto dim_order = tensor.dim_order();
  for (size_t d = 0; d < dim_order.size(); ++d) {
    if (static_cast<size_t>(dim_order[d]) != d) {
      log_error(
          "%s: %s %zu ('%s') is not contiguous (dim order is permuted, e.g. channels-last); "
          "Ember plans take dense row-major tensors",
          kBackendName, name.kind, name.index, info.name);
      return Error::InvalidArgument;
    }
  }

  // Device memory goes to the engine as it is (contract 6); only the CUDA executor can
  // read it, and the CPU executor would crash on it.
  if (tensor.device_type() != executorch::aten::DeviceType::CPU &&
      handle.executor != EMBER_EXECUTOR_CUDA) {
    log_error(
        "%s: %s %zu ('%s') is in device memory, but this program runs on the %s executor, "
        "which reads host memory only",
        kBackendName, name.kind, name.index, info.name,
        ember_executor_kind_name(handle.executor));
    return Error::InvalidArgument;
  }

  void* data = tensor.mutable_data_ptr();
  const size_t nbytes = tensor.nbytes();
  if (data == nullptr && nbytes != 0) {
    log_error("%s: %s %zu ('%s') has no data: %s", kBackendName, name.kind, name.index,
              info.name,
              i < handle.num_inputs
                  ? "set the method's inputs before executing it"
                  : "the program leaves its outputs unplanned (MemoryPlanningPass("
                    "alloc_graph_output=False)), so bind one before executing "
                    "(Module::set_output, Method::set_output_data_ptr)");
    return Error::InvalidArgument;
  }

  ember_tensor_binding& binding = handle.bindings[i];
  int64_t* dims = handle.dims + i * EMBER_MAX_RANK;
  for (size_t d = 0; d < rank; ++d) {
    dims[d] = static_cast<int64_t>(tensor.sizes()[d]);
  }
  binding.data = data;
  binding.nbytes = nbytes;
  binding.dtype = dtype;
  binding.rank = static_cast<uint32_t>(rank);
  binding.dims = dims;
  return Error::Ok;
}

// ---- counters and device allocator ---------------------------------------------------
//
// Two things a device-resident deployment needs from Ember besides the backend
// (docs/device-resident.md):
//
// 1. Counters a test can assert on, through ExecuTorch's own API: get_option("EmberBackend",
//    ...) fills the keys below with decimal strings (BackendOption holds only 32-bit ints):
//      ember.runs, ember.bytes_host_to_device, ember.bytes_device_to_host
//          every Ember delegate of the process, summed: its executes, and the bytes its
//          engine copied to stage inputs and outputs bound in host memory (0 when they are
//          bound in device memory);
//      device_allocator
//          who serves ExecuTorch's CUDA DeviceAllocator slot: "ember", "other" (one was
//          registered before Ember's library loaded), "skipped"
//          (EMBER_SKIP_DEVICE_ALLOCATOR_REGISTRATION=1), "none" (a build without CUDA);
//      device_allocator.{allocations,frees,bytes_allocated,copies_host_to_device,
//          copies_device_to_host,bytes_host_to_device,bytes_device_to_host}
//          what ExecuTorch asked of Ember's allocator (planned device buffers, and the
//          et_copy::_h2d_copy / _d2h_copy boundary operators).
//    Keys it does not know are left as they are.
//
// 2. ExecuTorch's CUDA DeviceAllocator. The pinned executorch wheel ships no CUDA backend,
//    so nothing else registers one, and a program whose memory plan puts buffers on the
//    GPU (or that holds et_copy operators) cannot load without it. Ember registers its own,
//    on the engine's ember_device_* functions, from the static initializer and only when
//    the slot is empty: a second registration aborts the process. It never aborts: every
//    failure is an Error with a logged line (log_error).

std::atomic<uint64_t> g_runs{0};
std::atomic<uint64_t> g_bytes_host_to_device{0};
std::atomic<uint64_t> g_bytes_device_to_host{0};
// What the registration found; a string literal, set once at load.
const char* g_device_allocator_state = "none";

void record_copies(EmberHandle& handle) {
  ember_program_stats now{};
  ember_program_get_stats(handle.program, &now);
  g_runs.fetch_add(now.runs - handle.recorded.runs, std::memory_order_relaxed);
  g_bytes_host_to_device.fetch_add(
      now.bytes_host_to_device - handle.recorded.bytes_host_to_device, std::memory_order_relaxed);
  g_bytes_device_to_host.fetch_add(
      now.bytes_device_to_host - handle.recorded.bytes_device_to_host, std::memory_order_relaxed);
  handle.recorded = now;
}

void set_string_option(BackendOption& option, const char* text) {
  std::array<char, executorch::runtime::kMaxOptionValueLength> value{};
  std::snprintf(value.data(), value.size(), "%s", text);
  option.value = value;
}

void set_counter_option(BackendOption& option, uint64_t counter) {
  char text[32];
  std::snprintf(text, sizeof(text), "%" PRIu64, counter);
  set_string_option(option, text);
}

void fill_counter_options(Span<BackendOption>& options) {
  ember_device_memory_stats memory{};
  ember_device_memory_get_stats(&memory);
  const struct {
    const char* key;
    uint64_t value;
  } counters[] = {
      {"ember.runs", g_runs.load(std::memory_order_relaxed)},
      {"ember.bytes_host_to_device", g_bytes_host_to_device.load(std::memory_order_relaxed)},
      {"ember.bytes_device_to_host", g_bytes_device_to_host.load(std::memory_order_relaxed)},
      {"device_allocator.allocations", memory.allocations},
      {"device_allocator.frees", memory.frees},
      {"device_allocator.bytes_allocated", memory.bytes_allocated},
      {"device_allocator.copies_host_to_device", memory.copies_host_to_device},
      {"device_allocator.copies_device_to_host", memory.copies_device_to_host},
      {"device_allocator.bytes_host_to_device", memory.bytes_host_to_device},
      {"device_allocator.bytes_device_to_host", memory.bytes_device_to_host},
  };
  for (size_t i = 0; i < options.size(); ++i) {
    BackendOption& option = options[i];
    if (std::strcmp(option.key, "device_allocator") == 0) {
      set_string_option(option, g_device_allocator_state);
      continue;
    }
    for (const auto& counter : counters) {
      if (std::strcmp(option.key, counter.key) == 0) {
        set_counter_option(option, counter.value);
        break;
      }
    }
  }
}

using executorch::runtime::DeviceAllocator;
using executorch::runtime::etensor::DeviceIndex;
using executorch::runtime::etensor::DeviceType;

// Logs an allocator failure and returns its ExecuTorch error.
Error allocator_error(ember_status* status, const char* what) {
  const ember_status_code code = ember_status_code_of(status);
  const Error error = error_from_status_code(code);
  log_error("%s: CUDA device allocator: %s failed (%s): %s", kBackendName, what,
            ember_status_code_name(code), ember_status_message(status));
  ember_status_free(status);
  return error;
}

class EmberCudaAllocator final : public DeviceAllocator {
 public:
  Result<void*> allocate(size_t nbytes, DeviceIndex index, size_t alignment) override {
    void* pointer = nullptr;
    ember_status* status =
        ember_device_allocate(static_cast<int>(index), nbytes, alignment, &pointer);
    if (status != nullptr) {
      return allocator_error(status, "allocate");
    }
    return pointer;
  }

  void deallocate(void* ptr, DeviceIndex index) override {
    ember_status* status = ember_device_free(static_cast<int>(index), ptr);
    if (status != nullptr) {
      (void)allocator_error(status, "deallocate");
    }
  }

  Error copy_host_to_device(void* dst, const void* src, size_t nbytes,
                            DeviceIndex index) override {
    ember_status* status =
        ember_device_copy_host_to_device(static_cast<int>(index), dst, src, nbytes);
    return status == nullptr ? Error::Ok : allocator_error(status, "copy_host_to_device");
  }

  Error copy_device_to_host(void* dst, const void* src, size_t nbytes,
                            DeviceIndex index) override {
    ember_status* status =
        ember_device_copy_device_to_host(static_cast<int>(index), dst, src, nbytes);
    return status == nullptr ? Error::Ok : allocator_error(status, "copy_device_to_host");
  }

  DeviceType device_type() const override {
    return DeviceType::CUDA;
  }
};

// Static storage, never destroyed: ExecuTorch keeps the pointer for the process's life,
// and device buffers released during teardown still call deallocate.
alignas(EmberCudaAllocator) unsigned char g_allocator_storage[sizeof(EmberCudaAllocator)];

// Registers Ember's CUDA allocator when the slot is empty. Touches no driver: loading the
// library stays cheap, and a machine without a GPU gets its errors on first use.
const char* register_ember_device_allocator() {
#if !defined(EMBER_DELEGATE_CUDA) || !EMBER_DELEGATE_CUDA
  return "none";  // A build without CUDA has no device memory to offer.
#else
  const char* skip = std::getenv("EMBER_SKIP_DEVICE_ALLOCATOR_REGISTRATION");
  if (skip != nullptr && std::strcmp(skip, "1") == 0) {
    return "skipped";
  }
  if (executorch::runtime::get_device_allocator(DeviceType::CUDA) != nullptr) {
    // Someone (ExecuTorch's own CUDA backend, say) came first: theirs serves, and a
    // second registration would abort.
    return "other";
  }
  DeviceAllocator* allocator = new (g_allocator_storage) EmberCudaAllocator();
  executorch::runtime::register_device_allocator(allocator);
  return "ember";
#endif
}

// ---- the backend --------------------------------------------------------------------

class EmberBackend final : public BackendInterface {
 public:
  ~EmberBackend() override = default;

  bool is_available() const override {
    // The CPU reference executor is always there; a missing GPU is reported by init
    // when a program asks for CUDA.
    return true;
  }

  Result<DelegateHandle*> init(BackendInitContext& context, FreeableBuffer* processed,
                               ArrayRef<CompileSpec> compile_specs) const override {
    ember_program_options options;
    ember_program_options_initialize(&options);

    for (size_t i = 0; i < compile_specs.size(); ++i) {
      const CompileSpec& spec = compile_specs[i];
      if (spec.key == nullptr || std::strcmp(spec.key, kExecutorKey) != 0) {
        continue;  // Keys this runtime does not know are left for newer ones.
      }
      if (!executor_from_spec(spec.value.buffer, spec.value.nbytes, &options.executor)) {
        log_error(
            "%s: init failed: compile spec '%s' has value '%.*s'; expected auto, cpu or cuda",
            kBackendName, kExecutorKey,
            static_cast<int>(spec.value.nbytes < 64 ? spec.value.nbytes : 64),
            spec.value.buffer == nullptr ? "" : static_cast<const char*>(spec.value.buffer));
        return Error::InvalidArgument;
      }
    }
    // A load-time option overrides what the program was exported with.
    const Result<const char*> runtime_executor =
        context.get_runtime_spec<const char*>(kExecutorKey);
    if (runtime_executor.ok()) {
      const char* value = runtime_executor.get();
      if (!executor_from_spec(value, std::strlen(value), &options.executor)) {
        log_error("%s: init failed: runtime spec '%s' is '%s'; expected auto, cpu or cuda",
                  kBackendName, kExecutorKey, value);
        return Error::InvalidArgument;
      }
    } else if (runtime_executor.error() != Error::NotFound) {
      log_error("%s: init failed: runtime spec '%s' must be a string", kBackendName,
                kExecutorKey);
      return Error::InvalidArgument;
    }

    // data_safe(), not data(): the latter aborts on a buffer backed by a uint64_t address.
    const Result<const void*> plan =
        processed == nullptr ? Result<const void*>(Error::InvalidProgram) : processed->data_safe();
    if (!plan.ok() || plan.get() == nullptr) {
      log_error("%s: init failed: the program carries no plan for this delegate",
                kBackendName);
      return Error::InvalidProgram;
    }

    ember_program* program = nullptr;
    ember_status* status = ember_program_create(plan.get(), processed->size(), &options, &program);
    // The engine keeps no pointer into the plan, so its bytes can go now either way.
    processed->Free();
    if (status != nullptr) {
      return consume_status(status, "init");
    }
    if (program == nullptr) {
      log_error("%s: init failed: the engine reported success but returned no program",
                kBackendName);
      return Error::Internal;
    }

    Result<EmberHandle*> handle = create_handle(context.get_runtime_allocator(), program);
    if (!handle.ok()) {
      return handle.error();
    }
    return static_cast<DelegateHandle*>(handle.get());
  }

  Error execute(BackendExecutionContext& /*context*/, DelegateHandle* raw_handle,
                Span<EValue*> args) const override {
    if (raw_handle == nullptr) {
      log_error("%s: execute called with a null handle", kBackendName);
      return Error::DelegateInvalidHandle;
    }
    EmberHandle& handle = *static_cast<EmberHandle*>(raw_handle);
    const size_t expected = handle.num_inputs + handle.num_outputs;
    if (args.size() != expected) {
      log_error(
          "%s: execute got %zu arguments; the plan takes %zu inputs and %zu outputs (%zu)",
          kBackendName, args.size(), handle.num_inputs, handle.num_outputs, expected);
      return Error::InvalidArgument;
    }

    bool was_busy = false;
    if (!handle.busy.compare_exchange_strong(was_busy, true, std::memory_order_acquire)) {
      log_error(
          "%s: execute called again on a method that is still executing; ExecuTorch "
          "methods are not reentrant",
          kBackendName);
      return Error::InvalidState;
    }

    // Inputs first; the engine checks their dims (a dynamic dim within its bounds) and says
    // what shapes this run's outputs have; the outputs are then bound at those shapes.
    Error error = Error::Ok;
    for (size_t i = 0; i < handle.num_inputs && error == Error::Ok; ++i) {
      error = bind_argument(handle, i, args[i], nullptr);
    }
    if (error == Error::Ok) {
      ember_status* status = ember_program_resolve_outputs(
          handle.program, handle.bindings, handle.num_inputs, handle.resolved,
          handle.num_outputs);
      if (status != nullptr) {
        error = consume_status(status, "execute");
      }
    }
    for (size_t o = 0; o < handle.num_outputs && error == Error::Ok; ++o) {
      error = bind_argument(handle, handle.num_inputs + o, args[handle.num_inputs + o],
                            &handle.resolved[o]);
    }
    if (error == Error::Ok) {
      ember_status* status =
          ember_program_run(handle.program, handle.bindings, handle.num_inputs,
                            handle.bindings + handle.num_inputs, handle.num_outputs);
      if (status != nullptr) {
        error = consume_status(status, "execute");
      } else {
        record_copies(handle);
      }
    }
    handle.busy.store(false, std::memory_order_release);
    return error;
  }

  void destroy(DelegateHandle* raw_handle) const override {
    if (raw_handle != nullptr) {
      destroy_handle(static_cast<EmberHandle*>(raw_handle));
    }
  }

  Error get_option(BackendOptionContext& /*context*/,
                   Span<BackendOption>& backend_options) override {
    fill_counter_options(backend_options);
    return Error::Ok;
  }
};

// ---- registration -------------------------------------------------------------------

// The backend object is built in static storage and never destroyed: the registry keeps a
// pointer to it, and a program released during process teardown (after this library's
// static destructors would have run) must still find a live object.
alignas(EmberBackend) unsigned char g_backend_storage[sizeof(EmberBackend)];

Error register_ember_backend() {
  BackendInterface* backend = new (g_backend_storage) EmberBackend();
  const Error error = executorch::runtime::register_backend(Backend{kBackendName, backend});
  if (error != Error::Ok) {
    log_error("%s: registration with ExecuTorch failed: error 0x%x (%s)", kBackendName,
              static_cast<unsigned>(error), executorch::runtime::to_string(error));
  }
  return error;
}

// Runs when the library is loaded (dlopen from Python, or as a DT_NEEDED of a C++ app).
[[maybe_unused]] const Error g_registration = register_ember_backend();

// After the backend: ExecuTorch's CUDA device allocator, when no one has registered one
// (see "counters and device allocator" above).
[[maybe_unused]] const bool g_device_allocator_registration =
    (g_device_allocator_state = register_ember_device_allocator(), true);

}  // namespace
