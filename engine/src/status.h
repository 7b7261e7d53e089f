/* Internal helpers for building ember_status values.
 *
 * A status is one heap block holding the code and the message. When even that block
 * cannot be allocated, a static out-of-memory status is returned instead, so an error is
 * never lost; ember_status_free knows not to free it. */
#ifndef EMBER_SRC_STATUS_H_
#define EMBER_SRC_STATUS_H_

#include "ember/ember.h"

#if defined(__GNUC__)
#define EMBER_PRINTF_FORMAT(fmt_index, args_index) \
  __attribute__((format(printf, fmt_index, args_index)))
#else
#define EMBER_PRINTF_FORMAT(fmt_index, args_index)
#endif

/* A new status with `code` (which must not be EMBER_OK) and a printf-formatted message. */
ember_status* ember_status_make(ember_status_code code, const char* format, ...)
    EMBER_PRINTF_FORMAT(2, 3);

#define EMBER_RETURN_IF_ERROR(expr)       \
  do {                                    \
    ember_status* ember_status_ = (expr); \
    if (ember_status_ != NULL) {          \
      return ember_status_;               \
    }                                     \
  } while (0)

#endif /* EMBER_SRC_STATUS_H_ */
