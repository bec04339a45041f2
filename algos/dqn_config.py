"""``DQNConfig`` and its ``ReplayConfig`` (``algos/dqn.py``): single-process DQN and, distributed, Ape-X.

    Experiment(algo=DQNConfig(n_step=3, replay=ReplayConfig(capacity=100_000, alpha=0.6)))
    python -m launch.local configs/cartpole_dqn.py algo.double_q=false
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from algos.replay_config import ReplayConfig, describe_replay_batch, num_replay_updates, replay_problems
from srljax.config.algo import gamma_problems, hash_by_value, network_problems

__all__ = ["DQNConfig", "ReplayConfig"]  # ReplayConfig lives in algos/replay_config.py, shared by replay algorithms


@dataclass(frozen=True)
class DQNConfig:
    """DQN (Mnih et al. 2015) with the usual options: double Q-learning, dueling head, n-step returns,
    prioritized replay. One gradient step per sampled batch of ``batch_size``; ``replay_ratio`` samples
    are trained per env step inserted once ``learning_starts`` env steps are in the replay (CleanRL's
    ``train_frequency`` is ``batch_size / replay_ratio``). Optimiser: Adam with ``trainer.lr`` (annealed
    if ``trainer.anneal_lr``) and ``trainer.adam_eps``, gradients clipped to ``trainer.max_grad_norm``
    unless it is 0. Exploration: epsilon-greedy, epsilon linear from ``eps_start`` to ``eps_end`` over
    the first ``exploration_fraction`` of the run's env steps.
    """

    consumes: ClassVar[str] = "replay"
    name: Literal["dqn"] = "dqn"
    action_kinds: ClassVar[tuple[str, ...]] = ("discrete",)
    """the action spaces it takes (``algos/fit.py``); ``dict_obs``: whether it takes a Dict observation."""
    dict_obs: ClassVar[bool] = True
    action_masks: ClassVar[bool] = True
    """whether it applies a Dict observation's legal-action flags (``action_mask``, ``algos/fit.py``)."""
    num_steps: int = 1
    """env steps per env collected between training rounds (the single-process loop then trains the
    updates the replay ratio owes); distributed (Ape-X): rows per env in one chunk an actor sends."""
    gamma: float = 0.99
    n_step: int = 1
    """n-step returns: a time limit inside the window bootstraps from the final observation, a termination does not."""
    batch_size: int = 32
    replay_ratio: float = 8.0
    """samples trained per env step inserted (CleanRL Atari: a batch of 32 every 4 env steps = 8)."""
    learning_starts: int = 80_000
    """env steps collected before the first update."""
    double_q: bool = True
    """the online network picks the bootstrap action, the target network values it (van Hasselt et al. 2016)."""
    dueling: bool = False
    """value and advantage streams, Q = V + A - mean(A) (Wang et al. 2016)."""
    loss: Literal["huber", "mse"] = "huber"
    """huber (delta 1, Nature DQN's error clipping) or mse (CleanRL's DQN)."""
    target_update_every: int = 250
    """updates between target-network refreshes (CleanRL Atari: every 1,000 env steps / 4 = 250 updates)."""
    tau: float = 1.0
    """at each refresh ``target = tau * online + (1 - tau) * target``: 1 copies, < 1 is Polyak averaging."""
    eps_start: float = 1.0
    eps_end: float = 0.01
    exploration_fraction: float = 0.1
    network: str = "auto"
    """``auto``: Nature CNN for image observations, MLP otherwise; ``mlp``; ``cnn``; or a Flax module of your own,
    ``"package.module:Class"`` (``algos.networks.apply_torso``: observations ``[B, *O]`` in, features ``[B, F]``
    out; the algorithm adds its heads), built with ``network_options``."""
    network_options: dict[str, Any] = field(default_factory=dict)
    """keyword arguments of a network of your own (``algo.network_options.features=32`` on the command line)."""
    hidden_sizes: tuple[int, ...] = (120, 84)
    activation: Literal["tanh", "relu"] = "relu"
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    updates_per_call: int = 1
    """updates trained in one compiled call (a ``lax.scan`` over that many batches). Single process: sampled at
    once and run when that many are owed, so acting's params refresh every ``updates_per_call`` updates' worth
    of env steps. Distributed (Ape-X): the trainer waits for that many batches from its shards and publishes
    after the call. For a small network the per-call overhead (a dispatch, a wake-up for its end) is most of an
    update on a CPU (CartPole's MLP: ~4x less per update at 16, bench/replay_loop.py); a conv network gains
    nothing. ``cfg.num_updates`` is rounded down to a multiple of it."""
    ratio_tolerance: float = 0.1
    """distributed (Ape-X): the trainer's samples per env step inserted are held within this fraction of
    ``replay_ratio`` by ``throttle``; exported as the metric ``samples_per_insert``."""
    throttle: Literal["both", "updates", "inserts", "none"] = "both"
    """distributed: what waits when the replay ratio leaves its tolerance: the trainer's updates (ahead: it waits
    for inserts), the actors' inserts (ahead: they wait for newer params), both, or none (free-running actors)."""

    def num_updates(self, cfg: Any) -> int:
        """Gradient steps in the run: ``replay_ratio`` samples per env step after ``learning_starts``."""
        return num_replay_updates(self, cfg)

    def describe_batch(self, cfg: Any) -> str:
        return describe_replay_batch(self, cfg)

    __hash__ = hash_by_value

    def problems(self, cfg: Any) -> list[str]:
        out = gamma_problems(self) + network_problems(self) + replay_problems(self, cfg)
        if self.target_update_every < 1:
            out.append(f"algo.target_update_every={self.target_update_every} must be >= 1")
        if not 0.0 < self.tau <= 1.0:
            out.append(f"algo.tau={self.tau} must be in (0, 1] (1: copy the online network)")
        if not (0.0 <= self.eps_end <= 1.0 and 0.0 <= self.eps_start <= 1.0 and 0.0 < self.exploration_fraction <= 1.0):
            out.append(f"algo.eps_start={self.eps_start} and algo.eps_end={self.eps_end} must be in [0, 1] and "
                       f"algo.exploration_fraction={self.exploration_fraction} in (0, 1]")
        return out
