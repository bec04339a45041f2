"""Which lost workers the controller restarts, after how long, and the record of every restart.

    restarts = Restarts(cfg)
    restarts.allowed("actor/1")                    # True while actor/1 has restarts left and its role restarts
    attempt, delay = restarts.record("actor/1", "its process exited with code -9")   # 1, 1.0 (seconds)
    restarts.came_back("actor/1")                  # the newcomer is running: its backoff starts over after a while
    restarts.summary()                             # {"total": 1, "by_worker": {"actor/1": 1}, "events": [...]}

``RESTART_POLICY`` says, per role, what the loss of one of its workers does: ``worker`` (the
default) restarts that worker alone with the same role and index, through the backend that
started it; ``group`` restarts every worker of the role together (the trainer: its processes form
one ``jax.distributed`` group, and its state comes back from the newest checkpoint, which the
controller's ``configure`` tells the newcomers to restore); ``end`` ends the trial.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from srljax.config import Experiment
from srljax.layout import TRAINER

RESTART_POLICY: dict[str, str] = {TRAINER: "group"}
"""role -> ``worker`` (restart the lost worker alone), ``group`` (restart all of the role's workers, from the
newest checkpoint) or ``end`` (a loss ends the trial); unlisted: ``worker``."""
MAX_BACKOFF_S = 60.0
BACKOFF_RESET_S = 60.0
"""A worker that stays up this long after it came back is restarted next time after the base backoff
again: the backoff grows with restarts in a row (a crash loop), not with restarts over a long trial."""


@dataclass
class Pending:
    """One restart in progress: the old worker is gone, the newcomer starts at ``start_at``."""

    reason: str
    attempt: int  # this worker's restart number, from 1
    start_at: float  # time.monotonic() when the backend starts the newcomer
    old_addresses: dict[str, str] = field(default_factory=dict)  # what the lost worker served
    phase: str = "waiting"  # waiting (backoff) -> starting (backend.start, until it registers) -> configuring
    since: float = 0.0  # time.monotonic() the phase began
    lost_at: float = field(default_factory=time.monotonic)


class Restarts:
    def __init__(self, cfg: Experiment):
        self.max = cfg.layout.max_restarts
        self.backoff = cfg.layout.restart_backoff_seconds
        self.counts: Counter[str] = Counter()  # worker name -> restarts so far
        self.in_a_row: Counter[str] = Counter()  # worker name -> restarts since it last stayed up BACKOFF_RESET_S
        self.back_at: dict[str, float] = {}  # worker name -> time.monotonic() its newest successor came back
        self.last_reason: dict[str, str] = {}
        self.events: list[dict[str, Any]] = []

    @staticmethod
    def policy(role: str) -> str:
        return RESTART_POLICY.get(role, "worker")

    def allowed(self, name: str) -> bool:
        """``name`` ("actor/1") may be restarted once more: its role restarts workers and it has budget left."""
        return self.policy(name.split("/")[0]) in ("worker", "group") and self.counts[name] < self.max

    def delay(self, in_a_row: int) -> float:
        """Backoff before the ``in_a_row``-th restart in a row (1, 2, ...): ``restart_backoff_seconds x 2^(n-1)``."""
        return min(MAX_BACKOFF_S, self.backoff * 2 ** (in_a_row - 1))

    def record(self, name: str, reason: str) -> tuple[int, float]:
        """Count one restart of ``name``; return (its restart number, the backoff before it)."""
        self.counts[name] += 1
        attempt = self.counts[name]
        if time.monotonic() - self.back_at.get(name, -BACKOFF_RESET_S) >= BACKOFF_RESET_S:
            self.in_a_row[name] = 0  # it had been running a while: not a crash loop
        self.in_a_row[name] += 1
        self.last_reason[name] = reason
        self.events.append({"worker": name, "restart": attempt, "reason": reason[-2000:], "time": round(time.time(), 3)})
        return attempt, self.delay(self.in_a_row[name])

    def came_back(self, name: str) -> None:
        """``name``'s successor is set up and started."""
        self.back_at[name] = time.monotonic()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def describe(self) -> str:
        """``3 worker restarts (actor/1 x2, buffer/0 x1)``, or "" when there were none."""
        if not self.total:
            return ""
        each = ", ".join(f"{name} x{n}" for name, n in sorted(self.counts.items()))
        return f"{self.total} worker restart{'s' if self.total != 1 else ''} ({each})"

    def summary(self) -> dict[str, Any]:
        """What ``status.json`` records under ``restarts``."""
        return {"total": self.total, "by_worker": dict(sorted(self.counts.items())), "max_restarts": self.max,
                "events": self.events}
