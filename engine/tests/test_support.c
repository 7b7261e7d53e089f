/* Shared pieces of the engine's C tests. */
#include "test_support.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_formats.h"

static pthread_mutex_t g_failure_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_failures;

void test_fail(const char* file, int line, const char* format, ...) {
  pthread_mutex_lock(&g_failure_mutex);
  ++g_failures;
  fprintf(stderr, "FAIL %s:%d: ", file, line);
  va_list args;
  va_start(args, format);
  vfprintf(stderr, format, args);
  va_end(args);
  fputc('\n', stderr);
  pthread_mutex_unlock(&g_failure_mutex);
}

static int g_counted_checks;

bool test_count(bool ok) {
  pthread_mutex_lock(&g_failure_mutex);
  ++g_counted_checks;
  pthread_mutex_unlock(&g_failure_mutex);
  return ok;
}

int test_counted_checks(void) {
  pthread_mutex_lock(&g_failure_mutex);
  const int checks = g_counted_checks;
  pthread_mutex_unlock(&g_failure_mutex);
  return checks;
}

int test_failure_count(void) {
  pthread_mutex_lock(&g_failure_mutex);
  int failures = g_failures;
  pthread_mutex_unlock(&g_failure_mutex);
  return failures;
}

int test_finish(const char* test_name, int checks_run) {
  int failures = test_failure_count();
  printf("%s: %d checks, %d failures\n", test_name, checks_run, failures);
  return failures == 0 ? 0 : 1;
}

bool test_check_ok(ember_status* status, const char* expr, const char* file, int line) {
  if (status == NULL) return true;
  test_fail(file, line, "%s returned %s: %s", expr,
            ember_status_code_name(ember_status_code_of(status)), ember_status_message(status));
  ember_status_free(status);
  return false;
}

bool test_check_status(ember_status* status, ember_status_code code, const char* substring,
                       const char* expr, const char* file, int line) {
  if (status == NULL) {
    test_fail(file, line, "%s succeeded; expected %s containing \"%s\"", expr,
              ember_status_code_name(code), substring);
    return false;
  }
  bool ok = true;
  const char* message = ember_status_message(status);
  if (ember_status_code_of(status) != code) {
    test_fail(file, line, "%s returned %s (\"%s\"); expected %s", expr,
              ember_status_code_name(ember_status_code_of(status)), message,
              ember_status_code_name(code));
    ok = false;
  } else if (strstr(message, substring) == NULL) {
    test_fail(file, line, "%s: message \"%s\" lacks \"%s\"", expr, message, substring);
    ok = false;
  }
  ember_status_free(status);
  return ok;
}

uint8_t* test_read_file(const char* path, size_t* out_size) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    abort();
  }
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  if (size < 0) abort();
  uint8_t* data = malloc((size_t)size + 1);
  if (data == NULL || fread(data, 1, (size_t)size, file) != (size_t)size) abort();
  fclose(file);
  *out_size = (size_t)size;
  return data;
}

char** test_read_lines(const char* path, size_t* out_count) {
  size_t size;
  uint8_t* text = test_read_file(path, &size);
  text[size] = '\0';
  size_t capacity = 16, count = 0;
  char** lines = malloc(capacity * sizeof(char*));
  char* cursor = (char*)text;
  while (*cursor != '\0') {
    char* end = strchr(cursor, '\n');
    size_t length = end != NULL ? (size_t)(end - cursor) : strlen(cursor);
    if (length > 0) {
      if (count == capacity) {
        capacity *= 2;
        lines = realloc(lines, capacity * sizeof(char*));
      }
      lines[count] = malloc(length + 1);
      memcpy(lines[count], cursor, length);
      lines[count][length] = '\0';
      ++count;
    }
    cursor += length + (end != NULL ? 1 : 0);
  }
  free(text);
  *out_count = count;
  return lines;
}

void test_free_lines(char** lines, size_t count) {
  for (size_t i = 0; i < count; ++i) free(lines[i]);
  free(lines);
}

char* test_join(const char* dir, const char* name, const char* suffix) {
  size_t length = strlen(dir) + strlen(name) + strlen(suffix) + 2;
  char* path = malloc(length);
  snprintf(path, length, "%s/%s%s", dir, name, suffix);
  return path;
}

static uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4); /* the test hosts are little-endian, like the format */
  return v;
}

static const uint8_t* read_tensor(const uint8_t* p, const uint8_t* end, test_tensor* t) {
  if ((size_t)(end - p) < 8) abort();
  t->dtype = (ember_dtype)read_u32(p);
  t->rank = read_u32(p + 4);
  p += 8;
  if (t->rank > EMBER_MAX_RANK || (size_t)(end - p) < 8u * t->rank + 24u) abort();
  memset(t->dims, 0, sizeof t->dims);
  memcpy(t->dims, p, 8u * t->rank);
  p += 8u * t->rank;
  uint64_t nbytes;
  memcpy(&nbytes, p, 8);
  memcpy(&t->atol, p + 8, 8);
  memcpy(&t->rtol, p + 16, 8);
  p += 24;
  if ((uint64_t)(end - p) < nbytes) abort();
  t->nbytes = (size_t)nbytes;
  t->data = p;
  p += nbytes;
  size_t padding = (8u - (nbytes % 8u)) % 8u;
  return p + padding;
}

void test_case_load(const char* data_dir, const char* name, test_case* out_case) {
  memset(out_case, 0, sizeof *out_case);
  out_case->name = malloc(strlen(name) + 1);
  memcpy(out_case->name, name, strlen(name) + 1);
  char* valid_dir = test_join(data_dir, "valid", "");
  char* plan_path = test_join(valid_dir, name, ".plan");
  char* case_path = test_join(valid_dir, name, ".case");
  size_t case_size;
  out_case->plan = test_read_file(plan_path, &out_case->plan_size);
  out_case->case_bytes = test_read_file(case_path, &case_size);
  free(valid_dir);
  free(plan_path);
  free(case_path);
  const uint8_t* p = out_case->case_bytes;
  const uint8_t* end = p + case_size;
  if (case_size < 16 || memcmp(p, "EMBRCASE", 8) != 0) abort();
  out_case->num_inputs = read_u32(p + 8);
  out_case->num_outputs = read_u32(p + 12);
  p += 16;
  out_case->inputs = calloc(out_case->num_inputs + 1u, sizeof(test_tensor));
  out_case->outputs = calloc(out_case->num_outputs + 1u, sizeof(test_tensor));
  for (uint32_t i = 0; i < out_case->num_inputs; ++i) p = read_tensor(p, end, &out_case->inputs[i]);
  for (uint32_t i = 0; i < out_case->num_outputs; ++i) {
    p = read_tensor(p, end, &out_case->outputs[i]);
  }
}

void test_case_free(test_case* test) {
  free(test->name);
  free(test->plan);
  free(test->case_bytes);
  free(test->inputs);
  free(test->outputs);
  memset(test, 0, sizeof *test);
}

ember_tensor_binding test_binding(const test_tensor* t, void* data) {
  ember_tensor_binding binding;
  binding.data = data;
  binding.nbytes = t->nbytes;
  binding.dtype = t->dtype;
  binding.rank = t->rank;
  binding.dims = t->dims;
  return binding;
}

void** test_alloc_outputs(const test_case* test) {
  void** outputs = calloc(test->num_outputs + 1u, sizeof(void*));
  for (uint32_t i = 0; i < test->num_outputs; ++i) {
    outputs[i] = malloc(test->outputs[i].nbytes + 1u);
    memset(outputs[i], 0xAB, test->outputs[i].nbytes + 1u);
  }
  return outputs;
}

void test_free_outputs(const test_case* test, void** outputs) {
  for (uint32_t i = 0; i < test->num_outputs; ++i) free(outputs[i]);
  free(outputs);
}

