"""``TwinQConfig``: what SAC and TD3 share (``algos/sac_config.py``, ``algos/td3_config.py``; ``algos/twin_q.py``).

    Experiment(algo=SACConfig(batch_size=256, replay_ratio=256.0))    # one update of 256 samples per env step

Both are replay algorithms for continuous actions with an actor, twin critics and Polyak-averaged targets, on
the replay seam DQN uses (``consumes = "replay"``): the replay loop and Ape-X's workers read the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from algos.replay_config import ReplayConfig, describe_replay_batch, num_replay_updates, replay_problems
from srljax.config.algo import gamma_problems, hash_by_value, network_problems


@dataclass(frozen=True)
class TwinQConfig:
    """An actor and twin critics ``Q1, Q2(s, a)`` trained from a replay (Fujimoto et al. 2018's clipped double Q:
    targets bootstrap from the smaller target critic). One gradient step per sampled batch of ``batch_size``;
    ``replay_ratio`` samples are trained per env step once ``learning_starts`` env steps are in, acting uniformly
    at random until then (CleanRL). Critics: Adam with ``trainer.lr`` (annealed if ``trainer.anneal_lr``),
    ``trainer.adam_eps``, gradients clipped to ``trainer.max_grad_norm`` unless it is 0; the actor the same with
    ``policy_lr``. Observations go through the torso ``network`` (an MLP on the observation and action side by
    side for ``mlp``; a CNN or a user's torso first, its features then side by side with the action).
    """

    consumes: ClassVar[str] = "replay"
    action_kinds: ClassVar[tuple[str, ...]] = ("continuous",)
    """the action spaces it takes (``algos/fit.py``); ``dict_obs``: whether it takes a Dict observation."""
    dict_obs: ClassVar[bool] = True
    action_masks: ClassVar[bool] = False
    """whether it applies a Dict observation's legal-action flags (``action_mask``, ``algos/fit.py``)."""
    name: str = ""
    num_steps: int = 1
    """env steps per env collected between training rounds (the single-process loop then trains the
    updates the replay ratio owes); distributed (Ape-X layout): rows per env in one chunk an actor sends."""
    gamma: float = 0.99
    n_step: int = 1
    """n-step returns (1: CleanRL); the entropy bonus (SAC) enters at the bootstrap row only."""
    batch_size: int = 256
    replay_ratio: float = 256.0
    """samples trained per env step inserted (CleanRL: a batch of 256 every env step = 256)."""
    learning_starts: int = 5_000
    """env steps collected, with uniformly random actions, before the first update."""
    tau: float = 0.005
    """target networks move ``tau`` of the way to the online ones at each refresh (Polyak averaging)."""
    policy_frequency: int = 2
    """the actor's delay: see each algorithm's config (SAC: ``policy_frequency`` actor steps every
    ``policy_frequency`` updates; TD3: one actor step and the target refresh every ``policy_frequency`` updates)."""
    policy_lr: float = 3e-4
    """the actor's Adam learning rate (the critics' is ``trainer.lr``)."""
    network: str = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise; ``mlp``; ``cnn``; or a Flax module of your own,
    ``"package.module:Class"`` (``algos.networks.apply_torso``; observations ``[B, *O]`` in, features ``[B, F]``
    out), built with ``network_options``; actor and critics each have their own."""
    network_options: dict[str, Any] = field(default_factory=dict)
    """keyword arguments of a network of your own (``algo.network_options.features=32`` on the command line)."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: Literal["tanh", "relu"] = "relu"
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    updates_per_call: int = 1
    """updates trained in one compiled call (a ``lax.scan`` over that many batches), sampled at once and run when
    that many are owed, so acting's params refresh every ``updates_per_call`` updates' worth of env steps; the
    replay ratio is unchanged. ``cfg.num_updates`` is rounded down to a multiple of it."""
    ratio_tolerance: float = 0.1
    """distributed (Ape-X layout): the samples per env step inserted are held within this fraction of
    ``replay_ratio`` by ``throttle``."""
    throttle: Literal["both", "updates", "inserts", "none"] = "both"
    """distributed: what waits when the replay ratio leaves its tolerance (``DQNConfig.throttle``)."""

    __hash__ = hash_by_value

    def num_updates(self, cfg: Any) -> int:
        """Gradient steps in the run: ``replay_ratio`` samples per env step after ``learning_starts``."""
        return num_replay_updates(self, cfg)

    def describe_batch(self, cfg: Any) -> str:
        return describe_replay_batch(self, cfg)

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + network_problems(self) + replay_problems(self, cfg)
        if not 0.0 < self.tau <= 1.0:
            out.append(f"algo.tau={self.tau} must be in (0, 1] (CleanRL: 0.005; 1 copies the online networks)")
        if self.policy_frequency < 1:
            out.append(f"algo.policy_frequency={self.policy_frequency} must be >= 1")
        if self.policy_lr <= 0:
            out.append(f"algo.policy_lr={self.policy_lr} must be > 0")
        return out
