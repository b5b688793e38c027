"""The coefficients of erfc on f32 (and narrower) values, shared by the two places that
evaluate it outside the interpreter: the chlo lowering's HLO (passes/chlo_lowering.py, what
the gpu backend runs) and the cpu backend's native erfc (backends/cpu/math_poly.Math.erfc).

Below |x| = 1 erfc = 1 - x P(x^2) in f64, rounded once; above, Cephes' erfcf:
exp(-x^2) / |x| R(1 / x^2), one of two rational forms split at |x| = 2 (2 minus it for
x < 0). Tuples are highest power first.
"""

from __future__ import annotations

#: Cephes' erfcf numerator for 1 <= |x| < 2, in w = 1 / x^2.
ERFC_P = (2.326819970068386e-2, -1.387039388740657e-1, 3.687424674597105e-1,
          -5.824733027278666e-1, 6.210004621745983e-1, -4.944515323274145e-1,
          3.404879937665872e-1, -2.741127028184656e-1, 5.638259427386472e-1)
#: The same for |x| >= 2.
ERFC_R = (-1.047766399936249e1, 1.297719955372516e1, -7.495518717768503e0,
          2.921019019210786e0, -1.015265279202700e0, 4.218463358204948e-1,
          -2.820767439740514e-1, 5.641895067754075e-1)
#: erf(x) / x as a polynomial in z = x^2 on [0, 1]: a least-squares Chebyshev fit (degree
#: 7, 40000 Chebyshev nodes, against scipy's f64 erf) within 3.8e-11 of it; the Taylor
#: series needs 11 terms for 2e-10 at |x| = 1.
ERF_SMALL = (-9.673590735499876e-06, 0.00011268253859969577, -0.0008484396544856385,
             0.005221053412078031, -0.026865438310333833, 0.11283782622058972,
             -0.3761263847599112, 1.1283791670623613)

__all__ = ["ERFC_P", "ERFC_R", "ERF_SMALL"]
