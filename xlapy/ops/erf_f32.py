"""The coefficients of erfc and erf_inv on f32 (and narrower) values, shared by the two
places that evaluate them outside the interpreter: the chlo lowering's HLO
(passes/chlo_lowering.py, what the gpu backend runs) and the cpu backend's native ops
(backends/cpu/math_poly.Math.erfc, erf_inv).

erfc: below |x| = 1, 1 - x P(x^2) in f64, rounded once; above, Cephes' erfcf:
exp(-x^2) / |x| R(1 / x^2), one of two rational forms split at |x| = 2 (2 minus it for
x < 0). erf_inv: x p(w) with w = -log(1 - x^2) in f64, p one of two fits split at
w = 6.25 (in w - 3.125, then sqrt(w) - 3.25), rounded once. Tuples are highest power first.
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

#: erf_inv(x) / x for an f32 result, evaluated in f64: least-squares Chebyshev fits (against
#: scipy's erfinv / erfcinv) within 1.6e-10 of it. A in t = w - 3.125 for w = -log(1 - x^2)
#: < 6.25 (degree 13), B in t = sqrt(w) - 3.25 above (degree 10): an f32 x has w < 15.95, so
#: Giles' third series (w >= 16) never runs. His double-precision series take 23 terms.
ERFINV32_A = (1.287189699865165e-12, -1.2383879044398823e-11, -3.535310801309396e-11,
              1.030942950461133e-09, -4.248985352130893e-09, -2.889956406331629e-08,
              4.2401349536418936e-07, -1.3661197544780447e-06, -1.3883605686211862e-05,
              0.00018673533426001582, -0.0007407015649715809, -0.006033671586601557,
              0.24015818217396243, 1.6536545627563553)
ERFINV32_B = (-4.010652761926661e-05, 8.149882405596883e-05, 1.9031608490555694e-05,
              -0.0003613445079308357, 0.0009548072227801754, -0.001686860651888104,
              0.0024912374766989957, -0.003751342420625768, 0.005370924559515079,
              1.0052589713074183, 3.083885610413288)

__all__ = ["ERFC_P", "ERFC_R", "ERFINV32_A", "ERFINV32_B", "ERF_SMALL"]
