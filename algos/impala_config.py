"""``IMPALAConfig``: IMPALA's settings (``algos/impala.py``).

    Experiment(algo=IMPALAConfig(num_steps=20), trainer=TrainerConfig(lr=6e-4, num_minibatches=4, update_epochs=1))
    python -m launch.local configs/cartpole_impala.py algo.rho_bar=2.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from srljax.config.algo import gamma_problems, hash_by_value, network_problems, recurrent_problems, vtrace_problems


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
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete", "multi_discrete", "continuous")
    """the action spaces it takes (``algos/fit.py``); ``dict_obs``: whether it takes a Dict observation."""
    dict_obs: ClassVar[bool] = True
    action_masks: ClassVar[bool] = True
    """whether it applies a Dict observation's legal-action flags (``action_mask``, ``algos/fit.py``)."""
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
    network: str = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise; ``mlp``; ``cnn``; or a Flax module of your own,
    ``"package.module:Class"`` (``algos.networks.apply_torso``: observations ``[B, *O]`` in, features ``[B, F]``
    out; the algorithm adds its heads), built with ``network_options``."""
    network_options: dict[str, Any] = field(default_factory=dict)
    """keyword arguments of a network of your own (``algo.network_options.features=32`` on the command line)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: Literal["tanh", "relu"] = "tanh"
    init_log_std: float = 0.0
    normalize_obs: bool = False
    obs_clip: float = 10.0
    lstm_size: int = 0
    """0: feed-forward. >0: recurrent, an LSTM of this many units between the torso and the heads
    (``algos/recurrent.py``), re-unrolled over each segment from the carry the actor used."""

    __hash__ = hash_by_value

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + vtrace_problems(self) + recurrent_problems(self, cfg) + network_problems(self)
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
