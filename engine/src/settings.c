/* Settings from the environment, read once (settings.h). */
#include "settings.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static ember_settings settings;

/* The first value that means nothing is the one reported. */
static void report_invalid(const char* name, const char* text, const char* allowed) {
  if (settings.invalid_message[0] != '\0') return;
  snprintf(settings.invalid_message, sizeof settings.invalid_message,
           "environment variable %s is '%.40s'; it must be %s", name, text, allowed);
}

/* A 0|1 variable: unset or empty keeps *value; anything else is reported. */
static void read_flag(const char* name, bool* value) {
  const char* text = getenv(name);
  if (text == NULL || text[0] == '\0') return;
  if (strcmp(text, "0") == 0 || strcmp(text, "1") == 0) {
    *value = text[0] == '1';
  } else {
    report_invalid(name, text, "0 or 1");
  }
}

/* A 0|1|auto variable: unset or empty keeps *mode. */
static void read_mode(const char* name, ember_mode* mode) {
  const char* text = getenv(name);
  if (text == NULL || text[0] == '\0') return;
  if (strcmp(text, "0") == 0) {
    *mode = EMBER_MODE_OFF;
  } else if (strcmp(text, "1") == 0) {
    *mode = EMBER_MODE_ON;
  } else if (strcmp(text, "auto") == 0) {
    *mode = EMBER_MODE_AUTO;
  } else {
    report_invalid(name, text, "0, 1 or auto");
  }
}

static void settings_read(void) {
  settings.executor = EMBER_EXECUTOR_AUTO;
  settings.cuda_graphs = true;
  settings.cuda_wgmma = true;
  settings.cuda_conv_nhwc_gemm = true;
  settings.cuda_conv_fold = true;
  settings.cuda_conv_halo = true;
  settings.cuda_conv_split_k = true;
  settings.cuda_branches = true;
  settings.cuda_gemm_wgmma = EMBER_MODE_AUTO;
  settings.cuda_gemm_narrow = EMBER_MODE_AUTO;
  settings.cuda_gemm_chain = false;
  settings.cuda_pdl = EMBER_MODE_AUTO;
  const char* executor = getenv("EMBER_EXECUTOR");
  if (executor != NULL && executor[0] != '\0') {
    if (strcmp(executor, "cpu") == 0) {
      settings.executor_forced = true;
      settings.executor = EMBER_EXECUTOR_CPU;
    } else if (strcmp(executor, "cuda") == 0) {
      settings.executor_forced = true;
      settings.executor = EMBER_EXECUTOR_CUDA;
    } else if (strcmp(executor, "auto") == 0) {
      settings.executor_forced = true;
      settings.executor = EMBER_EXECUTOR_AUTO;
    } else {
      report_invalid("EMBER_EXECUTOR", executor, "cpu, cuda or auto");
    }
  }
  read_flag("EMBER_CUDA_GRAPHS", &settings.cuda_graphs);
  read_flag("EMBER_CUDA_WGMMA", &settings.cuda_wgmma);
  read_mode("EMBER_CUDA_GEMM_WGMMA", &settings.cuda_gemm_wgmma);
  read_mode("EMBER_CUDA_GEMM_NARROW", &settings.cuda_gemm_narrow);
  read_flag("EMBER_CUDA_GEMM_CHAIN", &settings.cuda_gemm_chain);
  read_flag("EMBER_CUDA_CONV_NHWC_GEMM", &settings.cuda_conv_nhwc_gemm);
  read_flag("EMBER_CUDA_CONV_FOLD", &settings.cuda_conv_fold);
  read_flag("EMBER_CUDA_CONV_HALO", &settings.cuda_conv_halo);
  read_flag("EMBER_CUDA_CONV_SPLIT_K", &settings.cuda_conv_split_k);
  read_flag("EMBER_CUDA_BRANCHES", &settings.cuda_branches);
  read_mode("EMBER_CUDA_PDL", &settings.cuda_pdl);
  read_flag("EMBER_CUDA_PROFILE", &settings.cuda_profile);
}

const ember_settings* ember_settings_get(void) {
  /* pthread_once cannot fail for a valid once-control; the defaults stand if it did. */
  (void)pthread_once(&settings_once, settings_read);
  return &settings;
}
