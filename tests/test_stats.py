import math

from harness.stats import intervals_overlap, mad, median, median_ci, summarize


def test_median_and_mad():
    assert median([3, 1, 2]) == 2 and median([4, 1, 3, 2]) == 2.5
    assert math.isclose(mad([1, 2, 3, 4, 100]), 1.4826)


def test_median_ci_is_the_exact_binomial_interval():
    xs = list(range(1, 21))  # n = 20: the 95% interval is the 6th..15th order statistic
    assert median_ci(xs) == (6, 15)
    assert all(math.isnan(v) for v in median_ci([1, 2, 3]))


def test_summary_and_overlap():
    s = summarize([1.0] * 9 + [2.0])
    assert s.median == 1.0 and s.jitter == 0.0 and s.n == 10
    assert intervals_overlap((1, 2), (1.5, 3)) and not intervals_overlap((1, 2), (2.5, 3))
