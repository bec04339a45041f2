"""``TD3Config`` (``algos/td3.py``): Twin Delayed DDPG, CleanRL's defaults.

    Experiment(algo=TD3Config(), trainer=TrainerConfig(lr=3e-4, anneal_lr=False, max_grad_norm=0.0, adam_eps=1e-8))
    python -m launch.local configs/mujoco_td3.py env.id=Hopper-v4
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from algos.twin_q_config import TwinQConfig
from srljax.config.algo import hash_by_value


@dataclass(frozen=True)
class TD3Config(TwinQConfig):
    """TD3 (Fujimoto et al. 2018) as CleanRL's ``td3_continuous_action.py``: a deterministic tanh actor scaled to the
    env's action bounds, explored with Gaussian noise of ``exploration_noise`` x the half-range of each action
    dimension; critic targets from the smaller target critic at the target actor's action plus clipped noise
    (``policy_noise``, clipped at ``noise_clip``, both in half-ranges); the actor (maximising Q1) and all target
    networks (Polyak ``tau``) are updated every ``policy_frequency`` critic updates.
    """

    name: Literal["td3"] = "td3"  # type: ignore[assignment]
    learning_starts: int = 25_000
    exploration_noise: float = 0.1
    """std of the Gaussian noise added to the actor's action when acting, in half-ranges of the action bounds."""
    policy_noise: float = 0.2
    """std of the target policy smoothing noise, in half-ranges."""
    noise_clip: float = 0.5
    """the smoothing noise is clipped to +- this, in half-ranges."""

    __hash__ = hash_by_value

    def problems(self, cfg: Any) -> list[str]:
        out = super().problems(cfg)
        for key in ("exploration_noise", "policy_noise", "noise_clip"):
            if getattr(self, key) < 0:
                out.append(f"algo.{key}={getattr(self, key)} must be >= 0")
        return out
