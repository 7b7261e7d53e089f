/* Shapes as text, for error messages: "[2, 3, 4]". */
#ifndef EMBER_SRC_SHAPE_TEXT_H_
#define EMBER_SRC_SHAPE_TEXT_H_

#include <stddef.h>
#include <stdint.h>

/* Enough for EMBER_MAX_RANK dims of 20 digits and a sign each, with separators. */
#define EMBER_SHAPE_TEXT_SIZE 200u

typedef struct ember_shape_text {
  char text[EMBER_SHAPE_TEXT_SIZE];
} ember_shape_text;

/* Formats dims[0..rank) (rank is clamped to EMBER_MAX_RANK). Returns out->text. */
const char* ember_shape_text_format(const int64_t* dims, uint32_t rank, ember_shape_text* out);

#endif /* EMBER_SRC_SHAPE_TEXT_H_ */
