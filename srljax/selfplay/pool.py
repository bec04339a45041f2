"""The opponent pool: snapshots of the learning policy, sampled as opponents (pure, numpy; params kept as given).

    pool = OpponentPool(max_size=8, sampling="pfsp", pfsp_power=2.0, latest_share=0.2)
    pool.add(version=40, params=params)          # a snapshot; the oldest leaves when the pool is full
    name = pool.sample(rng)                      # "v40", ..., or LATEST (the current policy) for latest_share of games
    pool.record(name, score=0.0)                 # the main agent's score in a finished game against it

Sampling rules over the snapshots (``p_i``: the main agent's mean score against snapshot i, starting at 0.5 as
if one win and one loss had been seen):

* ``uniform``: every snapshot alike.
* ``recency``: weight ``rank`` (the newest of n has n, the oldest 1).
* ``pfsp`` (prioritized fictitious self-play, AlphaStar's "hard" weighting): weight ``(1 - p_i) ** pfsp_power``,
  so the opponents the main agent loses to are played most; a snapshot it always beats is played rarely.
* ``latest``: only the current policy (plain self-play; the pool still takes snapshots for the ratings).

Besides, ``latest_share`` of the games are against the current policy (``LATEST``) under any rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

LATEST = "latest"
"""The opponent name of the current (learning) policy."""
SAMPLING = ("uniform", "recency", "pfsp", "latest")


@dataclass
class Snapshot:
    version: int
    params: Any
    wins: float = 1.0  # the main agent's score against it: a prior of one win and one loss
    games: float = 2.0

    @property
    def name(self) -> str:
        return f"v{self.version}"

    @property
    def main_score(self) -> float:
        return self.wins / self.games


@dataclass
class OpponentPool:
    max_size: int
    sampling: str = "pfsp"
    pfsp_power: float = 2.0
    latest_share: float = 0.0
    snapshots: dict[str, Snapshot] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_size < 1 or self.sampling not in SAMPLING or not 0.0 <= self.latest_share <= 1.0:
            raise ValueError(f"max_size={self.max_size} must be >= 1, sampling={self.sampling!r} one of {SAMPLING}, "
                             f"latest_share={self.latest_share} in [0, 1]")

    def add(self, version: int, params: Any) -> list[Snapshot]:
        """Keep a snapshot of ``params`` at ``version``; returns the snapshots dropped to stay within ``max_size``."""
        snap = Snapshot(version, params)
        self.snapshots[snap.name] = snap
        dropped = []
        while len(self.snapshots) > self.max_size:
            oldest = min(self.snapshots.values(), key=lambda s: s.version)
            dropped.append(oldest)
            del self.snapshots[oldest.name]
        return dropped

    def weights(self) -> dict[str, float]:
        """The sampling probability of each snapshot (``LATEST`` included), as the rule says."""
        snaps = sorted(self.snapshots.values(), key=lambda s: s.version)
        if self.sampling == "latest" or not snaps:
            return {LATEST: 1.0}
        if self.sampling == "uniform":
            w = np.ones(len(snaps))
        elif self.sampling == "recency":
            w = np.arange(1, len(snaps) + 1, dtype=np.float64)
        else:
            w = np.array([(1.0 - s.main_score) ** self.pfsp_power for s in snaps])
        if w.sum() <= 0:  # the main agent beat every snapshot every time: fall back to uniform
            w = np.ones(len(snaps))
        w = (1.0 - self.latest_share) * w / w.sum()
        out = {s.name: float(x) for s, x in zip(snaps, w)}
        if self.latest_share > 0:
            out[LATEST] = self.latest_share
        return out

    def sample(self, rng: np.random.Generator) -> str:
        weights = self.weights()
        names = list(weights)
        return names[int(rng.choice(len(names), p=np.array(list(weights.values()))))]

    def record(self, name: str, score: float) -> None:
        """The main agent scored ``score`` (1 win, 0.5 draw, 0 loss) in a game against ``name``."""
        if name in self.snapshots:
            self.snapshots[name].wins += score
            self.snapshots[name].games += 1
