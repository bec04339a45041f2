"""What every single-process loop hands back, and the wall-time phases its metrics records carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from srljax.config import Experiment

PHASES = ("time_env", "time_act", "time_update", "time_store")
COLLECT_PHASES = ("time_env", "time_act", "time_store")


@dataclass
class TrainResult:
    """What ``train`` hands back to a notebook."""

    config: Experiment
    metrics: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    env_steps: int = 0
    stopped_by: str = "done"  # "done" | "timeout" | "interrupted" (a group of hosts stopped by SIGTERM, checkpointed)

    @property
    def run_dir(self):
        return self.config.run_dir
