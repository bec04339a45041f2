"""A small AlphaStar-style league (Vinyals et al. 2019), pure (numpy, no I/O): members with roles, their snapshots,
the match matrix, Elo, and each role's rule for drawing opponents.

    league = League(("main", "main_exploiter", "league_exploiter"), pool_size=8, pfsp_power=2.0, latest_share=0.35)
    name = league.snapshot(member=0, version=40)   # "m0-v40" joins the league (the member's oldest leaves past pool_size)
    weights = league.weights(1)                    # {"m0-v40": 1.0}: member 1's opponents and their probabilities
    league.record(1, "m0-v40", score=1.0)          # member 1, as it is now, beat m0-v40 (0.5 draw, 0 loss)

Players are the members as they are now (``m<i>``) and their snapshots (``m<i>-v<version>``, at most ``pool_size``
per member). ``p`` below is a member's mean score against an opponent from the games it played against it (a
prior of one win and one loss, so an unplayed opponent is at 0.5). The rules:

* ``main``: ``latest_share`` of its games against itself as it is now (``LATEST``); the rest by prioritised
  fictitious self-play (PFSP) over every snapshot of every member, weight ``(1 - p) ** pfsp_power``.
* ``main_exploiter``: the newest snapshot of each main agent, while it scores above ``EXPLOITER_FLOOR`` against
  it; below that (the main agent is too strong for it yet), PFSP with AlphaStar's variance weighting
  ``p (1 - p)`` over that main agent's snapshots, so it learns from the ones it can sometimes beat.
* ``league_exploiter``: PFSP (``(1 - p) ** pfsp_power``) over every snapshot in the league, never itself.

A rule with no opponent to draw yet falls back to ``LATEST``. Every member's snapshots join the league (the
exploiters' too: the main agent must learn to beat what found its weaknesses). Not built: AlphaStar's resets of
exploiters to their initial parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from srljax.selfplay.elo import Elo
from srljax.selfplay.pool import LATEST

ROLES = ("main", "main_exploiter", "league_exploiter")
EXPLOITER_FLOOR = 0.1
"""a main exploiter that scores at most this against a main agent's newest snapshot plays its older ones."""


def player(member: int) -> str:
    """The name of member ``member`` as it is now."""
    return f"m{member}"


def snapshot_name(member: int, version: int) -> str:
    return f"m{member}-v{version}"


def source_member(name: str) -> int:
    """The member a player or snapshot name belongs to (``m2-v40`` -> 2, ``m1`` -> 1)."""
    return int(name[1:].split("-", 1)[0])


def pfsp(scores: np.ndarray, power: float) -> np.ndarray:
    """PFSP's "hard" weights ``(1 - p) ** power`` (uniform when all are zero)."""
    w = (1.0 - scores) ** power
    return w if w.sum() > 0 else np.ones_like(scores)


def variance(scores: np.ndarray) -> np.ndarray:
    """PFSP's variance weights ``p (1 - p)`` (uniform when all are zero)."""
    w = scores * (1.0 - scores)
    return w if w.sum() > 0 else np.ones_like(scores)


