/* The executor interface: how a program runs its verified plan on one kind of device.
 *
 * An executor is a struct whose first member is `ember_executor`, so that an executor
 * of any kind (cpu_executor.c now, a cuda_executor.cu later) can be held through the
 * base pointer. Its vtable has three entries:
 *
 *   prepare  at ember_program_create, once: allocate the arena and anything else a run
 *            needs (scratch, device copies of constants, GEMM algorithms, a captured
 *            graph). After prepare, run must not allocate.
 *   run      at ember_program_run: read inputs, write outputs. The program has already
 *            checked the bindings against the plan (dtype, rank, dims, nbytes, non-NULL
 *            data, no output overlapping another binding) and holds its run mutex, so a
 *            run never overlaps another run of the same executor.
 *   destroy  at ember_program_destroy: wait for work in flight, release everything.
 *
 * The plan passed to prepare is verified, owns its constants, and outlives the
 * executor; an executor may keep a pointer to it. It must not modify it.
 */
#ifndef EMBER_SRC_EXECUTOR_H_
#define EMBER_SRC_EXECUTOR_H_

#include "ember/ember.h"
#include "plan.h"

typedef struct ember_executor ember_executor;

typedef struct ember_executor_vtable {
  /* On success *out_executor is a new executor; on error it is NULL and nothing leaks. */
  ember_status* (*prepare)(const ember_plan* plan, ember_executor** out_executor);
  /* inputs[i] / outputs[i]: the caller's binding for plan->inputs[i] / plan->outputs[i],
   * already checked to match the plan; `data` is NULL only where the tensor has 0 bytes. */
  ember_status* (*run)(ember_executor* executor, const ember_tensor_binding* inputs,
                       const ember_tensor_binding* outputs);
  void (*destroy)(ember_executor* executor);
} ember_executor_vtable;

struct ember_executor {
  const ember_executor_vtable* vtable;
  ember_executor_kind kind;
  /* Bytes that runs copied host->device and device->host to stage bound inputs and
   * outputs (ember_program_stats). An executor that copies adds to them in run, under the
   * program's run mutex; one that never copies leaves them 0. */
  uint64_t bytes_host_to_device;
  uint64_t bytes_device_to_host;
};

/* The CPU reference executor (cpu_executor.c). */
extern const ember_executor_vtable ember_cpu_executor_vtable;
/* The CUDA executor (cuda/cuda_executor.c), in builds with EMBER_CUDA. */
#if defined(EMBER_HAVE_CUDA)
extern const ember_executor_vtable ember_cuda_executor_vtable;
#endif

#endif /* EMBER_SRC_EXECUTOR_H_ */
