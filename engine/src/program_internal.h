/* struct ember_program: a verified plan, the executor that runs it, and the mutex that
 * serializes runs. ember_program_create builds it (program.c); nothing in it points into
 * the caller's plan bytes. */
#ifndef EMBER_SRC_PROGRAM_INTERNAL_H_
#define EMBER_SRC_PROGRAM_INTERNAL_H_

#include <pthread.h>

#include "executor.h"
#include "plan.h"

struct ember_program {
  /* Verified (both levels), constants owned. Immutable after create, so bindings can be
   * checked against it without the mutex. */
  ember_plan plan;
  /* Owned; prepared against `plan`. */
  ember_executor* executor;
  /* Held for the whole of each run: the executor's arena and tables are per program. */
  pthread_mutex_t run_mutex;
  /* Successful runs (under run_mutex). */
  uint64_t runs;
  /* Owned; NULL unless EMBER_EXECUTOR_AUTO fell back to the CPU (why it did). */
  char* fallback_reason;
};

#endif /* EMBER_SRC_PROGRAM_INTERNAL_H_ */
