"""``PPOConfig``: PPO's loss, rollout and network settings (``algos/ppo.py``); APPO with ``vtrace=True``.

    Experiment(algo=PPOConfig(num_steps=128), trainer=TrainerConfig(lr=2.5e-4))
    python -m launch.local configs/cartpole_ppo.py algo.clip_coef=0.2

No JAX here: launchers and the controller read configs without loading the algorithm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from srljax.config.algo import gamma_problems, hash_by_value, network_problems, recurrent_problems, vtrace_problems


@dataclass(frozen=True)
class PPOConfig:
    """PPO loss, rollout and network settings (CleanRL names)."""

    name: Literal["ppo"] = "ppo"
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete", "multi_discrete", "continuous")
    """the action spaces it takes (``algos/fit.py``); ``dict_obs``: whether it takes a Dict observation."""
    dict_obs: ClassVar[bool] = True
    action_masks: ClassVar[bool] = True
    """whether it applies a Dict observation's legal-action flags (``action_mask``, ``algos/fit.py``)."""
    num_steps: int = 128
    """rollout length T per environment per update."""
    gamma: float = 0.99
    gae_lambda: float = 0.95
    norm_adv: bool = True
    clip_coef: float = 0.1
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    network: str = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise; ``mlp``; ``cnn``; or a Flax module of your own,
    ``"package.module:Class"`` (``algos.networks.apply_torso``: observations ``[B, *O]`` in, features ``[B, F]``
    out; the algorithm adds its heads), built with ``network_options``."""
    network_options: dict[str, Any] = field(default_factory=dict)
    """keyword arguments of a network of your own (``algo.network_options.features=32`` on the command line)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    init_log_std: float = 0.0
    """initial log standard deviation of a continuous (Gaussian) policy; 0.0 is CleanRL's."""
    normalize_obs: bool = False
    """running mean/std observation normalisation (continuous control)."""
    normalize_reward: bool = False
    """scale rewards by the running std of the discounted return (continuous control)."""
    obs_clip: float = 10.0
    reward_norm_clip: float = 10.0
    vtrace: bool = False
    """APPO (Sample Factory's): advantages and value targets from V-trace on the learner's values
    and policy instead of GAE on the actors', correcting for policy lag; ``gae_lambda`` is then the
    V-trace trace's lambda (``c_t = gae_lambda min(c_bar, rho_t)``, rlax's ``lambda_``)."""
    rho_bar: float = 1.0
    """``vtrace=True``: clip of the importance ratio in the TD terms and the advantages."""
    c_bar: float = 1.0
    """``vtrace=True``: clip of the importance ratio in the trace."""
    proximal: Literal["auto", "behaviour", "learner"] = "auto"
    """the policy PPO's ratio is clipped around. ``behaviour``: the actors' (PPO's, and Sample Factory's
    APPO); ``learner`` (needs ``vtrace=True``): the learner's before this update (decoupled PPO, Hilton et
    al. 2021), so a lagged sample's ratio starts at 1 and its off-policyness is left to V-trace's rho in
    the advantage; ``auto``: ``learner`` with ``vtrace=True``, else ``behaviour``. On-policy both are the same."""
    lstm_size: int = 0
    """0: feed-forward. >0: recurrent, an LSTM of this many units between the torso and the heads
    (``algos/recurrent.py``); minibatches are then whole env columns (``batch_envs / num_minibatches``)."""

    __hash__ = hash_by_value

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + vtrace_problems(self) + recurrent_problems(self, cfg) + network_problems(self)
        if not 0.0 <= self.gae_lambda <= 1.0:
            out.append(f"algo.gae_lambda={self.gae_lambda} must be in [0, 1]")
        if self.clip_coef <= 0:
            out.append(f"algo.clip_coef={self.clip_coef} must be > 0")
        if self.proximal == "learner" and not self.vtrace:
            out.append(f"algo.proximal={self.proximal} needs algo.vtrace=true (APPO); plain PPO clips around the "
                       "actors' policy: drop algo.proximal or set algo.vtrace=true")
        return out
