/* ember_program_*: create (verify, copy, prepare), bindings checks, run, destroy. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "program_internal.h"
#include "settings.h"
#include "shape_text.h"

#define EMBER_VERSION_STRING "0.1.0"

const char* ember_version_string(void) { return EMBER_VERSION_STRING; }

const char* ember_executor_kind_name(ember_executor_kind kind) {
  switch (kind) {
    case EMBER_EXECUTOR_AUTO: return "auto";
    case EMBER_EXECUTOR_CPU: return "cpu";
    case EMBER_EXECUTOR_CUDA: return "cuda";
  }
  return "unknown";
}

void ember_program_options_initialize(ember_program_options* out_options) {
  if (out_options == NULL) return;
  memset(out_options, 0, sizeof *out_options);
  out_options->executor = EMBER_EXECUTOR_AUTO;
}

/* The one place that decides which executor kind a program asks for: the options, unless
 * the environment (EMBER_EXECUTOR, read once in settings.c) forces one. */
static ember_status* select_executor(ember_executor_kind kind, ember_executor_kind* out_kind) {
  *out_kind = kind;
  if (kind != EMBER_EXECUTOR_AUTO && kind != EMBER_EXECUTOR_CPU && kind != EMBER_EXECUTOR_CUDA) {
    return ember_status_make(EMBER_INVALID_ARGUMENT,
                             "ember_program_create: options->executor %d is not an "
                             "ember_executor_kind (0 auto, 1 cpu, 2 cuda)",
                             (int)kind);
  }
  const ember_settings* settings = ember_settings_get();
  if (settings->invalid_message[0] != '\0') {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_create: %s",
                             settings->invalid_message);
  }
  if (settings->executor_forced) *out_kind = settings->executor;
#if !defined(EMBER_HAVE_CUDA)
  if (*out_kind == EMBER_EXECUTOR_CUDA) {
    return ember_status_make(EMBER_UNAVAILABLE,
                             "ember_program_create: the CUDA executor was requested, but "
                             "this engine was built without CUDA; use EMBER_EXECUTOR_CPU "
                             "or EMBER_EXECUTOR_AUTO");
  }
#endif
  return NULL;
}

static ember_status* keep_fallback_reason(ember_program* program, const char* reason) {
  const size_t length = strlen(reason);
  program->fallback_reason = malloc(length + 1);
  if (program->fallback_reason == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "ember_program_create: out of memory");
  }
  memcpy(program->fallback_reason, reason, length + 1);
  return NULL;
}

/* Prepares the executor of `kind`. AUTO tries CUDA first (in a CUDA build) and takes an
 * EMBER_UNAVAILABLE from it as "use the CPU", keeping the reason; any other error, or
 * any error when CUDA was asked for, is returned. The CUDA executor reads the constants
 * from the caller's bytes into device memory and needs no host copy afterwards (57 MB,
 * the encoder's weights, copied into a new allocation took 32-52 ms on a 2-core VM, most
 * of it the new pages' faults); the CPU executor runs on a copy of its own. */
static ember_status* prepare_executor(ember_program* program, ember_executor_kind kind) {
#if defined(EMBER_HAVE_CUDA)
  if (kind != EMBER_EXECUTOR_CPU) {
    ember_status* status = ember_cuda_executor_vtable.prepare(&program->plan, &program->executor);
    if (status == NULL) {
      ember_plan_forget_lent_constants(&program->plan);
      return NULL;
    }
    if (kind == EMBER_EXECUTOR_CUDA || ember_status_code_of(status) != EMBER_UNAVAILABLE) {
      ember_status* annotated =
          ember_status_make(ember_status_code_of(status), "ember_program_create: CUDA "
                            "executor: %s", ember_status_message(status));
      ember_status_free(status);
      return annotated;
    }
    ember_status* kept = keep_fallback_reason(program, ember_status_message(status));
    ember_status_free(status);
    EMBER_RETURN_IF_ERROR(kept);
  }
#else
  if (kind == EMBER_EXECUTOR_AUTO) {
    EMBER_RETURN_IF_ERROR(keep_fallback_reason(
        program, "this engine was built without CUDA (EMBER_CUDA=OFF)"));
  }
#endif
  EMBER_RETURN_IF_ERROR(ember_plan_own_constants(&program->plan));
  return ember_cpu_executor_vtable.prepare(&program->plan, &program->executor);
}

