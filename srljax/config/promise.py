"""What a shipped config promises: a metric, a threshold over seeds, at a budget of env steps.

A config file that trains declares its promise beside ``experiment()``::

    from srljax.config import Promise

    PROMISE = Promise(metric="return", median=475.0, worst=400.0, seeds=(1, 2, 3), wall_s=45)

and ``python -m launch.sweep configs/sweeps/gate.py`` runs every promise over its seeds and exits
non-zero naming each one that breaks (``launch/sweep/gate.py``); ``launch.local CFG --show`` prints
it. The budget is the config's own ``total_env_steps`` (after ``overrides``): a promise is about the
config as shipped, at the env steps it trains, not about how fast this CPU is. ``median`` is held by
the median over ``seeds``, ``worst`` by every seed.

Metrics, read from a finished trial's run folder:

- ``return``: the last ``metrics.jsonl`` line's ``episode_return`` (the mean of the last ``log.window``
  episodes), as the sweep report's final return; with several policies (``RUN_DIR/policies/*/``) the worst one's.
- ``best_return``: the best mean ``episode_return`` over 3 consecutive metrics lines.
- ``eval_best`` / ``eval_final``: the best / last greedy evaluation's ``mean`` in ``eval.jsonl``.
- ``win_rate:BOT``: the last evaluation's win rate against OpenSpiel's ``BOT`` (``random``, ``mcts100``,
  self-play configs' ``eval.jsonl``).
- ``pbt_worst_member``: the lowest final evaluation of a population's members (``pbt/members.json``).
- ``neg_exploitability``: minus the exploitability of PSRO's last meta-strategy (``psro/psro.jsonl``'s last line),
  so that higher is better as for every other metric: ``median=-0.05`` promises exploitability <= 0.05.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

METRICS = ("return", "best_return", "eval_best", "eval_final", "pbt_worst_member", "neg_exploitability")
WIN_RATE = re.compile(r"^win_rate:[a-z0-9_]+$")


@dataclass(frozen=True)
class Promise:
    """What a shipped config promises at its budget, over seeds (``PROMISE`` beside ``experiment()``)."""

    metric: str
    """what is judged: ``return`` | ``best_return`` | ``eval_best`` | ``eval_final`` | ``pbt_worst_member`` |
    ``neg_exploitability`` | ``win_rate:BOT`` (the module's docstring says where each is read)."""
    median: float
    """the median over seeds must reach this."""
    worst: float
    """every seed must reach this (the worst seed)."""
    wall_s: float
    """wall time of one seed on a 2-core machine with nothing beside it (seconds, launch to exit): what the gate
    costs, and whether it belongs in the quick gate."""
    seeds: tuple[int, ...] = (1, 2, 3)
    """the seeds it holds for (the override ``seed=N``)."""
    overrides: tuple[str, ...] = ()
    """``dotted.key=value`` the promise is made at, when not the config as shipped (e.g. a smoke budget for a
    10M-step Atari config); the gate applies them before the seed."""
    quick: bool = True
    """in the quick gate (CI, every landing); False: only ``launch.sweep configs/sweeps/gate.py --full``."""
    busy_loops: int = 0
    """CPU-bound processes the gate runs beside each seed (a distributed config's promise under load)."""
    source: str = ""
    """where the threshold comes from (measured seeds' figures, a RESULTS section)."""

    def problems(self, where: str) -> list[str]:
        out = []
        if self.metric not in METRICS and not WIN_RATE.match(str(self.metric)):
            out.append(f"{where}: Promise.metric={self.metric!r} must be one of {', '.join(METRICS)} or win_rate:BOT")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or not all(
                isinstance(s, int) and s >= 0 for s in self.seeds):
            out.append(f"{where}: Promise.seeds={self.seeds!r} must be distinct integers >= 0")
        if self.worst > self.median:
            out.append(f"{where}: Promise.worst={self.worst} is above Promise.median={self.median}")
        if not self.wall_s > 0:
            out.append(f"{where}: Promise.wall_s={self.wall_s} must be the measured seconds per seed (> 0)")
        if isinstance(self.overrides, str):
            out.append(f"{where}: Promise.overrides must be a tuple of 'dotted.key=value' strings")
        return out

    def describe(self, budget: int) -> str:
        """One line: ``return: median >= 475, every seed >= 400 over seeds 1, 2, 3 at 500,000 env steps``."""
        tier = "quick gate" if self.quick else "--full gate"
        at = f" with {' '.join(self.overrides)}" if self.overrides else ""
        load = f", beside {self.busy_loops} busy loops" if self.busy_loops else ""
        return (f"{self.metric}: median >= {self.median:g}, every seed >= {self.worst:g} over seeds "
                f"{', '.join(map(str, self.seeds))} at {budget:,} env steps{at}{load}; ~{_duration(self.wall_s)} per "
                f"seed on 2 cores ({tier})")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


def load_promise(path: str | Path) -> Promise | None:
    """The ``PROMISE`` a config file declares beside ``experiment()`` (None: it declares none); ``ConfigError``
    when it is not a valid ``Promise``."""
    from srljax.config.errors import ConfigError
    from srljax.objects import import_file

    path = Path(path)
    if not path.is_file():
        raise ConfigError([f"config file {str(path)!r} not found (try configs/cartpole_ppo.py)"])
    promise = getattr(import_file(path, "config"), "PROMISE", None)
    if promise is None:
        return None
    if not isinstance(promise, Promise):
        raise ConfigError([f"{path}: PROMISE is a {type(promise).__name__}, expected srljax.config.Promise(...)"])
    if found := promise.problems(str(path)):
        raise ConfigError(found)
    return promise
