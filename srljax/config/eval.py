"""Evaluation settings (``Experiment.eval``), read by ``srljax.evaluation.evaluator`` and the eval manager.

    python -m launch.local configs/cartpole_ppo.py eval.every_updates=10 eval.episodes=10
    python -m launch.local configs/cartpole_ppo_eval_distributed.py        # an ``eval`` worker in the graph

Kept apart from ``srljax.config`` so that file stays about training; ``srljax.config`` imports
``EvalConfig`` and adds ``eval_problems`` to its own checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation of the current policy on envs of its own, with fixed seeds (see ``srljax/evaluation/evaluator.py``)."""

    every_updates: int = 0
    """evaluate every N params versions (updates); 0: no evaluation. In a distributed layout this adds one
    ``eval`` worker (the eval manager) to the graph; the single-process loop evaluates inline."""
    episodes: int = 10
    """whole episodes per evaluation (their mean, median, min and max go to ``eval.jsonl``)."""
    num_envs: int = 0
    """envs stepped together for an evaluation; 0: one per episode (``episodes``). With fewer, each env
    plays its fixed share of the episodes in turn, so the set of episodes never depends on their lengths."""
    seed: int = 1_000_003
    """seed of the evaluation envs and act key, the same for every evaluation: a params version evaluated
    twice gives the same returns. Different from the training seed so evaluation episodes are not training's."""
    deterministic: bool = True
    """act with the distribution's mode (greedy action for discrete actions, the mean for continuous; DQN
    with epsilon 0); false: sample as in training (with the fixed key above)."""
    keep_best: bool = True
    """keep the policy params of the best evaluated version (highest mean return) in ``RUN_DIR/best/``
    (its own folder: checkpoint rotation never deletes it), with its score and version."""
    final: bool = True
    """evaluate the last params version when the trial ends (if not already evaluated), marked ``final``
    in ``eval.jsonl``, and print it with the best version."""
    video: bool = False
    """record env 0's first episode of every evaluation as ``RUN_DIR/videos/version-<v>.gif`` (its path in
    ``eval.jsonl``; wandb ``eval/video`` when wandb is on). Atari and classic control render; MuJoCo and
    multi-agent tasks are skipped with a note (``srljax/evaluation/video.py`` says why)."""
    video_max_frames: int = 1000
    """frames per video at most (a longer episode's video ends there): bounds memory, ~100 KB per Atari frame."""


def eval_problems(cfg: Any) -> list[str]:
    """Every problem with ``cfg.eval`` (one line each, naming the key and the fix)."""
    e = cfg.eval
    out: list[str] = []
    if e.every_updates < 0:
        out.append(f"eval.every_updates={e.every_updates} must be >= 0 (0: no evaluation)")
    if e.episodes < 1:
        out.append(f"eval.episodes={e.episodes} must be >= 1")
    if e.num_envs < 0:
        out.append(f"eval.num_envs={e.num_envs} must be >= 0 (0: one env per episode)")
    if e.seed < 0:
        out.append(f"eval.seed={e.seed} must be >= 0")
    if e.video_max_frames < 1:
        out.append(f"eval.video_max_frames={e.video_max_frames} must be >= 1")
    return out
