"""Aggregate statistics over seeds for sweep reports: median, IQM and percentile-bootstrap CIs.

    finals = np.array([5420.4, 6583.8, 5275.5])
    median(finals), iqm(finals)                      # 5420.4, 5759.9
    bootstrap_ci(finals, median)                     # (5275.5, 6583.8): same numbers every call

IQM (interquartile mean, Agarwal et al. 2021, rliable) is the mean of the middle half of the
runs: ``scipy.stats.trim_mean(x, 0.25)``, which cuts ``floor(n / 4)`` whole runs from each end,
so with fewer than 4 seeds it is the plain mean. The confidence interval resamples the seeds
with replacement (``num_resamples`` times, numpy generator ``seed``) and takes the 2.5th and
97.5th percentiles of the statistic: deterministic for a given input.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Statistic = Callable[[np.ndarray], np.ndarray]  # reduces the last axis


def median(x: np.ndarray) -> np.ndarray:
    """Median over the last axis (runs)."""
    return np.median(np.asarray(x, dtype=np.float64), axis=-1)


def iqm(x: np.ndarray) -> np.ndarray:
    """Interquartile mean over the last axis: sort, drop ``floor(n / 4)`` runs at each end, average the rest."""
    x = np.sort(np.asarray(x, dtype=np.float64), axis=-1)
    n = x.shape[-1]
    cut = n // 4
    return x[..., cut:n - cut].mean(axis=-1)


def bootstrap_ci(x: np.ndarray, statistic: Statistic, confidence: float = 0.95, num_resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over the runs in ``x`` [n]; (x, x) for a single run."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"bootstrap_ci needs a non-empty 1-d array of runs, got shape {x.shape}")
    rng = np.random.default_rng(seed)
    resampled = x[rng.integers(0, x.size, size=(num_resamples, x.size))]  # [R, n]
    values = statistic(resampled)  # [R]
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(values, [tail, 100.0 - tail])
    return float(low), float(high)
