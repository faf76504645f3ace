"""Gunther's Universal Scalability Law fitted to measured points, with its uncertainty.

    X(N) = λ·N / (1 + σ·(N − 1) + κ·N·(N − 1))

N is the number of instances, X the throughput measured with N of them, λ the throughput of
one (the fit's, not the measured X(1): every point informs it), σ the contention (the
serial share) and κ the coherency cost (crosstalk between every pair of instances). σ = κ = 0
is a straight line; κ > 0 gives a peak at N* = √((1 − σ) / κ).

The fit is ordinary nonlinear least squares on every run (each repeat is a point of its own,
so repeats give the residuals their degrees of freedom), by Levenberg–Marquardt in numpy,
started from Gunther's linearisation N/C(N) − 1 = σ·(N − 1) + κ·N·(N − 1) (C = X/X(1)).
The covariance of (λ, σ, κ) is s²·(JᵀJ)⁻¹ with s² = RSS / (m − 3); a 95 % interval is the
estimate ± t(0.975, m − 3)·standard error (Student's t, computed here: no scipy). A
projection X(N) carries the interval of the fitted curve at N (the delta method: gᵀ·Cov·g
with g the gradient of X(N) in the parameters): the uncertainty of the law's curve, not of
one future run. With no degrees of freedom left (m ≤ 3 runs) the fit passes through the
points and no interval can be estimated: it is None, with that reason. Fewer than 3
distinct N leave the three parameters undetermined: no fit at all.

A projection beyond 2 × the largest N measured is refused (ProjectionError): the law is a
model of the measured range, and the seeds' "take my word for 128 hosts" is what this tool
exists to replace.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from openslob.model.errors import ConfigError

LEVEL = 0.95
MAX_EXTRAPOLATION = 2.0  # a projection may reach this multiple of the largest N measured
_PARAMS = 3


class ProjectionError(ConfigError):
    """A projection the measured range does not support (bad input: exit 2)."""


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float | None  # the 95 % interval; None without degrees of freedom
    high: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class UslFit:
    lam: Estimate  # throughput of one instance (the fit's)
    sigma: Estimate
    kappa: Estimate
    runs: int  # points fitted
    dof: int  # runs - 3
    rss: float
    r2: float | None
    max_n: int  # largest N measured
    covariance: tuple[tuple[float, ...], ...] | None  # of (λ, σ, κ); None with dof 0
    note: str | None  # why there is no interval, or a fit outside σ, κ >= 0

    def throughput(self, n: float) -> float:
        return float(_model(np.array([float(n)]), self._params())[0])

    def interval(self, n: float) -> tuple[float, float] | None:
        """The 95 % interval of the fitted curve at n; None without degrees of freedom."""
        if self.covariance is None or self.dof < 1:
            return None
        grad = _jacobian(np.array([float(n)]), self._params())[0]
        var = float(grad @ np.array(self.covariance) @ grad)
        half = t_quantile(0.5 + LEVEL / 2, self.dof) * math.sqrt(max(var, 0.0))
        value = self.throughput(n)
        return float(value - half), float(value + half)

    def pole_before(self, n: float) -> float | None:
        """The first N in [1, n] where 1 + σ(N−1) + κN(N−1) <= 0 (a law with σ or κ below 0
        goes to infinity there), else None."""
        s, k = self.sigma.value, self.kappa.value
        # κN² + (σ − κ)N + (1 − σ) = 0
        roots = np.roots([k, s - k, 1 - s]) if k else np.array([(s - 1) / s] if s else [])
        real = sorted(float(r.real) for r in np.atleast_1d(roots) if abs(r.imag) < 1e-12)
        return next((r for r in real if 1 <= r <= n), None)

    def peak_n(self) -> float | None:
        """N* where the fitted throughput peaks (κ > 0 and σ < 1), else None."""
        s, k = self.sigma.value, self.kappa.value
        return math.sqrt((1 - s) / k) if k > 0 and s < 1 else None

    def _params(self) -> np.ndarray:
        return np.array([self.lam.value, self.sigma.value, self.kappa.value])

    def as_dict(self) -> dict[str, object]:
        return {
            "model": "X(N) = lambda*N / (1 + sigma*(N-1) + kappa*N*(N-1))",
            "level": LEVEL,
            "lambda": self.lam.as_dict(),
            "sigma": self.sigma.as_dict(),
            "kappa": self.kappa.as_dict(),
            "runs": self.runs,
            "dof": self.dof,
            "rss": self.rss,
            "r2": self.r2,
            "peak_n": self.peak_n(),
            "note": self.note,
        }


@dataclass(frozen=True)
class Projection:
    n: int
    throughput: float | None  # None: the fitted law cannot reach n (a pole before it)
    low: float | None
    high: float | None
    efficiency: float | None  # X(n) / (n * λ)
    note: str | None

    def as_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "throughput": self.throughput,
            "low": self.low,
            "high": self.high,
            "efficiency": self.efficiency,
            "note": self.note,
        }


def _model(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    lam, sigma, kappa = p
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def _jacobian(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    lam, sigma, kappa = p
    denom = 1 + sigma * (n - 1) + kappa * n * (n - 1)
    return np.column_stack(
        (n / denom, -lam * n * (n - 1) / denom**2, -lam * n * n * (n - 1) / denom**2)
    )


def _start(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Gunther's linearisation around the smallest N's mean throughput per instance."""
    smallest = n.min()
    lam = float(x[n == smallest].mean() / smallest)
    more = n > 1
    if lam <= 0 or more.sum() < 2:
        return np.array([max(lam, 1e-9), 0.0, 0.0])
    y = n[more] / (x[more] / lam) - 1
    design = np.column_stack((n[more] - 1, n[more] * (n[more] - 1)))
    (sigma, kappa), *_ = np.linalg.lstsq(design, y, rcond=None)
    return np.array([lam, max(float(sigma), 0.0), max(float(kappa), 0.0)])


