"""Fits the polynomial of the CUDA kernels' GELU (erf form) for 16-bit outputs, and says
how it rounds.

kernel_common.cuh gelu_erf_16bit computes x·Φ(x) as max(x, 0) - |x|·Φ(-|x|), with
Φ(-a) = exp2(Q(a)) for a = |x| and Q a polynomial evaluated by Horner's rule in float32.
This script fits Q to log2(Φ(-a)) on [0, 13.2] by weighted minimax (Lawson's iteratively
reweighted least squares), each a weighted by how closely Φ(-a) must be known there for
the results at x = -a and x = +a to round right:

  - float16: to 2^-11 of the result, relatively (at most half its unit), where it is a
    normal number; to 2^-24, absolutely, where it is a denormal (below about -4);
  - bfloat16: to 2^-8 of the result down to -5; below, only to within TAIL_TOLERANCE
    (float16's denormals still bind until they round to zero, about -5.8).

Past 13.2 the exp2 of the kernel is 0 (it flushes denormals), and no clamp of a is
needed as long as Q's leading coefficient is negative (it then keeps falling), which
the script checks. It then evaluates the float32 coefficients as the kernel does (fused
multiply-adds, float32 roundings) at every float16 and bfloat16 input and counts the
results that round otherwise than the exact GELU (double precision, scipy's ndtr).

Usage: python tools/fit_gelu_erf.py [DEGREE]   (numpy and scipy; default degree 7)
"""

import sys

import numpy as np
from scipy.special import log_ndtr, ndtr

FIT_END = 13.2  # Φ(-13.2)·13.2 is under float32's smallest normal
BF16_TIGHT_END = 5.0  # bfloat16 results to their unit down to -5
TAIL_TOLERANCE = 32.0  # beyond it: weight 1/32 (Q within about 0.3 in log2)
NODES = 8000
ITERATIONS = 100

F32 = np.float32


def needed_relative_accuracy(a):
    """How closely Φ(-a) must be known, relatively, for the results at -a and +a."""
    phi = ndtr(-a)
    at_neg = a * phi  # |GELU(-a)|
    tiny = 1e-300
    f16_neg = np.maximum(2.0**-11, 2.0**-24 / np.maximum(at_neg, tiny))
    # GELU(a) = a - a·Φ(-a): an error e in Φ(-a) is e·Φ/(1 - Φ) of the result, relatively.
    f16_pos = np.where(phi > 0, 2.0**-11 * (1 - phi) / np.maximum(phi, tiny), np.inf)
    bf16_neg = np.where(a <= BF16_TIGHT_END, 2.0**-8, TAIL_TOLERANCE)
    bf16_pos = np.where(phi > 0, 2.0**-8 * (1 - phi) / np.maximum(phi, tiny), np.inf)
    return np.minimum.reduce([f16_neg, f16_pos, bf16_neg, bf16_pos])


def fit(degree):
    """Q's coefficients, highest power first, and the weighted error (1: at the bound)."""
    a = (1 - np.cos(np.linspace(0, np.pi, NODES))) * FIT_END / 2  # Chebyshev-spaced
    target = log_ndtr(-a) / np.log(2)
    weight = 1 / needed_relative_accuracy(a)
    vander = np.vander(a, degree + 1)
    lawson = np.ones(NODES)
    for _ in range(ITERATIONS):
        w = weight * lawson
        coefficients, *_ = np.linalg.lstsq(vander * w[:, None], target * w, rcond=None)
        error = np.abs(vander @ coefficients - target) * weight
        lawson = lawson * (error / error.max()) ** 0.5 + 1e-12
        lawson /= lawson.max()
    error = np.abs(vander @ coefficients - target) * np.log(2) * weight
    return coefficients, error.max()


def fma32(a, b, c):
    """float32 fused multiply-add (the product of two float32 values is exact in double)."""
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(F32)


def gelu_kernel(x, coefficients):
    """gelu_erf_16bit in float32, element by element."""
    a = np.abs(x)
    with np.errstate(all="ignore"):
        q = np.full_like(a, coefficients[0])
        for c in coefficients[1:]:
            q = fma32(a, q, np.full_like(a, c))
        phi = np.exp2(q.astype(np.float64)).astype(F32)
        phi[phi < 2.0**-126] = 0  # ex2.approx.ftz
        return fma32(-a, phi, np.maximum(x, F32(0)))


def ordered(bits):
    bits = bits.astype(np.int64)
    return np.where(bits & 0x8000, -(bits & 0x7FFF), bits)


def to_bf16_bits(v):
    b = v.astype(F32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def report(coefficients):
    patterns = np.arange(65536, dtype=np.uint16)
    x16 = patterns.view(np.float16)
    x16 = x16[np.isfinite(x16)]
    x = x16.astype(F32)
    exact = (x.astype(np.float64) * ndtr(x.astype(np.float64))).astype(np.float16)
    got = gelu_kernel(x, coefficients).astype(np.float16)
    units = np.abs(ordered(got.view(np.uint16)) - ordered(exact.view(np.uint16)))
    print(f"float16: {len(x)} finite inputs, {(units > 0).sum()} a unit off the exact value, "
          f"at most {units.max()} units")
    xb = (patterns.astype(np.uint32) << 16).view(np.float32)
    xb = xb[np.isfinite(xb)]
    with np.errstate(all="ignore"):
        exact_b = xb.astype(np.float64) * ndtr(xb.astype(np.float64))
    got_b = gelu_kernel(xb, coefficients)
    tight = xb >= -BF16_TIGHT_END
    units_b = np.abs(ordered(to_bf16_bits(got_b)) - ordered(to_bf16_bits(exact_b.astype(F32))))
    print(f"bfloat16: {tight.sum()} finite inputs from -{BF16_TIGHT_END:g}, "
          f"{(units_b[tight] > 0).sum()} a unit off, at most {units_b[tight].max()} units")
    tail = ~tight
    off = np.abs(got_b[tail] - exact_b[tail]) > 0.3 * np.abs(exact_b[tail]) + 2.0**-120
    print(f"  below -{BF16_TIGHT_END:g}: {off.sum()} of {tail.sum()} more than 30% or 2^-120 off")
    for lo, hi in ((-4.0, 14.0), (0.0, 14.0), (-5.0, -4.0)):
        xs = np.linspace(lo, hi, 2_000_001).astype(F32)
        e = xs.astype(np.float64) * ndtr(xs.astype(np.float64))
        g = gelu_kernel(xs, coefficients).astype(np.float64)
        nz = e != 0
        print(f"  [{lo:g}, {hi:g}]: within {np.max(np.abs(g - e)[nz] / np.abs(e[nz])):.2g} "
              "relatively")
    a = np.linspace(6.0, FIT_END, 100_000)
    q = np.polyval(np.array(coefficients, dtype=np.float64), a)
    factor = 2.0 ** np.max(np.abs(q - log_ndtr(-a) / np.log(2)))
    print(f"  below -6: within a factor of {factor:.2f} of the exact value")


def main(argv):
    degree = int(argv[1]) if len(argv) > 1 else 7
    coefficients, error = fit(degree)
    c32 = [F32(c) for c in coefficients]
    print(f"degree {degree}: weighted error {error:.3g} of the bound")
    print("coefficients, highest power first: " + ", ".join(f"{float(c):.9e}f" for c in c32))
    if c32[0] >= 0:
        print("the leading coefficient is not negative: the kernel would need a clamp of a")
        return 1
    report(c32)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