void ember_program_destroy(ember_program* program) {
  if (program == NULL) return;
  /* A run that already holds the mutex finishes first (the executor's destroy waits for
   * device work; this waits for the host side). */
  pthread_mutex_lock(&program->run_mutex);
  pthread_mutex_unlock(&program->run_mutex);
  if (program->executor != NULL) program->executor->vtable->destroy(program->executor);
  pthread_mutex_destroy(&program->run_mutex);
  free(program->fallback_reason);
  ember_plan_deinitialize(&program->plan);
  free(program);
}

ember_status* ember_program_create(const void* plan, size_t plan_size,
                                   const ember_program_options* options,
                                   ember_program** out_program) {
  if (out_program == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_create: out_program is "
                             "NULL");
  }
  *out_program = NULL;
  if (plan == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_create: plan is NULL");
  }
  ember_program_options defaults;
  ember_program_options_initialize(&defaults);
  if (options == NULL) options = &defaults;
  ember_executor_kind kind;
  EMBER_RETURN_IF_ERROR(select_executor(options->executor, &kind));

  ember_program* program = calloc(1, sizeof *program);
  if (program == NULL) {
    return ember_status_make(EMBER_OUT_OF_MEMORY, "ember_program_create: out of memory");
  }
  if (pthread_mutex_init(&program->run_mutex, NULL) != 0) {
    free(program);
    return ember_status_make(EMBER_INTERNAL, "ember_program_create: pthread_mutex_init "
                             "failed");
  }
  ember_status* status = ember_plan_read(plan, plan_size, &program->plan);
  if (status == NULL) status = ember_plan_verify_meaning(&program->plan);
  if (status == NULL) status = prepare_executor(program, kind);
  if (status != NULL) {
    ember_program_destroy(program);
    return status;
  }
  *out_program = program;
  return NULL;
}

ember_executor_kind ember_program_executor(const ember_program* program) {
  return program == NULL || program->executor == NULL ? EMBER_EXECUTOR_AUTO
                                                      : program->executor->kind;
}

size_t ember_program_input_count(const ember_program* program) {
  return program == NULL ? 0 : program->plan.num_inputs;
}

size_t ember_program_output_count(const ember_program* program) {
  return program == NULL ? 0 : program->plan.num_outputs;
}

static ember_status* get_info(const ember_program* program, bool input, size_t index,
                              ember_tensor_info* out_info) {
  const char* function = input ? "ember_program_input_info" : "ember_program_output_info";
  if (program == NULL || out_info == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: %s is NULL", function,
                             program == NULL ? "program" : "out_info");
  }
  const size_t count = input ? program->plan.num_inputs : program->plan.num_outputs;
  if (index >= count) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "%s: index %zu is out of range; the "
                             "program has %zu %s",
                             function, index, count, input ? "inputs" : "outputs");
  }
  const uint32_t t = input ? program->plan.inputs[index] : program->plan.outputs[index];
  const ember_tensor_desc* tensor = &program->plan.tensors[t];
  memset(out_info, 0, sizeof *out_info);
  out_info->name = tensor->name;
  out_info->dtype = tensor->dtype;
  out_info->rank = tensor->rank;
  memcpy(out_info->dims, tensor->dims, sizeof out_info->dims);
  out_info->nbytes = tensor->nbytes;
  return NULL;
}

ember_status* ember_program_input_info(const ember_program* program, size_t index,
                                       ember_tensor_info* out_info) {
  return get_info(program, true, index, out_info);
}

ember_status* ember_program_output_info(const ember_program* program, size_t index,
                                        ember_tensor_info* out_info) {
  return get_info(program, false, index, out_info);
}

/* Outputs are written while inputs and other outputs may still be read, so none of them
 * may share memory with any other binding. */
