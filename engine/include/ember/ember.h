/* Ember engine: public C API.
 *
 * The engine runs a plan (docs/plan-format.md) on a CPU reference executor or, when
 * built with CUDA and a device is present, on the GPU. It knows nothing of ExecuTorch or
 * Python: the delegate in delegate/ is one client of this header, the C tests another.
 *
 * Ownership: what a `_create` function returns belongs to the caller and is released
 * with the matching `_destroy`/`_free`. Getters lend: pointers they return stay valid
 * for as long as the object they came from.
 *
 * Errors: every fallible function returns `ember_status*`. NULL means success; any other
 * value is an error the caller owns and releases with `ember_status_free`.
 */
#ifndef EMBER_EMBER_H_
#define EMBER_EMBER_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EMBER_ENGINE_BUILDING) && defined(__GNUC__)
#define EMBER_API __attribute__((visibility("default")))
#else
#define EMBER_API
#endif

/* The plan format version this engine reads. */
#define EMBER_PLAN_FORMAT_VERSION 1u
/* The largest tensor rank a plan may hold. */
#define EMBER_MAX_RANK 8u

/* ---- status ----------------------------------------------------------------------- */

typedef enum ember_status_code {
  EMBER_OK = 0,
  /* The caller passed something wrong: a NULL, a count, a dtype or a shape. */
  EMBER_INVALID_ARGUMENT = 1,
  /* The plan bytes are malformed. */
  EMBER_INVALID_PLAN = 2,
  /* The plan is of a format version this engine does not read. */
  EMBER_UNSUPPORTED_VERSION = 3,
  /* Host or device memory could not be allocated. */
  EMBER_OUT_OF_MEMORY = 4,
  /* The requested executor, device or library is not there. */
  EMBER_UNAVAILABLE = 5,
  /* A failure inside the engine or a library it calls (for example a CUDA error). */
  EMBER_INTERNAL = 6,
} ember_status_code;

typedef struct ember_status ember_status;

EMBER_API ember_status_code ember_status_code_of(const ember_status* status);
/* A NUL-terminated message naming the cause; "ok" for NULL. */
EMBER_API const char* ember_status_message(const ember_status* status);
EMBER_API void ember_status_free(ember_status* status);
/* "EMBER_OK", "EMBER_INVALID_PLAN", ...; "unknown" for a value that is not a code. */
EMBER_API const char* ember_status_code_name(ember_status_code code);

/* ---- types ------------------------------------------------------------------------ */

typedef enum ember_dtype {
  EMBER_DTYPE_FLOAT32 = 1,
  EMBER_DTYPE_FLOAT16 = 2,
  EMBER_DTYPE_BFLOAT16 = 3,
  EMBER_DTYPE_INT64 = 4,
  EMBER_DTYPE_INT32 = 5,
  EMBER_DTYPE_BOOL = 6,
} ember_dtype;

/* Size in bytes of one element; 0 for a code that is not a dtype. */
EMBER_API size_t ember_dtype_size(ember_dtype dtype);
/* "float32", "float16", ...; "unknown" for a code that is not a dtype. */
EMBER_API const char* ember_dtype_name(ember_dtype dtype);

/* The environment variable EMBER_EXECUTOR=cpu|cuda|auto, read once per process, forces
 * the executor of every program over ember_program_options.executor. */
typedef enum ember_executor_kind {
  /* CUDA when the engine was built with it and a device, its driver and cuBLASLt are
   * present, else CPU (ember_program_fallback_reason says why). */
  EMBER_EXECUTOR_AUTO = 0,
  EMBER_EXECUTOR_CPU = 1,
  EMBER_EXECUTOR_CUDA = 2,
} ember_executor_kind;

EMBER_API const char* ember_executor_kind_name(ember_executor_kind kind);

/* ---- device memory ----------------------------------------------------------------
 *
 * Plain CUDA device memory and synchronous host<->device copies, through the driver the
 * engine loads at run time (nothing is linked). For a host framework's device allocator:
 * the delegate registers ExecuTorch's CUDA DeviceAllocator on these functions when no
 * other is registered (docs/device-resident.md). Memory lives in the device's primary
 * context, the one the CUDA runtime and PyTorch use, so a pointer from here is valid
 * there and the other way round. Every function is thread-safe and none aborts.
 *
 * Without CUDA (a build without it, no driver, no device) each function returns
 * EMBER_UNAVAILABLE naming what is missing. A device index the driver does not know, or
 * a pointer that is not memory of that device, is EMBER_INVALID_ARGUMENT; a failed
 * allocation EMBER_OUT_OF_MEMORY. */

