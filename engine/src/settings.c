/* Settings from the environment, read once (settings.h). */
#include "settings.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static ember_settings settings;

static void settings_read(void) {
  settings.executor = EMBER_EXECUTOR_AUTO;
  settings.cuda_graphs = true;
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
      snprintf(settings.invalid_message, sizeof settings.invalid_message,
               "environment variable EMBER_EXECUTOR is '%.40s'; it must be cpu, cuda or auto",
               executor);
    }
  }
  const char* graphs = getenv("EMBER_CUDA_GRAPHS");
  if (graphs != NULL && graphs[0] != '\0') {
    if (strcmp(graphs, "0") == 0) {
      settings.cuda_graphs = false;
    } else if (strcmp(graphs, "1") != 0 && settings.invalid_message[0] == '\0') {
      snprintf(settings.invalid_message, sizeof settings.invalid_message,
               "environment variable EMBER_CUDA_GRAPHS is '%.40s'; it must be 0 or 1", graphs);
    }
  }
}

const ember_settings* ember_settings_get(void) {
  /* pthread_once cannot fail for a valid once-control; the defaults stand if it did. */
  (void)pthread_once(&settings_once, settings_read);
  return &settings;
}
