/* Executor choice in a CUDA build, on any machine (this test never skips):
 *
 *   default   EMBER_EXECUTOR_AUTO runs on CUDA when the driver, a device and cuBLASLt are
 *             there, else on the CPU with ember_program_fallback_reason saying why;
 *             EMBER_EXECUTOR_CUDA is then an EMBER_UNAVAILABLE error naming what is
 *             missing (libcuda.so.1, or libcublasLt.so.13 and `pip install
 *             nvidia-cublas`); EMBER_EXECUTOR_CPU always runs on the CPU.
 *   env_cpu   run with EMBER_EXECUTOR=cpu: every program runs on the CPU, whatever the
 *             options ask, and nothing is reported as a fallback.
 *   env_bad   run with EMBER_EXECUTOR=gpu: creating a program is EMBER_INVALID_ARGUMENT
 *             naming the variable.
 *   env_bad_flag  run with EMBER_CUDA_PROFILE=yes: creating a program is
 *             EMBER_INVALID_ARGUMENT naming the variable and what it must be.
 *   profile   run with EMBER_CUDA_PROFILE=1: where CUDA works, a program run 3 times
 *             prints, when destroyed, a per-step report naming 3 runs and the MLP's
 *             LINEAR steps; a program on the CPU executor prints none (the control).
 *
 * Usage: test_cuda_executor_choice DATA_DIR MODE */
#define _POSIX_C_SOURCE 200809L /* fileno, dup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cublaslt_library.h"
#include "cuda_driver.h"
#include "test_support.h"

static int g_checks;
static bool counted(bool ok) {
  ++g_checks;
  return ok;
}
#define COUNT(x) counted(x)
/* CHECK as an expression: counts, records a failure, evaluates to whether it held. */
#define EXPECT(cond, ...) \
  counted((cond) ? true : (test_fail(__FILE__, __LINE__, __VA_ARGS__), false))

static ember_status* create(const uint8_t* plan, size_t size, ember_executor_kind kind,
                            ember_program** out) {
  ember_program_options options;
  ember_program_options_initialize(&options);
  options.executor = kind;
  return ember_program_create(plan, size, &options, out);
}

/* Runs the program once on zeros, to show it works whatever executor it got. */
static void run_once(ember_program* program) { COUNT(CHECK_OK(test_run_with_own_bindings(program))); }

static void check_default(const uint8_t* plan, size_t size) {
  /* Whether CUDA can work here, and if not, why (the message the executor gives). */
  const ember_cuda_driver* driver;
  const ember_cublaslt_library* lt;
  ember_status* why = ember_cuda_driver_get(&driver);
  if (why == NULL) why = ember_cublaslt_library_get(&lt);
  printf("CUDA here: %s\n", why == NULL ? "available" : ember_status_message(why));

  ember_program* program = NULL;
  if (COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_AUTO, &program)))) {
    const char* reason = ember_program_fallback_reason(program);
    if (why == NULL) {
      EXPECT(ember_program_executor(program) == EMBER_EXECUTOR_CUDA,
                  "AUTO with CUDA available gave %s",
                  ember_executor_kind_name(ember_program_executor(program)));
      EXPECT(reason == NULL, "AUTO on CUDA has a fallback reason: %s", reason);
    } else {
      EXPECT(ember_program_executor(program) == EMBER_EXECUTOR_CPU, "AUTO fallback");
      EXPECT(reason != NULL && strstr(reason, ember_status_message(why)) != NULL,
                  "fallback reason '%s' does not carry '%s'", reason ? reason : "(null)",
                  ember_status_message(why));
      printf("AUTO fell back to the CPU: %s\n", reason ? reason : "(null)");
    }
    run_once(program);
    ember_program_destroy(program);
  }

  program = NULL;
  ember_status* status = create(plan, size, EMBER_EXECUTOR_CUDA, &program);
  if (why == NULL) {
    if (COUNT(CHECK_OK(status))) {
      EXPECT(ember_program_executor(program) == EMBER_EXECUTOR_CUDA, "CUDA requested");
      run_once(program);
      ember_program_destroy(program);
    }
  } else {
    const char* needle = strstr(ember_status_message(why), "libcuda.so.1") != NULL
                             ? "libcuda.so.1"
                             : strstr(ember_status_message(why), EMBER_CUBLASLT_SONAME) != NULL
                                   ? "pip install nvidia-cublas"
                                   : "";
    COUNT(CHECK_STATUS(status, EMBER_UNAVAILABLE, needle));
    EXPECT(program == NULL, "program set after a failed create");
  }

  program = NULL;
  if (COUNT(CHECK_OK(create(plan, size, EMBER_EXECUTOR_CPU, &program)))) {
    EXPECT(ember_program_executor(program) == EMBER_EXECUTOR_CPU, "CPU requested");
    EXPECT(ember_program_fallback_reason(program) == NULL, "CPU asked for: no reason");
    run_once(program);
    ember_program_destroy(program);
  }
  EXPECT(ember_program_fallback_reason(NULL) == NULL, "reason of NULL");
  ember_program_stats stats;
  ember_program_get_stats(NULL, &stats);
  EXPECT(stats.runs == 0 && stats.bytes_host_to_device == 0, "stats of NULL");
  ember_status_free(why);
}