/* The number of CUDA devices the driver sees; 0 with an error when there is no CUDA. */
EMBER_API ember_status* ember_device_count(int* out_count);

/* Allocates `nbytes` on device `device_index` (0 bytes gives a small distinct block).
 * `alignment` is 0 (the driver's 256) or a power of two up to 256. */
EMBER_API ember_status* ember_device_allocate(int device_index, size_t nbytes, size_t alignment,
                                              void** out_ptr);
/* Frees what ember_device_allocate returned (or any cuMemAlloc'ed memory of that device).
 * NULL is a no-op. */
EMBER_API ember_status* ember_device_free(int device_index, void* ptr);

/* Copy `nbytes` between host memory and memory of device `device_index`; complete when
 * they return. 0 bytes is a no-op. */
EMBER_API ember_status* ember_device_copy_host_to_device(int device_index, void* dst_device,
                                                         const void* src_host, size_t nbytes);
EMBER_API ember_status* ember_device_copy_device_to_host(int device_index, void* dst_host,
                                                         const void* src_device, size_t nbytes);

/* Cumulative counters of the functions above, process-wide, successful calls only. These
 * are the host<->device copies a host framework made through Ember's allocator (for
 * ExecuTorch: its et_copy boundary operators); a program's own staging copies are in
 * ember_program_stats. */
typedef struct ember_device_memory_stats {
  uint64_t allocations;
  uint64_t frees;
  uint64_t bytes_allocated;
  uint64_t copies_host_to_device;
  uint64_t copies_device_to_host;
  uint64_t bytes_host_to_device;
  uint64_t bytes_device_to_host;
} ember_device_memory_stats;

EMBER_API void ember_device_memory_get_stats(ember_device_memory_stats* out_stats);

/* ---- plan verification ------------------------------------------------------------ */

/* Verifies a plan (structure, then meaning) without creating anything. */
EMBER_API ember_status* ember_plan_verify(const void* plan, size_t plan_size);

/* ---- program ---------------------------------------------------------------------- */

typedef struct ember_program_options {
  ember_executor_kind executor;
} ember_program_options;

/* Fills `out_options` with the defaults (executor AUTO). */
EMBER_API void ember_program_options_initialize(ember_program_options* out_options);

typedef struct ember_program ember_program;

/* Verifies `plan` and prepares it to run: allocates the arena and copies the constants.
 * The program keeps no pointer into `plan`; the caller may free it on return. On error
 * `*out_program` is NULL and nothing is leaked. `options` may be NULL for defaults.
 * Errors: EMBER_INVALID_PLAN / EMBER_UNSUPPORTED_VERSION as ember_plan_verify;
 * EMBER_UNAVAILABLE for an executor this build or machine lacks (EMBER_EXECUTOR_CUDA in
 * a build without CUDA); EMBER_OUT_OF_MEMORY when the arena or tables cannot be
 * allocated. */
EMBER_API ember_status* ember_program_create(const void* plan, size_t plan_size,
                                             const ember_program_options* options,
                                             ember_program** out_program);

/* Waits for work in flight and releases everything. NULL is a no-op. */
EMBER_API void ember_program_destroy(ember_program* program);

EMBER_API ember_executor_kind ember_program_executor(const ember_program* program);

typedef struct ember_tensor_info {
  const char* name; /* lent; valid while the program lives */
  ember_dtype dtype;
  uint32_t rank;
  int64_t dims[EMBER_MAX_RANK];
  size_t nbytes;
} ember_tensor_info;

EMBER_API size_t ember_program_input_count(const ember_program* program);
EMBER_API size_t ember_program_output_count(const ember_program* program);
EMBER_API ember_status* ember_program_input_info(const ember_program* program, size_t index,
                                                 ember_tensor_info* out_info);
EMBER_API ember_status* ember_program_output_info(const ember_program* program, size_t index,
                                                  ember_tensor_info* out_info);

