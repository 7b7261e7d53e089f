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
 *   env_bad_pdl  the same with EMBER_CUDA_PDL=on (it takes 0, 1 or auto).
 *   env_bad_gemm_wgmma  the same with EMBER_CUDA_GEMM_WGMMA=yes (0, 1 or auto too).
 *   env_bad_gemm_narrow  the same with EMBER_CUDA_GEMM_NARROW=on (0, 1 or auto too).
 *   profile   run with EMBER_CUDA_PROFILE=1: where CUDA works, a program run 3 times
 *             prints, when destroyed, a per-step report naming 3 runs and the MLP's
 *             LINEAR steps; a program on the CPU executor prints none (the control).
 *   lazy_cublaslt  in a process that has not touched cuBLASLt: a program whose only
 *             LINEAR runs as the gemv kernel, and one whose only op is an SDPA on the
 *             flash kernel, and (on compute capability 9.0) a conv of 96 tiles on the
 *             wgmma kernel, run on CUDA (with a driver) without loading cuBLASLt,
 *             whether or not cuBLASLt is there; the MLP (GEMMs, the control)
 *             loads it, or where it is missing fails naming its first GEMM op and
 *             `pip install nvidia-cublas`. Where it loads, the MLP created a second time
 *             asks the heuristic nothing (every question answered by the process's
 *             cache), and no GEMM times more than EMBER_CUDA_GEMM_TIMED_CANDIDATES
 *             algorithms. Without a driver nothing loads cuBLASLt either.
 *
 * Usage: test_cuda_executor_choice DATA_DIR MODE */
#define _POSIX_C_SOURCE 200809L /* fileno, dup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cublaslt_library.h"
#include "cuda_driver.h"
#include "cuda_executor.h"
#include "cuda_gemm.h"
#include "program_internal.h"
#include "test_support.h"

#define COUNT(x) TEST_COUNT(x)
#define EXPECT(cond, ...) TEST_EXPECT(cond, __VA_ARGS__)

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

static void check_env_bad_flag(const uint8_t* plan, size_t size, const char* message) {
  ember_program* program = NULL;
  COUNT(CHECK_STATUS(create(plan, size, EMBER_EXECUTOR_AUTO, &program), EMBER_INVALID_ARGUMENT,
                     message));
  EXPECT(program == NULL, "program set after a failed create");
}

static ember_cuda_executor_info info_of(const ember_program* program) {
  ember_cuda_executor_info info;
  ember_cuda_executor_get_info(program->executor, &info);
  return info;
}

