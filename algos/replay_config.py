"""What every replay algorithm's config shares (DQN, SAC, TD3): the replay, the replay ratio and their checks.

    Experiment(algo=SACConfig(replay=ReplayConfig(capacity=1_000_000)))
    replay_problems(cfg.algo, cfg)        # the checks a replay algo config's ``problems`` starts from

A replay algo config has ``batch_size``, ``replay_ratio``, ``learning_starts``, ``n_step``, ``num_steps``,
``updates_per_call``, ``ratio_tolerance``, ``throttle`` and ``replay`` (a ``ReplayConfig``), and delegates
``num_updates`` and ``describe_batch`` to the functions here, so the replay loop and Ape-X's workers read
every one alike (``algos/dqn_config.py``, ``algos/twin_q_config.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReplayConfig:
    """The replay a replay algorithm samples from (``srljax/replay/buffer.py``): prioritized, uniform at ``alpha=0``."""

    capacity: int = 1_000_000
    """transitions held (split evenly over the env streams); the oldest are overwritten. Checked against
    the machine's available memory before launch (Atari, ``srljax.prepare.problems``) or when the replay is built."""
    alpha: float = 0.0
    """priority exponent: 0 samples uniformly; 0.6 is Schaul et al.'s and Ape-X's proportional choice."""
    beta0: float = 0.4
    """importance-sampling exponent at the start, annealed linearly to 1 over the run (used when alpha > 0)."""
    priority_eps: float = 1e-6
    """added to |TD error| so no sampleable transition has probability 0."""
    dedup_frames: bool = False
    """store each stacked-frame observation's newest frame only and restack at sampling time (Atari: 4x
    less memory, 1M transitions of 84x84 frames = 7 GB instead of 28 GB)."""


def num_replay_updates(algo: Any, cfg: Any) -> int:
    """Gradient steps in the run: ``replay_ratio`` samples per env step after ``learning_starts``, rounded down to a
    multiple of ``updates_per_call``."""
    owed = int(algo.replay_ratio * max(0, cfg.total_env_steps - algo.learning_starts)) // algo.batch_size
    chunk = max(algo.updates_per_call, 1)
    return max(chunk, owed - owed % chunk)


def describe_replay_batch(algo: Any, cfg: Any) -> str:
    """The launch line: batch, replay ratio, updates, envs and replay size."""
    return (f"replay batch {algo.batch_size} samples, replay ratio {algo.replay_ratio:g} samples per env step "
            f"(an update every {algo.batch_size / algo.replay_ratio:g} env steps) after {algo.learning_starts:,} "
            f"env steps, {cfg.num_updates:,} updates"
            + (f" ({algo.updates_per_call} per compiled call)" if algo.updates_per_call > 1 else "")
            + f"; {cfg.env.num_envs} envs, replay of {algo.replay.capacity:,} transitions")


def replay_problems(algo: Any, cfg: Any) -> list[str]:
    """Errors in the fields every replay algo config has (the list at the top of this module)."""
    out, t, r = [], cfg.trainer, algo.replay
    name = getattr(algo, "name", type(algo).__name__)
    if algo.learning_starts >= cfg.total_env_steps:
        out.append(f"algo.learning_starts={algo.learning_starts:,} env steps is not less than the run's "
                   f"total_env_steps={cfg.total_env_steps:,}: no update would ever happen; lower "
                   "algo.learning_starts or raise total_env_steps")
    if algo.replay_ratio <= 0:
        out.append(f"algo.replay_ratio={algo.replay_ratio} must be > 0 (samples trained per env step; CleanRL "
                   f"CartPole DQN: batch 128 every 10 steps = 12.8, Atari: 32 every 4 = 8, SAC: 256 every step = 256)")
    for key in ("batch_size", "n_step", "num_steps", "updates_per_call"):
        if getattr(algo, key) < 1:
            out.append(f"algo.{key}={getattr(algo, key)} must be >= 1")
    if r.alpha < 0 or not 0.0 <= r.beta0 <= 1.0 or r.priority_eps <= 0:
        out.append(f"algo.replay.alpha={r.alpha} must be >= 0, algo.replay.beta0={r.beta0} in [0, 1] and "
                   f"algo.replay.priority_eps={r.priority_eps} > 0")
    # whether each env's share of the capacity holds an n-step window (with the frame stack of deduplicated
    # frames, an env option) and the capacity a batch: srljax.prepare.problems (srljax.replay.buffer.window_problems)
    # whether the capacity fits in memory: srljax.prepare.problems (srljax.replay.buffer.config_memory_problems)
    if t.update_epochs != 1 or t.num_minibatches != 1:
        out.append(f"trainer.update_epochs={t.update_epochs} and trainer.num_minibatches={t.num_minibatches} must "
                   f"be 1: {name} takes one gradient step per sampled batch (algo.replay_ratio sets how many)")
    if t.overlap_collection:
        out.append("trainer.overlap_collection=True is for segment algorithms; the replay loop trains between env "
                   "steps: drop the override")
    shards = t.devices * t.num_hosts
    if shards > 1 and algo.batch_size % shards:
        out.append(f"algo.batch_size={algo.batch_size} does not split across {shards} trainer devices "
                   f"(trainer.devices x trainer.num_hosts); use a multiple of {shards}")
    # a distributed (Ape-X) layout's own rules: srljax.prepare.problems (srljax.replay.apex.apex_problems)
    if cfg.layout.mode == "single" and (algo.throttle, algo.ratio_tolerance) != ("both", 0.1):
        out.append(f"algo.throttle={algo.throttle} / algo.ratio_tolerance={algo.ratio_tolerance} apply to distributed "
                   "(Ape-X) layouts; the single-process loop trains exactly the updates the replay ratio owes: "
                   "drop the override")
    return out
