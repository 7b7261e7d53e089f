/* float16/bfloat16 conversions (src/float_formats.h) against a table made in Python:
 * float16 by CPython's own packer, bfloat16 by exact comparison of the two neighbours.
 *
 * Usage: test_float_formats DATA_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "float_formats.h"
#include "test_support.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
    return 2;
  }
  char* path = test_join(argv[1], "float_formats.bin", "");
  size_t size;
  uint8_t* data = test_read_file(path, &size);
  const uint8_t* p = data;
  int checks = 0;
  uint32_t count;
  memcpy(&count, p, 4);
  p += 4;
  for (uint32_t i = 0; i < count; ++i, p += 8) {
    uint32_t bits;
    uint16_t want_f16, want_bf16;
    memcpy(&bits, p, 4);
    memcpy(&want_f16, p + 4, 2);
    memcpy(&want_bf16, p + 6, 2);
    const float value = ember_f32_from_bits(bits);
    const uint16_t f16 = ember_f32_to_f16(value);
    const uint16_t bf16 = ember_f32_to_bf16(value);
    checks += 2;
    CHECK(f16 == want_f16, "f32 0x%08x (%.9g) -> f16 0x%04x, expected 0x%04x", bits, value, f16,
          want_f16);
    CHECK(bf16 == want_bf16, "f32 0x%08x (%.9g) -> bf16 0x%04x, expected 0x%04x", bits, value,
          bf16, want_bf16);
  }
  uint32_t halves;
  memcpy(&halves, p, 4);
  p += 4;
  for (uint32_t i = 0; i < halves; ++i, p += 6) {
    uint16_t half;
    uint32_t want;
    memcpy(&half, p, 2);
    memcpy(&want, p + 2, 4);
    const uint32_t have = ember_f32_bits(ember_f16_to_f32(half));
    ++checks;
    CHECK(have == want, "f16 0x%04x -> f32 0x%08x, expected 0x%08x", half, have, want);
    /* Every float16 survives a round trip through float32. */
    ++checks;
    CHECK(ember_f32_to_f16(ember_f16_to_f32(half)) == half, "f16 0x%04x round trip", half);
  }
  /* bfloat16 -> float32 is a shift; spot-check and round-trip all non-NaN patterns. */
  for (uint32_t b = 0; b < 65536; ++b) {
    if ((b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0) continue;
    ++checks;
    CHECK(ember_f32_to_bf16(ember_bf16_to_f32((uint16_t)b)) == b, "bf16 0x%04x round trip", b);
  }
  /* NaN stays NaN, by class. */
  const float nan_value = ember_f32_from_bits(0x7fc00001u);
  const float snan_value = ember_f32_from_bits(0xff800001u);
  checks += 4;
  CHECK(isnan(ember_f16_to_f32(ember_f32_to_f16(nan_value))), "quiet NaN -> f16");
  CHECK(isnan(ember_f16_to_f32(ember_f32_to_f16(snan_value))), "signalling NaN -> f16");
  CHECK(isnan(ember_bf16_to_f32(ember_f32_to_bf16(nan_value))), "quiet NaN -> bf16");
  CHECK(isnan(ember_bf16_to_f32(ember_f32_to_bf16(snan_value))), "signalling NaN -> bf16");
  printf("%u float32 values, %u float16 values\n", count, halves);
  free(data);
  free(path);
  return test_finish("test_float_formats", checks);
}
