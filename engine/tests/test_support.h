/* Shared pieces of the engine's C tests: failure counting, file loading, the .case files
 * written by make_test_plans.py, and output comparison with per-dtype tolerances. */
#ifndef EMBER_TESTS_TEST_SUPPORT_H_
#define EMBER_TESTS_TEST_SUPPORT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ember/ember.h"

#if defined(__GNUC__)
#define TEST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TEST_PRINTF(f, a)
#endif

/* Records a failure (thread-safe) and prints it. */
void test_fail(const char* file, int line, const char* format, ...) TEST_PRINTF(3, 4);
int test_failure_count(void);
/* Prints a summary; returns the process exit code. */
int test_finish(const char* test_name, int checks_run);

/* A check that is also an expression: counted (test_counted_checks), a failure recorded,
 * evaluates to whether it held. The CUDA tests name them COUNT and EXPECT. */
bool test_count(bool ok);
int test_counted_checks(void);
#define TEST_COUNT(x) test_count(x)
#define TEST_EXPECT(cond, ...) \
  test_count((cond) ? true : (test_fail(__FILE__, __LINE__, __VA_ARGS__), false))

#define CHECK(cond, ...)                                  \
  do {                                                    \
    if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* Expects success; on error reports the status and frees it. Evaluates to true on OK. */
#define CHECK_OK(expr) test_check_ok((expr), #expr, __FILE__, __LINE__)
bool test_check_ok(ember_status* status, const char* expr, const char* file, int line);

/* Expects an error with `code` whose message contains `substring`; frees it. */
#define CHECK_STATUS(expr, code, substring) \
  test_check_status((expr), (code), (substring), #expr, __FILE__, __LINE__)
bool test_check_status(ember_status* status, ember_status_code code, const char* substring,
                       const char* expr, const char* file, int line);

/* Whole file into a malloc'd buffer (never NULL, even for an empty file); aborts on I/O
 * errors. */
uint8_t* test_read_file(const char* path, size_t* out_size);
/* Non-empty lines of a text file, each malloc'd; free with test_free_lines. */
char** test_read_lines(const char* path, size_t* out_count);
void test_free_lines(char** lines, size_t count);
/* "<dir>/<name><suffix>" in a malloc'd string. */
char* test_join(const char* dir, const char* name, const char* suffix);

typedef struct test_tensor {
  ember_dtype dtype;
  uint32_t rank;
  int64_t dims[EMBER_MAX_RANK];
  size_t nbytes;
  double atol;
  double rtol;
  const uint8_t* data;
} test_tensor;

typedef struct test_case {
  char* name;
  uint8_t* plan;
  size_t plan_size;
  uint8_t* case_bytes;
  uint32_t num_inputs;
  uint32_t num_outputs;
  test_tensor* inputs;
  test_tensor* outputs; /* expected values */
} test_case;

/* Loads <dir>/valid/<name>.plan and .case; aborts if they are unreadable. */
void test_case_load(const char* data_dir, const char* name, test_case* out_case);
void test_case_free(test_case* test);

/* Binding for a tensor described by `t`, with the given memory. */
ember_tensor_binding test_binding(const test_tensor* t, void* data);

/* Output buffers for a case, filled with a garbage pattern; free with test_free_outputs. */
void** test_alloc_outputs(const test_case* test);
void test_free_outputs(const test_case* test, void** outputs);

/* Runs `program` on the case's inputs into `outputs` and compares with the expected
 * values. Returns true when every element is within tolerance. */
bool test_run_and_compare(ember_program* program, const test_case* test, void** outputs,
                          bool report);

/* Runs `program` once on zero-filled buffers shaped by its own input/output info (for
 * plans without a .case, such as mutated ones). Skips (returns OK) when the buffers would
 * exceed 64 MiB. */
ember_status* test_run_with_own_bindings(ember_program* program);

/* Compares one output; prints up to a few mismatches when `report`. */
bool test_compare(const char* what, const test_tensor* expected, const void* actual, bool report);

#endif /* EMBER_TESTS_TEST_SUPPORT_H_ */