static ember_status* check_output_aliasing(const ember_program* program,
                                           const ember_tensor_binding* inputs,
                                           const ember_tensor_binding* outputs) {
  const ember_plan* plan = &program->plan;
  for (uint32_t o = 0; o < plan->num_outputs; ++o) {
    const uint64_t o_begin = (uint64_t)(uintptr_t)outputs[o].data;
    const uint64_t o_size = outputs[o].nbytes;
    for (uint32_t k = 0; k < plan->num_inputs + plan->num_outputs; ++k) {
      const bool is_input = k < plan->num_inputs;
      const uint32_t other = is_input ? k : k - plan->num_inputs;
      if (!is_input && other == o) continue;
      const ember_tensor_binding* b = is_input ? &inputs[other] : &outputs[other];
      if (ember_ranges_overlap(o_begin, o_size, (uint64_t)(uintptr_t)b->data, b->nbytes)) {
        const uint32_t t = is_input ? plan->inputs[other] : plan->outputs[other];
        return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_run: output %" PRIu32
                                 " ('%s') shares memory with %s %" PRIu32 " ('%s'); outputs "
                                 "must not overlap any other binding",
                                 o, plan->tensors[plan->outputs[o]].name,
                                 is_input ? "input" : "output", other, plan->tensors[t].name);
      }
    }
  }
  return NULL;
}

ember_status* ember_program_run(ember_program* program, const ember_tensor_binding* inputs,
                                size_t num_inputs, const ember_tensor_binding* outputs,
                                size_t num_outputs) {
  if (program == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_run: program is NULL");
  }
  const ember_plan* plan = &program->plan;
  if (num_inputs != plan->num_inputs || num_outputs != plan->num_outputs) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_run: %zu inputs and %zu "
                             "outputs passed, the plan takes %" PRIu32 " inputs and %" PRIu32
                             " outputs",
                             num_inputs, num_outputs, plan->num_inputs, plan->num_outputs);
  }
  if ((num_inputs > 0 && inputs == NULL) || outputs == NULL) {
    return ember_status_make(EMBER_INVALID_ARGUMENT, "ember_program_run: the %s array is NULL",
                             outputs == NULL ? "outputs" : "inputs");
  }
  /* Each binding against the plan: dtype, rank, dims (a dynamic dim within its bounds,
   * outputs with the dims these inputs give), nbytes, then data (plan_verifier.c). */
  int64_t symbols[EMBER_PLAN_MAX_SYMBOLS];
  EMBER_RETURN_IF_ERROR(ember_plan_bind_inputs(plan, "ember_program_run", inputs, symbols));
  EMBER_RETURN_IF_ERROR(ember_plan_check_outputs(plan, "ember_program_run", outputs, symbols));
  EMBER_RETURN_IF_ERROR(check_output_aliasing(program, inputs, outputs));

  if (pthread_mutex_lock(&program->run_mutex) != 0) {
    return ember_status_make(EMBER_INTERNAL, "ember_program_run: pthread_mutex_lock failed");
  }
  ember_status* status = program->executor->vtable->run(program->executor, inputs, outputs);
  if (status == NULL) ++program->runs;
  pthread_mutex_unlock(&program->run_mutex);
  return status;
}

void ember_program_get_stats(const ember_program* program, ember_program_stats* out_stats) {
  if (out_stats == NULL) return;
  memset(out_stats, 0, sizeof *out_stats);
  if (program == NULL) return;
  /* The counters change only under the run mutex; the mutex is not part of the
   * program's observable state, hence the cast. */
  ember_program* mutable_program = (ember_program*)(uintptr_t)program;
  pthread_mutex_lock(&mutable_program->run_mutex);
  out_stats->runs = program->runs;
  if (program->executor != NULL) {
    out_stats->bytes_host_to_device = program->executor->bytes_host_to_device;
    out_stats->bytes_device_to_host = program->executor->bytes_device_to_host;
  }
  pthread_mutex_unlock(&mutable_program->run_mutex);
}

const char* ember_program_fallback_reason(const ember_program* program) {
  return program == NULL ? NULL : program->fallback_reason;
}
