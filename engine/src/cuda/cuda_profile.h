/* Per-step GPU time of a CUDA executor's runs, for EMBER_CUDA_PROFILE=1 (settings.h).
 *
 * A profiled program launches its steps one by one (no graph) with a CUDA event before the
 * first step and after each one; after the run's wait, the time between consecutive events
 * is added to that step. At destroy the totals are printed to stderr, per step (the most
 * expensive first) and per opcode, so a user can see where a program's time goes without
 * a profiler. Event timing adds a little to each step; the per-step split, not the sum,
 * is what it is for. */
#ifndef EMBER_SRC_CUDA_CUDA_PROFILE_H_
#define EMBER_SRC_CUDA_CUDA_PROFILE_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_driver.h"
#include "plan.h"
#include "status.h"

typedef struct ember_cuda_profile ember_cuda_profile;

/* What the report says about one step: its op, and whether it is a cuBLASLt GEMM. */
typedef struct ember_cuda_profile_step {
  uint32_t op_index;
  bool is_gemm;
} ember_cuda_profile_step;

/* Events for num_steps steps (num_steps + 1 marks), in the current context. */
ember_status* ember_cuda_profile_create(const ember_cuda_driver* driver, uint32_t num_steps,
                                        ember_cuda_profile** out_profile);

/* Records mark `mark` (0 before the first step, s + 1 after step s) on `stream`. */
ember_status* ember_cuda_profile_mark(ember_cuda_profile* profile, uint32_t mark,
                                      CUstream stream);

/* After the stream has finished the marked run: adds each step's time to its total. */
ember_status* ember_cuda_profile_collect(ember_cuda_profile* profile);

/* Prints the totals (nothing if no run was collected). */
void ember_cuda_profile_report(const ember_cuda_profile* profile, const ember_plan* plan,
                               const ember_cuda_profile_step* steps, FILE* out);

/* Destroys the events (in the current context) and frees the profile; NULL is a no-op. */
void ember_cuda_profile_destroy(ember_cuda_profile* profile);

/* Wall time of the phases of a CUDA executor's prepare (libraries, context, memory, GEMM
 * heuristics and search, warm-up, graph), printed with EMBER_CUDA_PROFILE=1 at the end of
 * prepare: init has a bound of its own (issue 6), and this says which phase to work on. */
#define EMBER_CUDA_INIT_PHASES 16

typedef struct ember_cuda_init_timer {
  double last_ms;
  uint32_t count;
  const char* names[EMBER_CUDA_INIT_PHASES];
  double ms[EMBER_CUDA_INIT_PHASES];
} ember_cuda_init_timer;

void ember_cuda_init_timer_start(ember_cuda_init_timer* timer);

/* Ends the phase named `phase` (a string literal) now; the next one starts. */
void ember_cuda_init_timer_mark(ember_cuda_init_timer* timer, const char* phase);

void ember_cuda_init_timer_report(const ember_cuda_init_timer* timer, FILE* out);

#endif /* EMBER_SRC_CUDA_CUDA_PROFILE_H_ */
