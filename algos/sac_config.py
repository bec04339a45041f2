"""``SACConfig`` (``algos/sac.py``): Soft Actor-Critic with automatic entropy tuning, CleanRL's defaults.

    Experiment(algo=SACConfig(), trainer=TrainerConfig(lr=1e-3, anneal_lr=False, max_grad_norm=0.0, adam_eps=1e-8))
    python -m launch.local configs/mujoco_sac.py env.id=Hopper-v4
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from algos.twin_q_config import TwinQConfig
from srljax.config.algo import hash_by_value


@dataclass(frozen=True)
class SACConfig(TwinQConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018, the twin-critic version with automatic entropy tuning) as CleanRL's
    ``sac_continuous_action.py``: a tanh-squashed Gaussian actor scaled to the env's action bounds, soft targets
    ``r + gamma * (min_i Q_i'(s', a') - alpha * log pi(a' | s'))``, the temperature ``alpha`` tuned towards the target
    entropy ``target_entropy_per_dim x |A|`` with the critics' learning rate (``trainer.lr``). The actor (and
    alpha) take ``policy_frequency`` steps every ``policy_frequency`` updates (delayed, same count); the target
    critics move every ``target_update_every`` updates.
    """

    name: Literal["sac"] = "sac"  # type: ignore[assignment]
    autotune: bool = True
    """tune the entropy temperature alpha automatically (false: alpha stays ``alpha``)."""
    alpha: float = 0.2
    """the entropy temperature when ``autotune`` is false; with it, alpha starts at 1 (log alpha 0, CleanRL)."""
    target_entropy_per_dim: float = -1.0
    """the target entropy is this x the action dimensions (-|A|, Haarnoja et al.)."""
    target_update_every: int = 1
    """updates between target-critic refreshes (CleanRL's ``target_network_frequency``)."""
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    """the actor's log std is squashed into [log_std_min, log_std_max] (CleanRL's bounds)."""

    __hash__ = hash_by_value

    def problems(self, cfg: Any) -> list[str]:
        out = super().problems(cfg)
        if self.target_update_every < 1:
            out.append(f"algo.target_update_every={self.target_update_every} must be >= 1")
        if not self.autotune and self.alpha < 0:
            out.append(f"algo.alpha={self.alpha} must be >= 0 (the entropy temperature)")
        if self.log_std_min >= self.log_std_max:
            out.append(f"algo.log_std_min={self.log_std_min} must be below algo.log_std_max={self.log_std_max}")
        return out