static void check_env_cpu(const uint8_t* plan, size_t size) {
  const ember_executor_kind kinds[3] = {EMBER_EXECUTOR_AUTO, EMBER_EXECUTOR_CPU,
                                        EMBER_EXECUTOR_CUDA};
  for (int k = 0; k < 3; ++k) {
    ember_program* program = NULL;
    if (COUNT(CHECK_OK(create(plan, size, kinds[k], &program)))) {
      EXPECT(ember_program_executor(program) == EMBER_EXECUTOR_CPU,
                  "EMBER_EXECUTOR=cpu, options %s: got %s", ember_executor_kind_name(kinds[k]),
                  ember_executor_kind_name(ember_program_executor(program)));
      EXPECT(ember_program_fallback_reason(program) == NULL, "forced CPU is no fallback");
      run_once(program);
      ember_program_destroy(program);
    }
  }
}

static void check_env_bad(const uint8_t* plan, size_t size) {
  ember_program* program = NULL;
  COUNT(CHECK_STATUS(create(plan, size, EMBER_EXECUTOR_AUTO, &program), EMBER_INVALID_ARGUMENT,
                     "EMBER_EXECUTOR is 'gpu'"));
  EXPECT(program == NULL, "program set after a failed create");
}

/* What destroying `program` writes to stderr (the profile report goes there). */
static char* stderr_of_destroy(ember_program* program) {
  static char text[16384];
  text[0] = '\0';
  FILE* capture = tmpfile();
  if (capture == NULL) return text;
  fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(capture), STDERR_FILENO);
  ember_program_destroy(program);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(capture);
  const size_t n = fread(text, 1, sizeof text - 1, capture);
  text[n] = '\0';
  fclose(capture);
  return text;
}

static void check_profile(const uint8_t* plan, size_t size) {
  const ember_executor_kind kinds[2] = {EMBER_EXECUTOR_AUTO, EMBER_EXECUTOR_CPU};
  for (int k = 0; k < 2; ++k) {
    ember_program* program = NULL;
    if (!COUNT(CHECK_OK(create(plan, size, kinds[k], &program)))) continue;
    const bool on_cuda = ember_program_executor(program) == EMBER_EXECUTOR_CUDA;
    for (int r = 0; r < 3; ++r) run_once(program);
    const char* report = stderr_of_destroy(program);
    printf("%s executor, EMBER_CUDA_PROFILE=1, stderr at destroy:\n%s\n",
           on_cuda ? "CUDA" : "CPU", report);
    if (on_cuda) {
      EXPECT(strstr(report, "ember profile: 3 runs") != NULL, "no profile of 3 runs");
      EXPECT(strstr(report, "LINEAR") != NULL && strstr(report, "gemm") != NULL,
             "the profile names no LINEAR GEMM step");
    } else {
      EXPECT(strstr(report, "ember profile") == NULL, "a CPU program printed a profile");
    }
  }
}

static void check_env_bad_flag(const uint8_t* plan, size_t size) {
  ember_program* program = NULL;
  COUNT(CHECK_STATUS(create(plan, size, EMBER_EXECUTOR_AUTO, &program), EMBER_INVALID_ARGUMENT,
                     "EMBER_CUDA_PROFILE is 'yes'; it must be 0 or 1"));
  EXPECT(program == NULL, "program set after a failed create");
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DATA_DIR default|env_cpu|env_bad|env_bad_flag|profile\n", argv[0]);
    return 2;
  }
  char* path = test_join(argv[1], "mlp_f32", ".plan");
  size_t size;
  uint8_t* plan = test_read_file(path, &size);
  free(path);
  if (strcmp(argv[2], "default") == 0) {
    check_default(plan, size);
  } else if (strcmp(argv[2], "env_cpu") == 0) {
    check_env_cpu(plan, size);
  } else if (strcmp(argv[2], "env_bad") == 0) {
    check_env_bad(plan, size);
  } else if (strcmp(argv[2], "env_bad_flag") == 0) {
    check_env_bad_flag(plan, size);
  } else if (strcmp(argv[2], "profile") == 0) {
    check_profile(plan, size);
  } else {
    fprintf(stderr, "unknown mode %s\n", argv[2]);
    return 2;
  }
  free(plan);
  return test_finish("test_cuda_executor_choice", g_checks);
}
