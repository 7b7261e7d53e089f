/* float16 and bfloat16 <-> float32 conversions, round-to-nearest-even, in portable C.
 *
 * The CPU executor computes in float/double and converts on load and store, so a tensor's
 * dtype is a storage property only. NaN stays NaN (quieted); overflow rounds to infinity;
 * float16 subnormals are produced and read exactly. */
#ifndef EMBER_SRC_FLOAT_FORMATS_H_
#define EMBER_SRC_FLOAT_FORMATS_H_

#include <stdint.h>
#include <string.h>

static inline uint32_t ember_f32_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

static inline float ember_f32_from_bits(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static inline uint16_t ember_f32_to_f16(float value) {
  const uint32_t x = ember_f32_bits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t exponent = (x >> 23) & 0xffu;
  uint32_t mantissa = x & 0x7fffffu;
  if (exponent == 0xffu) {
    /* Infinity, or NaN kept quiet with the top payload bits. */
    return (uint16_t)(sign | 0x7c00u | (mantissa != 0 ? 0x200u | (mantissa >> 13) : 0u));
  }
  const int32_t half_exponent = (int32_t)exponent - 127 + 15;
  if (half_exponent >= 31) return (uint16_t)(sign | 0x7c00u);
  if (half_exponent <= 0) {
    /* Subnormal in float16 (or zero): below 2^-25 everything rounds to zero. */
    if (half_exponent < -10) return (uint16_t)sign;
    mantissa |= 0x800000u;
    const uint32_t shift = (uint32_t)(14 - half_exponent);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half & 1u) != 0)) ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)half_exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  /* A carry out of the mantissa bumps the exponent, up to infinity: still correct. */
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0)) ++half;
  return (uint16_t)(sign | half);
}

static inline float ember_f16_to_f32(uint16_t half) {
  const uint32_t sign = ((uint32_t)half & 0x8000u) << 16;
  const uint32_t exponent = ((uint32_t)half >> 10) & 0x1fu;
  uint32_t mantissa = (uint32_t)half & 0x3ffu;
  if (exponent == 0x1fu) return ember_f32_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return ember_f32_from_bits(sign);
    /* Subnormal: normalize into a float32 normal. */
    int32_t e = 1;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    mantissa &= 0x3ffu;
    return ember_f32_from_bits(sign | ((uint32_t)(e + 112) << 23) | (mantissa << 13));
  }
  return ember_f32_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

static inline uint16_t ember_f32_to_bf16(float value) {
  const uint32_t x = ember_f32_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)((x + rounding) >> 16);
}

static inline float ember_bf16_to_f32(uint16_t value) {
  return ember_f32_from_bits((uint32_t)value << 16);
}

#endif /* EMBER_SRC_FLOAT_FORMATS_H_ */
