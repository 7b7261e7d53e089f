/* The malformed-plan corpus: each plan in DATA_DIR/malformed, made by mutating writer
 * output, must be rejected by ember_plan_verify and ember_program_create with its own
 * status code and message. Then every truncation and many single-bit flips of each valid
 * plan must be handled without a crash (run under sanitizers, this is a small fuzz pass).
 *
 * Usage: test_malformed_plans DATA_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static ember_status_code code_from_name(const char* name) {
  static const ember_status_code kCodes[] = {
      EMBER_INVALID_ARGUMENT, EMBER_INVALID_PLAN, EMBER_UNSUPPORTED_VERSION,
      EMBER_OUT_OF_MEMORY,    EMBER_UNAVAILABLE,  EMBER_INTERNAL,
  };
  for (size_t i = 0; i < sizeof kCodes / sizeof kCodes[0]; ++i) {
    if (strcmp(name, ember_status_code_name(kCodes[i])) == 0) return kCodes[i];
  }
  fprintf(stderr, "unknown status code %s in the manifest\n", name);
  abort();
}

static int check_corpus(const char* data_dir) {
  int checks = 0;
  char* malformed_dir = test_join(data_dir, "malformed", "");
  char* manifest = test_join(malformed_dir, "manifest.txt", "");
  size_t count;
  char** lines = test_read_lines(manifest, &count);
  for (size_t i = 0; i < count; ++i) {
    /* name \t code \t substring */
    char* name = lines[i];
    char* code_name = strchr(name, '\t');
    if (code_name == NULL) abort();
    *code_name++ = '\0';
    char* substring = strchr(code_name, '\t');
    if (substring == NULL) abort();
    *substring++ = '\0';
    const ember_status_code code = code_from_name(code_name);

    char* path = test_join(malformed_dir, name, ".plan");
    size_t size;
    uint8_t* plan = test_read_file(path, &size);
    int before = test_failure_count();
    ++checks;
    CHECK_STATUS(ember_plan_verify(plan, size), code, substring);
    ember_program* program = (ember_program*)(uintptr_t)1; /* must be reset to NULL */
    ++checks;
    CHECK_STATUS(ember_program_create(plan, size, NULL, &program), code, substring);
    ++checks;
    CHECK(program == NULL, "%s: out_program not NULL after a failed create", name);
    printf("%-36s %s\n", name, test_failure_count() == before ? "ok" : "FAILED");
    free(plan);
    free(path);
  }
  printf("%zu malformed plans\n", count);
  ++checks;
  CHECK(count >= 25, "only %zu malformed plans", count);
  test_free_lines(lines, count);
  free(manifest);
  free(malformed_dir);
  return checks;
}

/* Every prefix of a valid plan fails cleanly; single-bit flips never crash. */
static int check_mutations(const char* data_dir, const char* name) {
  int checks = 0;
  test_case test;
  test_case_load(data_dir, name, &test);
  const size_t size = test.plan_size;
  uint8_t* copy = malloc(size);
  for (size_t length = 0; length < size; ++length) {
    memcpy(copy, test.plan, length);
    ember_status* status = ember_plan_verify(copy, length);
    ++checks;
    CHECK(status != NULL, "%s: truncation to %zu bytes was accepted", name, length);
    ember_status_free(status);
  }
  size_t accepted = 0;
  for (size_t bit = 0; bit < size * 8; bit += 3) {
    memcpy(copy, test.plan, size);
    copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    ember_status* status = ember_plan_verify(copy, size);
    uint64_t arena_size;
    memcpy(&arena_size, copy + 56, sizeof arena_size); /* header field arena_size */
    if (status == NULL && arena_size > ((uint64_t)256 << 20)) {
      /* A flip in arena_size gives a valid plan that asks for more memory than a test
       * should allocate (sanitizers treat a failed huge allocation as a crash). */
      ++accepted;
    } else if (status == NULL) {
      /* Some flips give another valid plan (a changed constant, say): it must run. */
      ++accepted;
      ember_program* program = NULL;
      if (CHECK_OK(ember_program_create(copy, size, NULL, &program))) {
        CHECK_OK(test_run_with_own_bindings(program));
        ember_program_destroy(program);
      }
    }
    ember_status_free(status);
    ++checks;
  }
  printf("%s: %zu truncations rejected, %zu of %zu bit flips still valid\n", name, size,
         accepted, (size * 8 + 2) / 3);
  free(copy);
  test_case_free(&test);
  return checks;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  int checks = check_corpus(argv[1]);
  checks += check_mutations(argv[1], "mlp_f32");
  checks += check_mutations(argv[1], "attention_bf16");
  checks += check_mutations(argv[1], "layer_norm_affine");
  checks += check_mutations(argv[1], "convnet");
  checks += check_mutations(argv[1], "decoder");
  checks += check_mutations(argv[1], "dynamic_b6");
  return test_finish("test_malformed_plans", checks);
}
