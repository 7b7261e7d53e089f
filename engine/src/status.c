/* ember_status: an error code and a message in one heap block. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

struct ember_status {
  ember_status_code code;
  char* message; /* points just past this struct, into the same block */
};

/* Returned when the block for a real status cannot be allocated. Never freed. */
static ember_status ember_status_out_of_memory = {
    EMBER_OUT_OF_MEMORY,
    (char*)"out of memory (while reporting another error)",
};

static ember_status* ember_status_allocate(ember_status_code code, size_t message_length) {
  if (message_length > SIZE_MAX - sizeof(ember_status) - 1) return &ember_status_out_of_memory;
  ember_status* status = malloc(sizeof(ember_status) + message_length + 1);
  if (status == NULL) return &ember_status_out_of_memory;
  status->code = code;
  status->message = (char*)(status + 1);
  status->message[0] = '\0';
  return status;
}

static ember_status* ember_status_vmake(ember_status_code code, const char* format,
                                        va_list args) {
  va_list measure_args;
  va_copy(measure_args, args);
  int measured = vsnprintf(NULL, 0, format, measure_args);
  va_end(measure_args);
  size_t length = measured > 0 ? (size_t)measured : 0;
  ember_status* status = ember_status_allocate(code, length);
  if (status == &ember_status_out_of_memory) return status;
  vsnprintf(status->message, length + 1, format, args);
  status->message[length] = '\0';
  return status;
}

ember_status* ember_status_make(ember_status_code code, const char* format, ...) {
  if (code == EMBER_OK) code = EMBER_INTERNAL; /* an error must never read as success */
  va_list args;
  va_start(args, format);
  ember_status* status = ember_status_vmake(code, format, args);
  va_end(args);
  return status;
}

ember_status_code ember_status_code_of(const ember_status* status) {
  return status == NULL ? EMBER_OK : status->code;
}

const char* ember_status_message(const ember_status* status) {
  return status == NULL ? "ok" : status->message;
}

void ember_status_free(ember_status* status) {
  if (status == NULL || status == &ember_status_out_of_memory) return;
  free(status);
}

const char* ember_status_code_name(ember_status_code code) {
  switch (code) {
    case EMBER_OK: return "EMBER_OK";
    case EMBER_INVALID_ARGUMENT: return "EMBER_INVALID_ARGUMENT";
    case EMBER_INVALID_PLAN: return "EMBER_INVALID_PLAN";
    case EMBER_UNSUPPORTED_VERSION: return "EMBER_UNSUPPORTED_VERSION";
    case EMBER_OUT_OF_MEMORY: return "EMBER_OUT_OF_MEMORY";
    case EMBER_UNAVAILABLE: return "EMBER_UNAVAILABLE";
    case EMBER_INTERNAL: return "EMBER_INTERNAL";
  }
  return "unknown";
}
