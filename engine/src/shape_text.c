/* Shapes as text, for error messages. */
#include "shape_text.h"

#include <inttypes.h>
#include <stdio.h>

#include "ember/ember.h"

const char* ember_shape_text_format(const int64_t* dims, uint32_t rank, ember_shape_text* out) {
  size_t used = 0;
  out->text[0] = '\0';
  if (rank > EMBER_MAX_RANK) rank = EMBER_MAX_RANK;
  used += (size_t)snprintf(out->text, sizeof out->text, "[");
  for (uint32_t i = 0; i < rank && dims != NULL && used < sizeof out->text; ++i) {
    used += (size_t)snprintf(out->text + used, sizeof out->text - used, "%s%" PRId64,
                             i == 0 ? "" : ", ", dims[i]);
  }
  if (used < sizeof out->text) snprintf(out->text + used, sizeof out->text - used, "]");
  return out->text;
}