def _levenberg_marquardt(n: np.ndarray, x: np.ndarray, p: np.ndarray) -> np.ndarray:
    def rss(q: np.ndarray) -> float:
        denom = 1 + q[1] * (n - 1) + q[2] * n * (n - 1)
        if np.any(denom <= 0):
            return math.inf  # the law has a pole inside the measured range: not a candidate
        return float(np.sum((x - _model(n, q)) ** 2))

    damping, current = 1e-3, rss(p)
    for _ in range(500):
        jac = _jacobian(n, p)
        normal = jac.T @ jac
        step = np.linalg.solve(
            normal + damping * np.diag(np.diag(normal) + 1e-30), jac.T @ (x - _model(n, p))
        )
        trial = p + step
        value = rss(trial)
        if value < current:
            done = current - value <= 1e-15 * max(current, 1e-300)
            p, current, damping = trial, value, max(damping / 10, 1e-12)
            if done or np.all(np.abs(step) <= 1e-12 * (np.abs(p) + 1e-12)):
                break
        else:
            damping *= 10
            if damping > 1e12:
                break
    return p


def fit(points: Sequence[tuple[int, float]]) -> UslFit | None:
    """The USL fitted to (N, throughput) points; None with fewer than 3 distinct N or no
    positive throughput (the parameters are then not determined)."""
    usable = [(n, x) for n, x in points if n >= 1 and x is not None and x > 0]
    if len({n for n, _ in usable}) < _PARAMS:
        return None
    n = np.array([float(a) for a, _ in usable])
    x = np.array([float(b) for _, b in usable])
    scale = float(x.max())  # fitted on X / max(X): the numbers stay near 1
    p = _levenberg_marquardt(n, x / scale, _start(n, x / scale))
    residuals = x / scale - _model(n, p)
    rss = float(residuals @ residuals)
    dof = len(usable) - _PARAMS
    spread = float(np.sum((x / scale - (x / scale).mean()) ** 2))
    covariance, note = None, None
    if dof >= 1:
        jac = _jacobian(n, p)
        try:
            covariance = np.linalg.inv(jac.T @ jac) * (rss / dof)
        except np.linalg.LinAlgError:
            note = "the points do not determine σ and κ apart (singular fit): no interval"
    else:
        note = (
            f"{len(usable)} runs for 3 parameters: the law passes through the points and "
            "leaves nothing to estimate its uncertainty from; repeat the points (--repeat) "
            "or measure more instance counts"
        )
    if note is None and (p[1] < 0 or p[2] < 0):
        note = (
            "σ or κ below 0, outside the law's physical range (σ, κ >= 0): few or noisy "
            "points, or faster than linear somewhere (caches)"
        )
    units = np.array([scale, 1.0, 1.0])
    estimates = []
    for i in range(_PARAMS):
        value = float(p[i] * units[i])
        if covariance is None:
            estimates.append(Estimate(value, None, None))
            continue
        half = t_quantile(0.5 + LEVEL / 2, dof) * math.sqrt(max(covariance[i, i], 0.0))
        low, high = value - half * units[i], value + half * units[i]
        estimates.append(Estimate(value, float(low), float(high)))
    scaled_cov = None
    if covariance is not None:
        scaled_cov = tuple(
            tuple(float(covariance[i, j] * units[i] * units[j]) for j in range(_PARAMS))
            for i in range(_PARAMS)
        )
    return UslFit(
        lam=estimates[0],
        sigma=estimates[1],
        kappa=estimates[2],
        runs=len(usable),
        dof=dof,
        rss=rss * scale * scale,
        r2=1 - rss / spread if spread > 0 else None,
        max_n=int(n.max()),
        covariance=scaled_cov,
        note=note,
    )


