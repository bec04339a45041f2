"""PSRO's meta-solvers: a mixture over a population's policies from their payoff matrix (pure numpy and scipy).

    sigma = meta_strategy(payoff, "nash")           # payoff[i, j]: policy i's mean return against policy j
    row, col, value = nash_zero_sum(payoff)        # the maximin strategies of a two-player zero-sum matrix game

``payoff`` is the row player's payoff; PSRO's meta-game on a two-player zero-sum game where every policy plays both
seats is symmetric (``payoff = -payoff.T``), so the row strategy is the mixture for both seats. Solvers
(``psro.solver``): ``nash`` (an exact linear program, HiGHS through ``scipy.optimize.linprog``), ``uniform`` (every
policy alike: fictitious self-play's meta-strategy), ``prd`` (projected replicator dynamics, Lanctot et al. 2017:
the time average of replicator steps projected onto the simplex with every share >= ``floor / n``) and
``fictitious_play`` (the empirical mixture of best replies to it, ``iterations`` rounds).
"""

from __future__ import annotations

import numpy as np

from srljax.config.psro import SOLVERS


def nash_zero_sum(payoff: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(row strategy, column strategy, the game's value to the row player) of the zero-sum game ``payoff [n, m]``,
    each side's maximin strategy by a linear program: max v s.t. ``payoff.T @ x >= v``, ``x`` on the simplex."""
    a = np.asarray(payoff, np.float64)
    row, value = _maximin(a)
    col, _ = _maximin(-a.T)
    return row, col, float(value)


def _maximin(a: np.ndarray) -> tuple[np.ndarray, float]:
    from scipy.optimize import linprog

    n, m = a.shape
    c = np.zeros(n + 1)
    c[-1] = -1.0  # maximise v
    a_ub = np.hstack([-a.T, np.ones((m, 1))])  # v - (a.T x)_j <= 0 for every column j
    a_eq = np.hstack([np.ones((1, n)), np.zeros((1, 1))])
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(m), A_eq=a_eq, b_eq=[1.0],
                  bounds=[(0.0, None)] * n + [(None, None)], method="highs")
    if res.status != 0:
        raise RuntimeError(f"the meta-game's linear program failed ({res.message}) on a {n}x{m} payoff matrix")
    x = np.clip(res.x[:n], 0.0, None)
    return x / x.sum(), float(res.x[-1])


def project_simplex(x: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """The Euclidean projection of ``x`` onto ``{y : sum(y) = 1, y_i >= floor}`` (``floor * len(x) <= 1``)."""
    n = len(x)
    total = 1.0 - floor * n
    v = np.asarray(x, np.float64) - floor
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    k = np.nonzero(u - css / np.arange(1, n + 1) > 0)[0][-1]
    return np.maximum(v - css[k] / (k + 1), 0.0) + floor


def projected_replicator_dynamics(payoff: np.ndarray, iterations: int = 20_000, step: float = 0.01,
                                  floor: float = 1e-3) -> np.ndarray:
    """The time average of projected replicator dynamics on the symmetric game ``payoff`` (from uniform)."""
    a = np.asarray(payoff, np.float64)
    n = len(a)
    x = np.full(n, 1.0 / n)
    total = np.zeros(n)
    for _ in range(iterations):
        fitness = a @ x
        x = project_simplex(x + step * x * (fitness - x @ fitness), floor / n)
        total += x
    return total / iterations


def fictitious_play(payoff: np.ndarray, iterations: int = 20_000) -> np.ndarray:
    """The empirical mixture of fictitious play on the symmetric game ``payoff``: each round adds the best reply
    (lowest index on a tie) to the mixture so far (from uniform)."""
    a = np.asarray(payoff, np.float64)
    n = len(a)
    counts = np.ones(n)  # the uniform start counts as one round of each
    for _ in range(iterations):
        counts[int(np.argmax(a @ counts))] += 1.0
    return counts / counts.sum()


def meta_strategy(payoff: np.ndarray, solver: str, iterations: int = 20_000) -> np.ndarray:
    """The mixture ``solver`` (one of ``SOLVERS``) gives the row player of ``payoff``; ``iterations``: the
    iterative solvers' rounds."""
    a = np.asarray(payoff, np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or not np.all(np.isfinite(a)):
        raise ValueError(f"a meta-game's payoff matrix must be square and finite; got shape {a.shape}")
    if solver == "nash":
        return nash_zero_sum(a)[0]
    if solver == "uniform":
        return np.full(len(a), 1.0 / len(a))
    if solver == "prd":
        return projected_replicator_dynamics(a, iterations)
    if solver == "fictitious_play":
        return fictitious_play(a, iterations)
    raise ValueError(f"psro.solver={solver!r}: use one of {', '.join(SOLVERS)}")


def exploitability_in_meta_game(payoff: np.ndarray, sigma: np.ndarray) -> float:
    """How much the best pure policy of the population gains against ``sigma`` beyond ``sigma``'s own value
    (0 at a Nash equilibrium of the symmetric zero-sum meta-game)."""
    a = np.asarray(payoff, np.float64)
    return float(np.max(a @ sigma) - sigma @ a @ sigma)