@dataclass
class League:
    roles: tuple[str, ...]
    pool_size: int = 8
    pfsp_power: float = 2.0
    latest_share: float = 0.35
    elo_k: float = 16.0
    snapshots: dict[str, tuple[int, int]] = field(default_factory=dict)
    """name -> (member, version), oldest first."""
    results: dict[tuple[int, str], list[float]] = field(default_factory=dict)
    """(member, opponent name) -> [score sum, games] of every game recorded (kept after the snapshot leaves)."""

    def __post_init__(self) -> None:
        bad = [r for r in self.roles if r not in ROLES]
        if bad or "main" not in self.roles or self.pool_size < 1 or not 0.0 <= self.latest_share <= 1.0:
            raise ValueError(f"league roles {self.roles} must be from {ROLES} with at least one main, pool_size="
                             f"{self.pool_size} >= 1, latest_share={self.latest_share} in [0, 1]")
        self.elo = Elo(self.elo_k)
        for i in range(len(self.roles)):
            self.elo.add(player(i))

    @classmethod
    def from_config(cls, s: Any) -> League:
        """The league ``selfplay`` settings ``s`` describe (``srljax.config.SelfPlayConfig``)."""
        return cls(tuple(s.league), s.pool_size, s.pfsp_power, s.latest_share, s.elo_k)

    @property
    def mains(self) -> list[int]:
        return [i for i, r in enumerate(self.roles) if r == "main"]

    def snapshot(self, member: int, version: int) -> tuple[str, list[str]]:
        """Member ``member``'s params at ``version`` join the league at its rating: (its name, names dropped)."""
        name = snapshot_name(member, version)
        self.snapshots[name] = (member, version)
        self.elo.ratings[name] = self.elo.rating(player(member))
        own = [n for n, (m, _) in self.snapshots.items() if m == member]
        dropped = own[: max(0, len(own) - self.pool_size)]
        for n in dropped:
            del self.snapshots[n]
        return name, dropped

    def score(self, member: int, opponent: str) -> float:
        """``member``'s mean score against ``opponent`` (prior: one win, one loss)."""
        total, games = self.results.get((member, opponent), (0.0, 0.0))
        return (total + 1.0) / (games + 2.0)

    def record(self, member: int, opponent: str, score: float) -> None:
        """Member ``member`` (as it is now) scored ``score`` (1 win, 0.5 draw, 0 loss) against ``opponent``."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"score={score} must be in [0, 1]")
        cell = self.results.setdefault((member, opponent), [0.0, 0.0])
        cell[0] += score
        cell[1] += 1.0
        if opponent != LATEST:
            self.elo.update(player(member), opponent, score)

    def weights(self, member: int) -> dict[str, float]:
        """Member ``member``'s opponents and the probability of each (they sum to 1), by its role's rule."""
        role = self.roles[member]
        if role == "main_exploiter":
            return self._exploiter_weights(member)
        names = list(self.snapshots)
        if not names:
            return {LATEST: 1.0}
        w = pfsp(np.array([self.score(member, n) for n in names]), self.pfsp_power)
        share = self.latest_share if role == "main" else 0.0
        out = {n: float(x) for n, x in zip(names, (1.0 - share) * w / w.sum())}
        if share > 0:
            out[LATEST] = share
        return out

    def _exploiter_weights(self, member: int) -> dict[str, float]:
        out: dict[str, float] = {}
        mains = self.mains
        for main in mains:  # each main agent alike
            own = [n for n, (m, _) in self.snapshots.items() if m == main]
            if not own:
                continue
            newest = max(own, key=lambda n: self.snapshots[n][1])
            if self.score(member, newest) > EXPLOITER_FLOOR:
                out[newest] = out.get(newest, 0.0) + 1.0 / len(mains)
                continue
            w = variance(np.array([self.score(member, n) for n in own]))
            for n, x in zip(own, w / w.sum()):
                out[n] = out.get(n, 0.0) + float(x) / len(mains)
        if not out:
            return {LATEST: 1.0}
        total = sum(out.values())
        return {n: x / total for n, x in out.items()}

    def matrix(self) -> list[list[float | None]]:
        """``[i][j]``: member i's mean score against member j (any of its snapshots, or itself as it is now for
        i == j's ``LATEST`` games); None where they have not played."""
        n = len(self.roles)
        sums = np.zeros((n, n))
        games = np.zeros((n, n))
        for (i, name), (total, count) in self.results.items():
            j = i if name == LATEST else source_member(name)
            sums[i, j] += total
            games[i, j] += count
        return [[float(sums[i, j] / games[i, j]) if games[i, j] else None for j in range(n)] for i in range(n)]

    def games(self) -> list[list[int]]:
        """``[i][j]``: games member i played against member j (as ``matrix``)."""
        n = len(self.roles)
        out = [[0] * n for _ in range(n)]
        for (i, name), (_, count) in self.results.items():
            out[i][i if name == LATEST else source_member(name)] += int(count)
        return out
