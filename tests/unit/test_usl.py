"""The Universal Scalability Law fit (analysis/usl.py): pure arithmetic, no server.

Points generated from known λ, σ, κ with multiplicative noise must give intervals that hold
the true values about as often as they claim (95 %), an exact fit must recover the values,
and a projection beyond 2 x the largest N measured is refused."""

from __future__ import annotations

import numpy as np
import pytest

from openslob.analysis import usl
from openslob.report.scalingplot import scaling
from openslob.report.scalingtable import render_text

LAM, SIGMA, KAPPA = 1000.0, 0.05, 0.002


def law(n: float, lam: float = LAM, sigma: float = SIGMA, kappa: float = KAPPA) -> float:
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def noisy(seed: int, counts: range = range(1, 9), repeats: int = 3, cv: float = 0.02):
    rng = np.random.default_rng(seed)
    return [(n, law(n) * (1 + cv * rng.standard_normal())) for n in counts for _ in range(repeats)]


def test_exact_points_are_recovered() -> None:
    fit = usl.fit([(n, law(n)) for n in range(1, 7)])
    assert fit is not None and fit.dof == 3
    assert fit.lam.value == pytest.approx(LAM, rel=1e-9)
    assert fit.sigma.value == pytest.approx(SIGMA, rel=1e-7)
    assert fit.kappa.value == pytest.approx(KAPPA, rel=1e-6)
    assert fit.peak_n() == pytest.approx(((1 - SIGMA) / KAPPA) ** 0.5)


def test_noisy_points_hold_the_true_values_in_their_interval() -> None:
    fit = usl.fit(noisy(seed=7))
    assert fit is not None and fit.dof == 24 - 3 and fit.note is None
    for estimate, true in ((fit.lam, LAM), (fit.sigma, SIGMA), (fit.kappa, KAPPA)):
        assert estimate.low is not None and estimate.high is not None
        assert estimate.low < true < estimate.high
        assert estimate.low < estimate.value < estimate.high


def test_the_intervals_cover_as_often_as_they_claim() -> None:
    """Over 120 noisy samples the 95 % intervals of σ, κ and of the curve at N = 5 hold the
    truth 85–100 % of the time: an interval computed wrongly (no t factor, a wrong
    covariance) misses far more."""
    held = np.zeros(3)
    trials = 120
    for seed in range(trials):
        fit = usl.fit(noisy(seed, range(1, 7), repeats=2))
        assert fit is not None and fit.sigma.low is not None and fit.kappa.low is not None
        low, high = fit.interval(5) or (0.0, 0.0)
        held += [
            fit.sigma.low <= SIGMA <= fit.sigma.high,
            fit.kappa.low <= KAPPA <= fit.kappa.high,
            low <= law(5) <= high,
        ]
    assert all(0.85 <= h / trials <= 1.0 for h in held), held


def test_as_many_runs_as_parameters_give_no_interval() -> None:
    fit = usl.fit([(1, 100.0), (2, 190.0), (3, 260.0)])
    assert fit is not None and fit.dof == 0
    assert fit.sigma.low is None and fit.interval(3) is None
    assert "3 runs for 3 parameters" in (fit.note or "")
    assert fit.throughput(3) == pytest.approx(260.0, rel=1e-6)
    projection = usl.project(fit, 4)
    assert projection.low is None and "extrapolated" in (projection.note or "")


def test_fewer_than_three_instance_counts_cannot_be_fitted() -> None:
    assert usl.fit([(1, 100.0), (1, 101.0), (2, 180.0), (2, 181.0)]) is None


def test_projection_interval_and_the_2x_limit() -> None:
    fit = usl.fit(noisy(seed=3, counts=range(1, 5)))
    assert fit is not None and fit.max_n == 4
    inside = usl.project(fit, 4)
    assert inside.note is None and inside.low < inside.throughput < inside.high
    far = usl.project(fit, 8)
    assert far.note and "extrapolated" in far.note
    assert far.high - far.low > inside.high - inside.low  # wider away from the data
    assert far.efficiency == pytest.approx(far.throughput / (8 * fit.lam.value))
    with pytest.raises(usl.ProjectionError, match=r"--project 9: allowed 1 to 8"):
        usl.project(fit, 9)


@pytest.mark.parametrize(
    ("dof", "expected"), [(1, 12.7062), (2, 4.3027), (3, 3.1824), (10, 2.2281), (30, 2.0423)]
)
def test_t_quantiles_match_the_tables(dof: int, expected: float) -> None:
    assert usl.t_quantile(0.975, dof) == pytest.approx(expected, abs=2e-4)


def test_text_and_figure_of_a_fitted_curve() -> None:
    """The table prints the fit and the projection with its interval; the figure draws."""
    from openslob.analysis.scaling import ScalePoint, ScalingCurve, Spread

    samples = noisy(seed=5, counts=range(1, 4), repeats=2)
    curve = ScalingCurve("synthetic", {"UPDATE_PCT": 0}, "slobops_per_s", samples=samples)
    none = {k: None for k in ("iops", "mb_per_s", "db_read_us", "op_p99_us")}
    for n in (1, 2, 3):
        xs = [x for m, x in samples if m == n]
        curve.points.append(
            ScalePoint(
                n,
                ["r"] * len(xs),
                float(np.median(xs)),
                dict(none),
                {k: Spread(None, None, None) for k in none},
            )
        )
    curve.fit = usl.fit(samples)
    assert curve.fit is not None
    curve.projection = usl.project(curve.fit, 6)
    text = render_text([curve])
    assert "USL X(N)" in text and "Projection at N = 6" in text and "(95 %)" in text
    assert "EXTRAPOLATED BEYOND THE LARGEST N MEASURED (3)" in text
    assert "n/a" in text  # the figures not measured
    fig = scaling([curve])
    left = fig.axes[0]
    assert len(left.collections) >= 2  # the runs and the 95 % band


def test_no_projection_past_the_pole_of_a_superlinear_fit() -> None:
    """κ < 0 (faster than linear where measured) sends the law to infinity further out:
    no number is projected past that point, and the reason is given."""
    points = [(n, law(n, 100.0, 0.0, -0.04)) for n in (1, 2, 3) for _ in range(2)]
    fit = usl.fit(points)
    assert fit is not None and fit.kappa.value == pytest.approx(-0.04, rel=1e-4)
    assert "outside the law's physical range" in (fit.note or "")
    assert usl.project(fit, 5).throughput == pytest.approx(law(5, 100.0, 0.0, -0.04), rel=1e-3)
    beyond = usl.project(fit, 6)
    assert beyond.throughput is None and beyond.efficiency is None
    assert "reaches 0 at N = 5.52" in (beyond.note or "")
