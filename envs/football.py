"""The envpool Football family's options (``env.options`` for ``gfootball/<scenario>-v1``) and its checkpoint reward.

    python -m launch.local configs/football_ppo.py env.id=gfootball/academy_3_vs_1_with_keeper-v1 \\
        env.options.reward=checkpoints

envpool 1.2.5 gives Football's scoring reward only (+1 a goal for, -1 against; its config has no reward option).
``reward=checkpoints`` adds the Football paper's shaped reward (Kurach et al. 2020, section 3.2) here: the
opponent's half is cut into ``CHECKPOINTS`` bands by the ball's distance to the opponent's goal, the first time
our team holds the ball in each band of an episode gives ``CHECKPOINT_REWARD``, and a goal gives every band not
yet collected. The ball's position is read from the ball plane of the super-minimap envpool returns
(72x96x4, channels last: left team, right team, ball, active player) and possession from envpool's
``ball_owned_team`` (0: our team, the left one). The paper's wrapper counts possession by the active player;
here any player of our team, since envpool does not say which player is active outside the frame. Episode
statistics stay the scoring return (the learning reward is the shaped one), so curves compare with random play.
No envpool import here: config checks read the defaults without loading it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.options import option_problems, with_defaults
from srljax.config import EnvConfig

FOOTBALL_OPTIONS: dict[str, Any] = {"reward": "scoring"}  # "scoring" (envpool's) | "checkpoints" (scoring + bands)
REWARDS = ("scoring", "checkpoints")
CHECKPOINTS = 10
CHECKPOINT_REWARD = 0.1
# The super-minimap's extent in Football coordinates: x in [-1, 1] over 96 columns, y in [-0.42, 0.42] over 72 rows.
_BALL_PLANE, _X_HALF, _Y_HALF = 2, 1.0, 0.42


def is_football(env_id: str) -> bool:
    """True for envpool's Football scenarios (``gfootball/academy_empty_goal_close-v1``, ...)."""
    return env_id.startswith("gfootball/")


def football_options(cfg: EnvConfig) -> dict[str, Any]:
    return with_defaults(cfg.options, FOOTBALL_OPTIONS)


def football_option_problems(cfg: EnvConfig) -> list[str]:
    out = option_problems(cfg.options, FOOTBALL_OPTIONS, f"the Football scenario {cfg.id}")
    reward = cfg.options.get("reward", "scoring")
    if not out and reward not in REWARDS:
        out.append(f"env.options.reward={reward!r}: Football takes {' or '.join(REWARDS)} (checkpoints adds the "
                   "Football paper's shaped reward for carrying the ball towards the opponent's goal)")
    return out


def band_edges(checkpoints: int = CHECKPOINTS) -> np.ndarray:
    """Distance to the opponent's goal at or under which band ``k`` is reached: 0.99 (just inside the opponent's
    half) down to 0.19 (the penalty area), evenly spaced."""
    return 0.99 - 0.8 * np.arange(checkpoints) / max(checkpoints - 1, 1)


def ball_distance(frames: np.ndarray) -> np.ndarray:
    """[B] distance of the ball to the opponent's goal (1, 0), read from the minimap's ball plane; inf where the
    plane shows no ball."""
    plane = frames[..., _BALL_PLANE]
    rows, cols = plane.shape[1:]
    flat = plane.reshape(len(plane), -1)
    at = flat.argmax(axis=1)
    x = (at % cols + 0.5) * 2 * _X_HALF / cols - _X_HALF
    y = (at // cols + 0.5) * 2 * _Y_HALF / rows - _Y_HALF
    return np.where(flat.max(axis=1) > 0, np.hypot(1.0 - x, y), np.inf)


class CheckpointReward:
    """The shaped reward's per-env state: how many bands each env's episode has collected."""

    def __init__(self, num_envs: int, checkpoints: int = CHECKPOINTS, reward: float = CHECKPOINT_REWARD):
        self.collected = np.zeros(num_envs, np.int32)
        self._edges = band_edges(checkpoints)
        self._checkpoints, self._reward = checkpoints, reward

    def __call__(self, frames: np.ndarray, scoring: np.ndarray, owned_team: np.ndarray, done: np.ndarray,
                 env_id: np.ndarray) -> np.ndarray:
        """The learning reward of one batch (rows ``env_id``): ``scoring`` plus the bands collected this step."""
        before = self.collected[env_id]
        reached = (ball_distance(frames)[:, None] <= self._edges[None, :]).sum(axis=1)
        now = np.where(owned_team == 0, np.maximum(before, reached), before)
        now = np.where(scoring > 0, self._checkpoints, now)  # a goal pays every band not yet collected
        self.collected[env_id] = np.where(done, 0, now)
        return (scoring + self._reward * (now - before)).astype(np.float32)
