/* Several threads run several programs concurrently: two programs shared by all threads
 * (their runs serialize on the program's mutex) and one program per thread. Meant to be
 * run under ThreadSanitizer as well as plainly.
 *
 * Usage: test_threads DATA_DIR */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_support.h"

enum { kThreads = 4, kIterations = 200 };

typedef struct shared_state {
  const char* data_dir;
  test_case* cases[2];
  ember_program* programs[2];
} shared_state;

typedef struct thread_arg {
  shared_state* shared;
  int index;
  int runs;
} thread_arg;

static void* thread_main(void* opaque) {
  thread_arg* arg = opaque;
  shared_state* shared = arg->shared;
  test_case own_case;
  test_case_load(shared->data_dir, arg->index % 2 == 0 ? "mlp_bf16" : "attention_f32",
                 &own_case);
  ember_program* own = NULL;
  if (!CHECK_OK(ember_program_create(own_case.plan, own_case.plan_size, NULL, &own))) {
    test_case_free(&own_case);
    return NULL;
  }
  void** shared_outputs[2] = {test_alloc_outputs(shared->cases[0]),
                              test_alloc_outputs(shared->cases[1])};
  void** own_outputs = test_alloc_outputs(&own_case);
  for (int i = 0; i < kIterations; ++i) {
    const int which = (i + arg->index) % 2;
    CHECK(test_run_and_compare(shared->programs[which], shared->cases[which],
                               shared_outputs[which], true),
          "thread %d iteration %d: shared program %d", arg->index, i, which);
    CHECK(test_run_and_compare(own, &own_case, own_outputs, true),
          "thread %d iteration %d: own program", arg->index, i);
    arg->runs += 2;
  }
  test_free_outputs(shared->cases[0], shared_outputs[0]);
  test_free_outputs(shared->cases[1], shared_outputs[1]);
  test_free_outputs(&own_case, own_outputs);
  ember_program_destroy(own);
  test_case_free(&own_case);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  test_case cases[2];
  shared_state shared = {argv[1], {&cases[0], &cases[1]}, {NULL, NULL}};
  test_case_load(argv[1], "mlp_f32", &cases[0]);
  test_case_load(argv[1], "attention_bf16", &cases[1]);
  for (int p = 0; p < 2; ++p) {
    if (!CHECK_OK(ember_program_create(cases[p].plan, cases[p].plan_size, NULL,
                                       &shared.programs[p]))) {
      return test_finish("test_threads", 0);
    }
  }
  pthread_t threads[kThreads];
  thread_arg args[kThreads];
  for (int t = 0; t < kThreads; ++t) {
    args[t] = (thread_arg){&shared, t, 0};
    if (pthread_create(&threads[t], NULL, thread_main, &args[t]) != 0) abort();
  }
  int runs = 0;
  for (int t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    runs += args[t].runs;
  }
  CHECK(runs == kThreads * kIterations * 2, "%d runs completed", runs);
  printf("%d threads, %d runs\n", kThreads, runs);
  ember_program_destroy(shared.programs[0]);
  ember_program_destroy(shared.programs[1]);
  test_case_free(&cases[0]);
  test_case_free(&cases[1]);
  return test_finish("test_threads", runs);
}