static void check_lazy_cublaslt(const char* dir, const uint8_t* gemm_plan, size_t gemm_size) {
  char* path = test_join(dir, "linear_m1_f32", ".plan"); /* one LINEAR of 1 row: gemv */
  size_t gemv_size;
  uint8_t* gemv_plan = test_read_file(path, &gemv_size);
  free(path);
  EXPECT(!ember_cublaslt_library_attempted(), "cuBLASLt loaded before any program");
  const ember_cuda_driver* driver;
  ember_status* no_driver = ember_cuda_driver_get(&driver);
  printf("driver: %s\n", no_driver == NULL ? "available" : ember_status_message(no_driver));

  /* Ember's kernels only: CUDA without cuBLASLt, asked for or chosen by AUTO. */
  const ember_executor_kind kinds[2] = {EMBER_EXECUTOR_CUDA, EMBER_EXECUTOR_AUTO};
  for (int k = 0; k < 2; ++k) {
    ember_program* program = NULL;
    ember_status* status = create(gemv_plan, gemv_size, kinds[k], &program);
    if (no_driver != NULL) {
      if (kinds[k] == EMBER_EXECUTOR_CUDA) {
        COUNT(CHECK_STATUS(status, EMBER_UNAVAILABLE, "libcuda.so.1"));
      } else if (COUNT(CHECK_OK(status))) {
        ember_program_destroy(program);
      }
      continue;
    }
    if (!COUNT(CHECK_OK(status))) continue;
    EXPECT(ember_program_executor(program) == EMBER_EXECUTOR_CUDA &&
               ember_program_fallback_reason(program) == NULL,
           "a gemv-only program with %s did not run on CUDA: %s",
           ember_executor_kind_name(kinds[k]),
           ember_program_fallback_reason(program) ? ember_program_fallback_reason(program) : "");
    if (ember_program_executor(program) == EMBER_EXECUTOR_CUDA) {
      const ember_cuda_executor_info info = info_of(program);
      EXPECT(!info.cublaslt && info.gemms == 0 && info.gemv_kernels == 1,
             "gemv-only program: cublaslt %d, %u GEMMs, %u gemv kernels (expected 0, 0, 1)",
             (int)info.cublaslt, info.gemms, info.gemv_kernels);
    }
    run_once(program);
    ember_program_destroy(program);
  }
  /* An SDPA on the flash kernel is one of Ember's kernels too. */
  path = test_join(dir, "sdpa_flash_e64_f16", ".plan");
  size_t flash_size;
  uint8_t* flash_plan = test_read_file(path, &flash_size);
  free(path);
  ember_program* flash = NULL;
  if (no_driver == NULL && COUNT(CHECK_OK(create(flash_plan, flash_size, EMBER_EXECUTOR_CUDA,
                                                 &flash)))) {
    const ember_cuda_executor_info info = info_of(flash);
    EXPECT(!info.cublaslt && info.gemms == 0 && info.sdpa_flash == 1,
           "flash-SDPA-only program: cublaslt %d, %u GEMMs, %u flash SDPAs (expected 0, 0, 1)",
           (int)info.cublaslt, info.gemms, info.sdpa_flash);
    run_once(flash);
    ember_program_destroy(flash);
  }
  free(flash_plan);
  /* A conv of 96 output tiles: on a GPU with the wgmma conv kernel (64 tiles are enough
   * for it) one of Ember's kernels, so no cuBLASLt; elsewhere (128 for mma.sync) im2col
   * + GEMM, which would load it, so it is tried only where the GPU has wgmma. */
  int major = 0;
  if (no_driver == NULL) {
    CUdevice device;
    if (driver->cuDeviceGet(&device, 0) != CUDA_SUCCESS ||
        driver->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                     device) != CUDA_SUCCESS) {
      major = 0;
    }
  }
  if (major == 9) {
    path = test_join(dir, "conv2d_igemm_tiles96_f16", ".plan");
    size_t conv_size;
    uint8_t* conv_plan = test_read_file(path, &conv_size);
    free(path);
    ember_program* conv = NULL;
    if (COUNT(CHECK_OK(create(conv_plan, conv_size, EMBER_EXECUTOR_CUDA, &conv)))) {
      const ember_cuda_executor_info info = info_of(conv);
      EXPECT(!info.cublaslt && info.conv_gemms == 0 && info.conv_wgmmas == 1,
             "96-tile conv on wgmma: cublaslt %d, %u convs as GEMMs, %u on wgmma (expected "
             "0, 0, 1)", (int)info.cublaslt, info.conv_gemms, info.conv_wgmmas);
      run_once(conv);
      ember_program_destroy(conv);
    }
    free(conv_plan);
  } else {
    printf("compute capability %d: no wgmma conv kernel, the 96-tile conv is not tried\n",
           major);
  }
  EXPECT(!ember_cublaslt_library_attempted(), "a program without GEMMs loaded cuBLASLt");

  /* The control: the MLP's LINEARs of 16 rows are cuBLASLt GEMMs. */
  ember_program* program = NULL;
  ember_status* status = create(gemm_plan, gemm_size, EMBER_EXECUTOR_CUDA, &program);
  if (no_driver != NULL) {
    COUNT(CHECK_STATUS(status, EMBER_UNAVAILABLE, "libcuda.so.1"));
    EXPECT(!ember_cublaslt_library_attempted(), "cuBLASLt loaded without a driver");
    ember_status_free(no_driver);
    free(gemv_plan);
    return;
  }
  EXPECT(ember_cublaslt_library_attempted(), "a program with GEMMs did not load cuBLASLt");
  if (status != NULL) {
    printf("cuBLASLt missing: %s\n", ember_status_message(status));
    COUNT(CHECK_STATUS(status, EMBER_UNAVAILABLE, "(LINEAR) runs on cuBLASLt"));
    /* CHECK_STATUS took the status; this one is for the fix. */
    COUNT(CHECK_STATUS(create(gemm_plan, gemm_size, EMBER_EXECUTOR_CUDA, &program),
                       EMBER_UNAVAILABLE, "pip install nvidia-cublas"));
    free(gemv_plan);
    return;
  }
  const ember_cuda_executor_info first = info_of(program);
  EXPECT(first.cublaslt && first.gemms > 0 && first.heuristic_cache_misses > 0,
         "MLP: cublaslt %d, %u GEMMs, %u heuristic misses", (int)first.cublaslt, first.gemms,
         first.heuristic_cache_misses);
  EXPECT(first.gemm_candidates_timed <= EMBER_CUDA_GEMM_TIMED_CANDIDATES * first.gemms,
         "MLP: %u candidates timed for %u GEMMs (at most %d each)", first.gemm_candidates_timed,
         first.gemms, EMBER_CUDA_GEMM_TIMED_CANDIDATES);
  run_once(program);
  ember_program_destroy(program);

  program = NULL;
  if (COUNT(CHECK_OK(create(gemm_plan, gemm_size, EMBER_EXECUTOR_CUDA, &program)))) {
    const ember_cuda_executor_info second = info_of(program);
    printf("MLP heuristic questions: first program %u cached, %u asked; second %u cached, "
           "%u asked\n", first.heuristic_cache_hits, first.heuristic_cache_misses,
           second.heuristic_cache_hits, second.heuristic_cache_misses);
    EXPECT(second.heuristic_cache_misses == 0 &&
               second.heuristic_cache_hits ==
                   first.heuristic_cache_hits + first.heuristic_cache_misses,
           "the same MLP again asked the heuristic %u times (%u cached; expected 0 and %u)",
           second.heuristic_cache_misses, second.heuristic_cache_hits,
           first.heuristic_cache_hits + first.heuristic_cache_misses);
    run_once(program);
    ember_program_destroy(program);
  }
  free(gemv_plan);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DATA_DIR default|env_cpu|env_bad|env_bad_flag|env_bad_pdl|"
            "env_bad_gemm_wgmma|env_bad_gemm_narrow|profile|lazy_cublaslt\n", argv[0]);
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
    check_env_bad_flag(plan, size, "EMBER_CUDA_PROFILE is 'yes'; it must be 0 or 1");
  } else if (strcmp(argv[2], "env_bad_pdl") == 0) {
    check_env_bad_flag(plan, size, "EMBER_CUDA_PDL is 'on'; it must be 0, 1 or auto");
  } else if (strcmp(argv[2], "env_bad_gemm_wgmma") == 0) {
    check_env_bad_flag(plan, size, "EMBER_CUDA_GEMM_WGMMA is 'yes'; it must be 0, 1 or auto");
  } else if (strcmp(argv[2], "env_bad_gemm_narrow") == 0) {
    check_env_bad_flag(plan, size, "EMBER_CUDA_GEMM_NARROW is 'on'; it must be 0, 1 or auto");
  } else if (strcmp(argv[2], "profile") == 0) {
    check_profile(plan, size);
  } else if (strcmp(argv[2], "lazy_cublaslt") == 0) {
    check_lazy_cublaslt(argv[1], plan, size);
  } else {
    fprintf(stderr, "unknown mode %s\n", argv[2]);
    return 2;
  }
  free(plan);
  return test_finish("test_cuda_executor_choice", test_counted_checks());
}
