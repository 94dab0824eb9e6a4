"""The statistics of an eval report, small and exact enough to write out rather
than pull in SciPy for:

- ``wilson``: the Wilson score interval of a proportion (Wilson 1927), which
  keeps its coverage near 95 % at small n and at 0 or n successes, where the
  normal (Wald) interval collapses;
- ``mcnemar_exact``: McNemar's test on paired outcomes, exact (the two-sided
  binomial test of the discordant pairs at 1/2), right for the small numbers
  of discordant cases an eval has;
- ``paired_difference``: the difference of two paired accuracies with
  Newcombe's score interval for paired data (Newcombe 1998, method 10), which
  combines the two Wilson intervals with the correlation of the pairs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """(low, high) of the Wilson interval; (0, 1) when there is nothing to measure."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # Exactly 0 and 1 at the ends (the formula gives them up to a rounding).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided p-value from the discordant pairs: ``b`` cases only the first
    configuration got right, ``c`` only the second."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / float(2**n)
    return min(1.0, 2.0 * tail)


@dataclass(frozen=True)
class Paired:
    n: int  # cases both answered
    both: int  # a right, b right
    only_a: int  # a right, b wrong
    only_b: int
    neither: int
    diff: float  # accuracy of b minus accuracy of a
    low: float
    high: float
    p_value: float


def paired_difference(pairs: Sequence[tuple[bool, bool]]) -> Paired:
    """``pairs``: (a right, b right) per case; the difference is b − a."""
    n = len(pairs)
    both = sum(1 for a, b in pairs if a and b)
    only_a = sum(1 for a, b in pairs if a and not b)
    only_b = sum(1 for a, b in pairs if b and not a)
    neither = n - both - only_a - only_b
    p_value = mcnemar_exact(only_a, only_b)
    if n == 0:
        return Paired(0, 0, 0, 0, 0, 0.0, -1.0, 1.0, p_value)
    pa, pb = (both + only_a) / n, (both + only_b) / n
    la, ua = wilson(both + only_a, n)
    lb, ub = wilson(both + only_b, n)
    # phi: the correlation of the paired outcomes (0 when a margin is constant).
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    phi = (both * neither - only_a * only_b) / math.sqrt(margins) if margins else 0.0
    diff = pb - pa
    # b − a: the lower end takes b's lower and a's upper error, and vice versa.
    lower = math.sqrt(max(0.0, (pb - lb) ** 2 - 2 * phi * (pb - lb) * (ua - pa) + (ua - pa) ** 2))
    upper = math.sqrt(max(0.0, (ub - pb) ** 2 - 2 * phi * (ub - pb) * (pa - la) + (pa - la) ** 2))
    return Paired(
        n,
        both,
        only_a,
        only_b,
        neither,
        diff,
        max(-1.0, diff - lower),
        min(1.0, diff + upper),
        p_value,
    )


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100), linear between the closest ranks; 0 for none."""
    if not values:
        return 0.0
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass(frozen=True)
class ConfigFigures:
    """One configuration's figures over the cases: what the report and the plot show."""

    name: str
    spec: str
    n: int
    answered: int
    correct: int
    accuracy: float | None
    ci_low: float
    ci_high: float
    escalated: int
    failed: int
    cost_usd: float  # per case
    total_usd: float
    tokens: float  # per case
    p50_s: float
    p95_s: float
