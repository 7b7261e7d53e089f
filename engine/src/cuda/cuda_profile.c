/* Per-step GPU time of profiled runs: see cuda_profile.h. */
#include "cuda_profile.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The steps the report lists one by one; the rest are summed per opcode only. */
#define EMBER_PROFILE_TOP_STEPS 25u

struct ember_cuda_profile {
  const ember_cuda_driver* driver;
  uint32_t num_steps;
  uint64_t runs;
  CUevent* events;    /* num_steps + 1 */
  double* step_ms;    /* per step, summed over runs */
};

ember_status* ember_cuda_profile_create(const ember_cuda_driver* driver, uint32_t num_steps,
                                        ember_cuda_profile** out_profile) {
  *out_profile = NULL;
  ember_cuda_profile* profile = calloc(1, sizeof *profile);
  if (profile == NULL) return ember_status_make(EMBER_OUT_OF_MEMORY, "profile: out of memory");
  profile->driver = driver;
  profile->num_steps = num_steps;
  profile->events = calloc((size_t)num_steps + 1, sizeof(CUevent));
  profile->step_ms = calloc(num_steps == 0 ? 1 : num_steps, sizeof(double));
  if (profile->events == NULL || profile->step_ms == NULL) {
    ember_cuda_profile_destroy(profile);
    return ember_status_make(EMBER_OUT_OF_MEMORY, "profile: out of memory");
  }
  for (uint32_t e = 0; e <= num_steps; ++e) {
    CUresult result = driver->cuEventCreate(&profile->events[e], CU_EVENT_DEFAULT);
    if (result != CUDA_SUCCESS) {
      profile->events[e] = NULL;
      ember_cuda_profile_destroy(profile);
      return ember_cuda_status(driver, result, "cuEventCreate(profile)");
    }
  }
  *out_profile = profile;
  return NULL;
}

ember_status* ember_cuda_profile_mark(ember_cuda_profile* profile, uint32_t mark,
                                      CUstream stream) {
  EMBER_CU_RETURN_IF_ERROR(profile->driver,
                           profile->driver->cuEventRecord(profile->events[mark], stream),
                           "cuEventRecord(profile)");
  return NULL;
}

ember_status* ember_cuda_profile_collect(ember_cuda_profile* profile) {
  for (uint32_t s = 0; s < profile->num_steps; ++s) {
    float ms = 0.0f;
    EMBER_CU_RETURN_IF_ERROR(
        profile->driver,
        profile->driver->cuEventElapsedTime(&ms, profile->events[s], profile->events[s + 1]),
        "cuEventElapsedTime(profile)");
    profile->step_ms[s] += ms;
  }
  ++profile->runs;
  return NULL;
}

typedef struct ranked_step {
  uint32_t step;
  double ms;
} ranked_step;