bool test_run_and_compare(ember_program* program, const test_case* test, void** outputs,
                          bool report) {
  ember_tensor_binding inputs[16], results[16];
  if (test->num_inputs > 16 || test->num_outputs > 16) abort();
  for (uint32_t i = 0; i < test->num_inputs; ++i) {
    /* The engine only reads inputs; the binding type is shared with outputs. */
    inputs[i] = test_binding(&test->inputs[i], (void*)(uintptr_t)test->inputs[i].data);
  }
  for (uint32_t i = 0; i < test->num_outputs; ++i) {
    results[i] = test_binding(&test->outputs[i], outputs[i]);
  }
  ember_status* status =
      ember_program_run(program, inputs, test->num_inputs, results, test->num_outputs);
  if (status != NULL) {
    test_fail(__FILE__, __LINE__, "%s: run failed: %s", test->name,
              ember_status_message(status));
    ember_status_free(status);
    return false;
  }
  bool ok = true;
  for (uint32_t i = 0; i < test->num_outputs; ++i) {
    char what[160];
    snprintf(what, sizeof what, "%s output %u", test->name, i);
    ok = test_compare(what, &test->outputs[i], outputs[i], report) && ok;
  }
  return ok;
}

static double element(const void* data, ember_dtype dtype, size_t i) {
  const uint8_t* bytes = data;
  if (dtype == EMBER_DTYPE_FLOAT32) {
    float v;
    memcpy(&v, bytes + 4 * i, 4);
    return v;
  }
  if (dtype == EMBER_DTYPE_INT64) {
    int64_t v;
    memcpy(&v, bytes + 8 * i, 8);
    return (double)v;
  }
  if (dtype == EMBER_DTYPE_INT32) {
    int32_t v;
    memcpy(&v, bytes + 4 * i, 4);
    return v;
  }
  if (dtype == EMBER_DTYPE_BOOL) return bytes[i];
  uint16_t bits;
  memcpy(&bits, bytes + 2 * i, 2);
  return dtype == EMBER_DTYPE_FLOAT16 ? ember_f16_to_f32(bits) : ember_bf16_to_f32(bits);
}

bool test_compare(const char* what, const test_tensor* expected, const void* actual,
                  bool report) {
  const size_t count = expected->nbytes / ember_dtype_size(expected->dtype);
  int mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = element(expected->data, expected->dtype, i);
    double have = element(actual, expected->dtype, i);
    bool same = (isnan(want) && isnan(have)) || want == have ||
                fabs(have - want) <= expected->atol + expected->rtol * fabs(want);
    if (!same) {
      if (report && mismatches < 5) {
        test_fail(__FILE__, __LINE__, "%s: element %zu is %.9g, expected %.9g", what, i, have,
                  want);
      }
      ++mismatches;
    }
  }
  if (mismatches > 0 && report) {
    test_fail(__FILE__, __LINE__, "%s: %d of %zu elements outside tolerance", what, mismatches,
              count);
  }
  return mismatches == 0;
}

ember_status* test_run_with_own_bindings(ember_program* program) {
  const size_t num_inputs = ember_program_input_count(program);
  const size_t num_outputs = ember_program_output_count(program);
  const size_t total = num_inputs + num_outputs;
  ember_tensor_info* infos = calloc(total + 1, sizeof(ember_tensor_info));
  ember_tensor_binding* bindings = calloc(total + 1, sizeof(ember_tensor_binding));
  ember_status* status = NULL;
  size_t bytes = 0;
  for (size_t i = 0; i < total && status == NULL; ++i) {
    status = i < num_inputs ? ember_program_input_info(program, i, &infos[i])
                            : ember_program_output_info(program, i - num_inputs, &infos[i]);
    if (status == NULL) bytes += infos[i].nbytes;
    if (infos[i].nbytes > ((size_t)64 << 20)) bytes = SIZE_MAX;
  }
  if (status == NULL && bytes <= ((size_t)64 << 20)) {
    for (size_t i = 0; i < total; ++i) {
      bindings[i].data = calloc(1, infos[i].nbytes + 1);
      bindings[i].nbytes = infos[i].nbytes;
      bindings[i].dtype = infos[i].dtype;
      bindings[i].rank = infos[i].rank;
      bindings[i].dims = infos[i].dims;
    }
    status = ember_program_run(program, bindings, num_inputs, bindings + num_inputs,
                               num_outputs);
    for (size_t i = 0; i < total; ++i) free(bindings[i].data);
  }
  free(bindings);
  free(infos);
  return status;
}