def project(usl: UslFit, n: int) -> Projection:
    """X(n) with the curve's 95 % interval; ProjectionError beyond 2 x the largest N."""
    limit = int(MAX_EXTRAPOLATION * usl.max_n)
    if n < 1 or n > limit:
        raise ProjectionError(
            f"--project {n}: allowed 1 to {limit} (2 x the largest instance count measured, "
            f"{usl.max_n}); beyond it the law is a guess, not a measurement: measure more "
            "instances"
        )
    pole = usl.pole_before(n)
    if pole is not None:
        note: str | None = (
            f"no projection: the fitted law's denominator reaches 0 at N = {pole:.2f} "
            "(kappa or sigma below 0: faster than linear where measured, which it cannot "
            "stay); measure more instances or repeat the points"
        )
        return Projection(n, None, None, None, None, note)
    value = usl.throughput(n)
    interval = usl.interval(n)
    note = usl.note if interval is None else None
    if n > usl.max_n:
        note = f"extrapolated beyond the largest N measured ({usl.max_n})" + (
            f"; {note}" if note else ""
        )
    low, high = interval if interval is not None else (None, None)
    return Projection(n, value, low, high, value / (n * usl.lam.value), note)


@cache
def t_quantile(p: float, dof: int) -> float:
    """Student's t quantile (p in (0.5, 1)): closed forms for 1 and 2 degrees of freedom,
    else the density integrated numerically (trapezoids of 1/4000 on [0, 60]: 5 digits)."""
    if dof == 1:
        return math.tan(math.pi * (p - 0.5))
    if dof == 2:
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    grid = np.linspace(0.0, 60.0, 240_001)
    log_c = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)
    density = np.exp(log_c - (dof + 1) / 2 * np.log1p(grid * grid / dof))
    cdf = 0.5 + np.concatenate(([0.0], np.cumsum((density[1:] + density[:-1]) / 2 * grid[1])))
    return float(np.interp(p, cdf, grid))