static int by_time_descending(const void* a, const void* b) {
  const double x = ((const ranked_step*)a)->ms, y = ((const ranked_step*)b)->ms;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* "[2, 64, 56, 56] float16" for an op's first output. */
static void describe_output(const ember_plan* plan, uint32_t op_index, char* text, size_t size) {
  const ember_op_desc* op = &plan->ops[op_index];
  text[0] = '\0';
  if (op->num_outputs == 0) return;
  const ember_tensor_desc* y = ember_plan_op_output_tensor(plan, op, 0);
  size_t used = (size_t)snprintf(text, size, "[");
  for (uint32_t d = 0; d < y->rank && used < size; ++d) {
    used += (size_t)snprintf(text + used, size - used, "%s%" PRId64, d ? ", " : "", y->dims[d]);
  }
  if (used < size) snprintf(text + used, size - used, "] %s", ember_dtype_name(y->dtype));
}

void ember_cuda_profile_report(const ember_cuda_profile* profile, const ember_plan* plan,
                               const ember_cuda_profile_step* steps, FILE* out) {
  if (profile == NULL || profile->runs == 0 || profile->num_steps == 0) return;
  const double runs = (double)profile->runs;
  ranked_step* ranked = malloc(profile->num_steps * sizeof *ranked);
  double per_opcode[(EMBER_OP_LAST + 1)] = {0};
  uint32_t opcode_steps[(EMBER_OP_LAST + 1)] = {0};
  if (ranked == NULL) return;
  double total = 0.0;
  for (uint32_t s = 0; s < profile->num_steps; ++s) {
    ranked[s].step = s;
    ranked[s].ms = profile->step_ms[s];
    total += profile->step_ms[s];
    const uint32_t opcode = plan->ops[steps[s].op_index].opcode;
    if (opcode < (EMBER_OP_LAST + 1)) {
      per_opcode[opcode] += profile->step_ms[s];
      ++opcode_steps[opcode];
    }
  }
  qsort(ranked, profile->num_steps, sizeof *ranked, by_time_descending);
  fprintf(out, "ember profile: %" PRIu64 " runs, %" PRIu32 " steps, %.1f us of GPU time per "
          "run (steps launched one by one, each timed by events)\n",
          profile->runs, profile->num_steps, total / runs * 1e3);
  fprintf(out, "ember profile: by step (the %u most expensive)\n",
          EMBER_PROFILE_TOP_STEPS);
  fprintf(out, "  %5s %5s %-14s %-6s %10s %6s  %s\n", "step", "op", "opcode", "kind",
          "us/run", "share", "output");
  for (uint32_t r = 0; r < profile->num_steps && r < EMBER_PROFILE_TOP_STEPS; ++r) {
    const uint32_t s = ranked[r].step;
    char shape[160];
    describe_output(plan, steps[s].op_index, shape, sizeof shape);
    fprintf(out, "  %5" PRIu32 " %5" PRIu32 " %-14s %-6s %10.2f %5.1f%%  %s\n", s,
            steps[s].op_index, ember_opcode_name(plan->ops[steps[s].op_index].opcode),
            steps[s].is_gemm ? "gemm" : "kernel", ranked[r].ms / runs * 1e3,
            total > 0 ? 100.0 * ranked[r].ms / total : 0.0, shape);
  }
  fprintf(out, "ember profile: by opcode\n");
  fprintf(out, "  %-14s %6s %10s %6s\n", "opcode", "steps", "us/run", "share");
  for (uint32_t c = 0; c < (EMBER_OP_LAST + 1); ++c) {
    if (opcode_steps[c] == 0) continue;
    fprintf(out, "  %-14s %6" PRIu32 " %10.2f %5.1f%%\n", ember_opcode_name(c), opcode_steps[c],
            per_opcode[c] / runs * 1e3, total > 0 ? 100.0 * per_opcode[c] / total : 0.0);
  }
  fflush(out);
  free(ranked);
}

void ember_cuda_profile_destroy(ember_cuda_profile* profile) {
  if (profile == NULL) return;
  if (profile->events != NULL) {
    for (uint32_t e = 0; e <= profile->num_steps; ++e) {
      if (profile->events[e] != NULL) profile->driver->cuEventDestroy(profile->events[e]);
    }
  }
  free(profile->events);
  free(profile->step_ms);
  free(profile);
}

/* C11's wall clock: init phases are milliseconds long, far above its resolution. */
static double now_ms(void) {
  struct timespec ts;
  if (timespec_get(&ts, TIME_UTC) != TIME_UTC) return 0.0;
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void ember_cuda_init_timer_start(ember_cuda_init_timer* timer) {
  memset(timer, 0, sizeof *timer);
  timer->last_ms = now_ms();
}

void ember_cuda_init_timer_mark(ember_cuda_init_timer* timer, const char* phase) {
  const double now = now_ms();
  if (timer->count < EMBER_CUDA_INIT_PHASES) {
    timer->names[timer->count] = phase;
    timer->ms[timer->count] = now - timer->last_ms;
    ++timer->count;
  }
  timer->last_ms = now;
}

void ember_cuda_init_timer_report(const ember_cuda_init_timer* timer, FILE* out) {
  double total = 0.0;
  for (uint32_t i = 0; i < timer->count; ++i) total += timer->ms[i];
  fprintf(out, "ember profile: init %.1f ms (wall time of the CUDA executor's prepare)\n", total);
  for (uint32_t i = 0; i < timer->count; ++i) {
    fprintf(out, "  %-34s %9.2f ms\n", timer->names[i], timer->ms[i]);
  }
  fflush(out);
}
