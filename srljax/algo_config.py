"""Algorithm configs: ``PPOConfig``, ``IMPALAConfig`` (``srljax.config`` re-exports them).

    Experiment(algo=IMPALAConfig(num_steps=20), trainer=TrainerConfig(lr=6e-4, num_minibatches=4, update_epochs=1))
    python -m launch.local configs/cartpole_impala.py algo.rho_bar=2.0

``Experiment.algo`` holds one of ``PPOConfig``, ``IMPALAConfig`` or a user's own frozen dataclass
(``docs/architecture.md``, "Adding your own algorithm"). Every algo config has ``name`` (the key
``algo=NAME`` and the JSON round trip choose the class by), ``num_steps`` (segment length T) and
``gamma``; a ``problems(cfg) -> list[str]`` method, where present, adds its own config errors to
``srljax.config.problems``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


def vtrace_problems(algo: Any) -> list[str]:
    """Errors in the V-trace thresholds shared by IMPALA and APPO (``rho_bar``, ``c_bar``)."""
    return [f"algo.{key}={getattr(algo, key)} must be > 0 (1.0 is the paper's)"
            for key in ("rho_bar", "c_bar") if getattr(algo, key) <= 0]


def gamma_problems(algo: Any) -> list[str]:
    return [] if 0.0 < algo.gamma <= 1.0 else [f"algo.gamma={algo.gamma} must be in (0, 1]"]


def recurrent_problems(algo: Any, cfg: Any) -> list[str]:
    """Errors in ``algo.lstm_size``: recurrent minibatches are whole env columns, split over the trainer devices."""
    t = cfg.trainer
    parts = t.num_minibatches * t.devices * t.num_hosts
    if algo.lstm_size < 0:
        return [f"algo.lstm_size={algo.lstm_size} must be >= 0 (0: feed-forward)"]
    if algo.lstm_size and parts >= 1 and cfg.batch_envs % parts:
        return [f"algo.lstm_size={algo.lstm_size}: recurrent minibatches are whole env columns, so batch_envs="
                f"{cfg.batch_envs} must divide into trainer.num_minibatches={t.num_minibatches} x "
                f"{t.devices * t.num_hosts} trainer devices; use a multiple of {parts} envs"]
    return []


@dataclass(frozen=True)
class PPOConfig:
    """PPO loss, rollout and network settings (CleanRL names)."""

    name: Literal["ppo"] = "ppo"
    num_steps: int = 128
    """rollout length T per environment per update."""
    gamma: float = 0.99
    gae_lambda: float = 0.95
    norm_adv: bool = True
    clip_coef: float = 0.1
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    network: Literal["auto", "mlp", "cnn"] = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise."""
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
    lstm_size: int = 0
    """0: feed-forward. >0: recurrent, an LSTM of this many units between the torso and the heads
    (``algos/recurrent.py``); minibatches are then whole env columns (``batch_envs / num_minibatches``)."""

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + vtrace_problems(self) + recurrent_problems(self, cfg)
        if not 0.0 <= self.gae_lambda <= 1.0:
            out.append(f"algo.gae_lambda={self.gae_lambda} must be in [0, 1]")
        if self.clip_coef <= 0:
            out.append(f"algo.clip_coef={self.clip_coef} must be > 0")
        return out


@dataclass(frozen=True)
class IMPALAConfig:
    """IMPALA (Espeholt et al. 2018): actor-critic on V-trace targets, losses summed over the batch.

    Each batch of ``trainer.batch_envs`` columns is cut into ``trainer.num_minibatches`` groups of
    whole columns (a column's V-trace needs its whole segment) and takes one optimiser step per
    group, once (``trainer.update_epochs`` must be 1), as Cleanba's ``cleanba_impala.py``.
    Optimiser: ``trainer.lr`` (annealed if ``trainer.anneal_lr``), gradients clipped to
    ``trainer.max_grad_norm``, then PyTorch-style RMSProp (Cleanba's) or Adam (``trainer.adam_eps``).
    """

    name: Literal["impala"] = "impala"
    num_steps: int = 20
    """segment length T per env column (Cleanba: 20)."""
    gamma: float = 0.99
    rho_bar: float = 1.0
    """clip of the importance ratio in the V-trace TD terms and the policy gradient."""
    c_bar: float = 1.0
    """clip of the importance ratio in the V-trace trace (how far corrections propagate back)."""
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    optimizer: Literal["rmsprop", "adam"] = "rmsprop"
    rmsprop_decay: float = 0.99
    rmsprop_eps: float = 0.01
    """added outside the square root, as torch.optim.RMSprop (Cleanba's setting)."""
    network: Literal["auto", "mlp", "cnn"] = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    init_log_std: float = 0.0
    normalize_obs: bool = False
    obs_clip: float = 10.0
    lstm_size: int = 0
    """0: feed-forward. >0: recurrent, an LSTM of this many units between the torso and the heads
    (``algos/recurrent.py``), re-unrolled over each segment from the carry the actor used."""

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + vtrace_problems(self) + recurrent_problems(self, cfg)
        t = cfg.trainer
        if t.update_epochs != 1:
            out.append(f"trainer.update_epochs={t.update_epochs}: IMPALA takes one pass over each batch "
                       "(one optimiser step per minibatch); set trainer.update_epochs=1")
        if t.num_minibatches >= 1 and cfg.batch_envs % t.num_minibatches:
            out.append(f"IMPALA minibatches are whole env columns: trainer.batch_envs={cfg.batch_envs} is not "
                       f"divisible by trainer.num_minibatches={t.num_minibatches} "
                       f"({cfg.batch_envs} % {t.num_minibatches} = {cfg.batch_envs % t.num_minibatches})")
        shards = t.devices * t.num_hosts
        per_mb = cfg.batch_envs // max(t.num_minibatches, 1)
        if shards > 1 and per_mb % shards:
            out.append(f"IMPALA minibatch of {per_mb} env columns (trainer.batch_envs={cfg.batch_envs} / "
                       f"{t.num_minibatches} minibatches) does not split across {shards} trainer devices")
        if not 0.0 <= self.rmsprop_decay < 1.0 or self.rmsprop_eps <= 0:
            out.append(f"algo.rmsprop_decay={self.rmsprop_decay} must be in [0, 1) and "
                       f"algo.rmsprop_eps={self.rmsprop_eps} > 0")
        return out