/* One bound input or output: the caller's memory and what the caller says it holds. The
 * engine checks dtype, rank, dims and nbytes against the plan before touching `data`:
 * each must equal the plan's (nbytes exactly, not "at least"). `data` may be NULL only
 * for a tensor of 0 bytes. An output must not share memory with any other input or
 * output (inputs may share memory with each other). */
typedef struct ember_tensor_binding {
  void* data;
  size_t nbytes;
  ember_dtype dtype;
  uint32_t rank;
  const int64_t* dims;
} ember_tensor_binding;

/* Runs the plan once. Inputs are read, outputs written, in the I/O table's order. Calls
 * on one program are serialized; different programs may run concurrently. A binding that
 * does not match the plan gives EMBER_INVALID_ARGUMENT naming the input or output by
 * index and name, with what was passed and what the plan expects. `inputs` may be NULL
 * when the plan has no inputs. */
EMBER_API ember_status* ember_program_run(ember_program* program,
                                          const ember_tensor_binding* inputs, size_t num_inputs,
                                          const ember_tensor_binding* outputs, size_t num_outputs);

/* Cumulative counters of a program, since it was created. Bytes count the copies that
 * runs made between host and device memory to stage inputs and outputs bound in host
 * memory; a program whose inputs and outputs are bound in device memory copies nothing
 * (both stay 0), and the CPU executor never copies. Uploading constants at create is not
 * counted. */
typedef struct ember_program_stats {
  uint64_t runs; /* successful ember_program_run calls */
  uint64_t bytes_host_to_device;
  uint64_t bytes_device_to_host;
} ember_program_stats;

/* Fills `out_stats` (zeros for a NULL program). Safe to call while another thread runs
 * the program: it waits for that run to finish. */
EMBER_API void ember_program_get_stats(const ember_program* program,
                                       ember_program_stats* out_stats);

/* Why a program created with EMBER_EXECUTOR_AUTO runs on the CPU: the reason the CUDA
 * executor was unavailable (no driver, no device, no cuBLASLt, a build without CUDA).
 * NULL when the program runs on the executor that was asked for or forced. Lent: valid
 * while the program lives. */
EMBER_API const char* ember_program_fallback_reason(const ember_program* program);

/* The engine's version, "MAJOR.MINOR.PATCH". */
EMBER_API const char* ember_version_string(void);


/* ==== Dynamic shapes ==================================================================
 *
 * A plan may record dims that vary from run to run (docs/plan-format.md "Dynamic dims"):
 * such a dim is coefficient x s for a symbol s with bounds [min, max] (a dynamic batch,
 * or batch x sequence after a flatten). For such a plan:
 *
 * - ember_program_input_info and ember_program_output_info give the largest shapes (each
 *   dynamic dim at its symbol's max); memory is sized for them at create.
 * - ember_program_input_dim_bounds gives the bounds of each dim of an input.
 * - ember_program_run takes input bindings whose dynamic dims are within bounds (and
 *   consistent where two dims share a symbol), and output bindings with exactly the dims
 *   these inputs give (ember_program_resolve_outputs). A dim outside its bounds is
 *   EMBER_INVALID_ARGUMENT naming the input, the dim, the size passed and the bounds.
 *
 * For a plan without dynamic dims both functions report the plan's fixed shapes. */

/* The bounds of each dim of input `index`: out_min[d] and out_max[d] for d < the input's
 * rank (equal for a static dim). Both arrays must hold EMBER_MAX_RANK entries. */
EMBER_API ember_status* ember_program_input_dim_bounds(const ember_program* program,
                                                       size_t index, int64_t* out_min,
                                                       int64_t* out_max);

/* Checks `inputs` as ember_program_run checks them (dtype, rank, dims within bounds,
 * nbytes, data) and fills out_outputs[0..num_outputs) with each output's name, dtype,
 * rank, dims and nbytes for a run with these inputs. num_inputs and num_outputs must be
 * the program's counts. Reads no tensor data. */
EMBER_API ember_status* ember_program_resolve_outputs(const ember_program* program,
                                                      const ember_tensor_binding* inputs,
                                                      size_t num_inputs,
                                                      ember_tensor_info* out_outputs,
                                                      size_t num_outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* EMBER_EMBER_H_ */
