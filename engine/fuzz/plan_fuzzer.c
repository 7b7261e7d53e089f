/* libFuzzer target: arbitrary bytes as a plan.
 *
 * Each input goes through ember_plan_verify and ember_program_create, which must agree
 * (same status code); a plan both accept is run once on zero-filled buffers shaped by the
 * program's own input/output info. Sanitizers (EMBER_SANITIZE=address,undefined) turn
 * any out-of-bounds read, overflow or leak into a finding. Plans whose arena or I/O would
 * exceed a small budget are verified but not created or run, so the fuzzer spends its
 * time on the reader and verifier rather than on large allocations and long loops. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember.h"

enum { kArenaBudget = 256 << 10, kIoBudget = 256 << 10, kHeaderArenaSizeOffset = 56 };

static ember_status* run_with_zeros(ember_program* program) {
  const size_t num_inputs = ember_program_input_count(program);
  const size_t total = num_inputs + ember_program_output_count(program);
  ember_tensor_info* infos = calloc(total + 1, sizeof *infos);
  ember_tensor_binding* bindings = calloc(total + 1, sizeof *bindings);
  if (infos == NULL || bindings == NULL) abort();
  size_t bytes = 0;
  for (size_t i = 0; i < total; ++i) {
    ember_status* status = i < num_inputs
                               ? ember_program_input_info(program, i, &infos[i])
                               : ember_program_output_info(program, i - num_inputs, &infos[i]);
    if (status != NULL) abort(); /* indices are in range: this cannot fail */
    if (infos[i].nbytes > kIoBudget || bytes > kIoBudget) bytes = (size_t)kIoBudget + 1;
    else bytes += infos[i].nbytes;
  }
  ember_status* status = NULL;
  if (bytes <= kIoBudget) {
    for (size_t i = 0; i < total; ++i) {
      bindings[i].data = calloc(1, infos[i].nbytes + 1);
      if (bindings[i].data == NULL) abort();
      bindings[i].nbytes = infos[i].nbytes;
      bindings[i].dtype = infos[i].dtype;
      bindings[i].rank = infos[i].rank;
      bindings[i].dims = infos[i].dims;
    }
    status = ember_program_run(program, bindings, num_inputs, bindings + num_inputs,
                               total - num_inputs);
    for (size_t i = 0; i < total; ++i) free(bindings[i].data);
  }
  free(bindings);
  free(infos);
  return status;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  /* A copy of exactly `size` bytes, so reads past the end are caught even when libFuzzer's
   * buffer is larger. */
  uint8_t* plan = malloc(size == 0 ? 1 : size);
  if (plan == NULL) abort();
  if (size != 0) memcpy(plan, data, size);

  ember_status* verified = ember_plan_verify(plan, size);
  const ember_status_code verify_code = ember_status_code_of(verified);
  if (verified != NULL && ember_status_message(verified)[0] == '\0') abort();
  ember_status_free(verified);

  uint64_t arena_size = 0;
  if (size >= kHeaderArenaSizeOffset + 8) {
    memcpy(&arena_size, plan + kHeaderArenaSizeOffset, sizeof arena_size);
  }
  if (verify_code == EMBER_OK && arena_size > kArenaBudget) {
    free(plan);
    return 0;
  }

  ember_program* program = NULL;
  ember_status* created = ember_program_create(plan, size, NULL, &program);
  const ember_status_code create_code = ember_status_code_of(created);
  ember_status_free(created);
  /* The verifier and create must agree; create may also run out of memory. */
  if (create_code != verify_code && create_code != EMBER_OUT_OF_MEMORY) abort();
  if ((program != NULL) != (create_code == EMBER_OK)) abort();
  free(plan); /* the program must not need the plan any more */
  if (program != NULL) {
    ember_status* ran = run_with_zeros(program);
    /* The bindings match the program's own info, so a run fails only on its data: zero
     * indices into an EMBEDDING table of no rows are out of range (the fuzzer found
     * such a plan; the engine's error is right). */
    if (ran != NULL && !(ember_status_code_of(ran) == EMBER_INVALID_ARGUMENT &&
                         strstr(ember_status_message(ran), "(EMBEDDING): index") != NULL)) {
      abort();
    }
    ember_status_free(ran);
    ember_program_destroy(program);
  }
  return 0;
}
