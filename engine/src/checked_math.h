/* Overflow-checked size arithmetic. Every size, offset or product computed from plan
 * bytes or caller input goes through these; each returns false (leaving *out untouched)
 * when the exact result does not fit. */
#ifndef EMBER_SRC_CHECKED_MATH_H_
#define EMBER_SRC_CHECKED_MATH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool ember_checked_add_u64(uint64_t a, uint64_t b, uint64_t* out) {
  if (a > UINT64_MAX - b) return false;
  *out = a + b;
  return true;
}

static inline bool ember_checked_mul_u64(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return false;
  *out = a * b;
  return true;
}

/* Rounds `value` up to a multiple of `alignment`, a power of two. */
static inline bool ember_checked_align_u64(uint64_t value, uint64_t alignment, uint64_t* out) {
  uint64_t bumped;
  if (!ember_checked_add_u64(value, alignment - 1, &bumped)) return false;
  *out = bumped & ~(alignment - 1);
  return true;
}

/* Narrows a u64 to size_t (a no-op check on 64-bit hosts, real on 32-bit ones). */
static inline bool ember_u64_to_size(uint64_t value, size_t* out) {
  if (value > (uint64_t)SIZE_MAX) return false;
  *out = (size_t)value;
  return true;
}

/* Whether [a_begin, a_begin + a_size) and [b_begin, b_begin + b_size) share a byte. The
 * ends must already be known not to overflow. Empty ranges share nothing. */
static inline bool ember_ranges_overlap(uint64_t a_begin, uint64_t a_size, uint64_t b_begin,
                                        uint64_t b_size) {
  if (a_size == 0 || b_size == 0) return false;
  return a_begin < b_begin + b_size && b_begin < a_begin + a_size;
}

#endif /* EMBER_SRC_CHECKED_MATH_H_ */
