"""Robust statistics for timing samples: medians, distribution-free intervals, jitter.

Iteration times are skewed (a slow iteration is far commoner than a fast one), so the
centre is the median and its 95% interval comes from order statistics (no normality
assumption); jitter is the scaled median absolute deviation relative to the median.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if not n:
        return math.nan
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def error_medians(errors: list[float]) -> tuple[float, float]:
    """Median |error| and median signed error (which way a prediction leans)."""
    return median([abs(e) for e in errors]), median(errors)


def spread(xs: list[float]) -> float:
    """Slowest / fastest - 1 of one configuration's measured times (its replicates in a
    sweep, or its runs over repeats of the sweep): how far one draw of the machine alone
    can be from another, in the units of a prediction's error (0.0 for fewer than two)."""
    return max(xs) / min(xs) - 1 if len(xs) > 1 else 0.0


def quantile(xs: list[float], q: float) -> float:
    """The q-quantile of xs, linear between ranks (0.0 for none)."""
    s = sorted(xs)
    if not s:
        return 0.0
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def median_ci(xs: list[float], level: float = 0.95) -> tuple[float, float]:
    """Order-statistic interval for the median (exact binomial; (nan, nan) if n < 6)."""
    s = sorted(xs)
    n = len(s)
    if n < 6:
        return math.nan, math.nan
    alpha = (1 - level) / 2
    if n > 1000:  # normal approximation of the binomial
        half = 0.5 * 1.959964 * math.sqrt(n)
        lo, hi = int(math.floor(n / 2 - half)), int(math.ceil(n / 2 + half))
        return s[max(lo, 0)], s[min(hi, n - 1)]
    k = 0
    while _binom_cdf(k + 1, n) <= alpha:
        k += 1
    return s[k], s[n - 1 - k]


def mad(xs: list[float]) -> float:
    m = median(xs)
    return 1.4826 * median([abs(x - m) for x in xs])


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    ci_low: float
    ci_high: float
    jitter: float  # scaled MAD / median


def summarize(xs: list[float]) -> Summary:
    m = median(xs)
    lo, hi = median_ci(xs)
    return Summary(len(xs), m, lo, hi, mad(xs) / m if m else math.nan)


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    if any(math.isnan(v) for v in (*a, *b)):
        return True
    return a[0] <= b[1] and b[0] <= a[1]


def least_squares(rows: list[list[float]], ys: list[float]) -> list[float] | None:
    """The coefficients x minimising the sum of (y - row . x)^2 over rows and ys (normal
    equations, scaled to a unit diagonal and solved with partial pivoting); None where the
    columns are (nearly) dependent, so the points cannot tell their coefficients apart."""
    m = len(rows[0]) if rows else 0
    if not m:
        return None
    a = [[sum(r[i] * r[j] for r in rows) for j in range(m)]
         + [sum(r[i] * y for r, y in zip(rows, ys))] for i in range(m)]
    scale = [math.sqrt(a[i][i]) or 1.0 for i in range(m)]
    # a unit diagonal, so that "nearly dependent" means the same in any units
    a = [[a[i][j] / (scale[i] * scale[j]) for j in range(m)] + [a[i][m] / scale[i]]
         for i in range(m)]
    for col in range(m):
        piv = max(range(col, m), key=lambda i: abs(a[i][col]))
        if abs(a[piv][col]) <= 1e-12:
            return None
        a[col], a[piv] = a[piv], a[col]
        for i in range(m):
            if i != col:
                f = a[i][col] / a[col][col]
                a[i] = [x - f * y for x, y in zip(a[i], a[col])]
    return [a[i][m] / a[i][i] / scale[i] for i in range(m)]
