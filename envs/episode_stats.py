"""True episode statistics (whole-game, unclipped return and length), kept per env.

Fed one received batch at a time, in any env order, so it works for async env rings::

    stats = EpisodeStats(num_envs=4)
    stats.begin()                                   # every env was just reset
    ret, length = stats.update(env_id, raw_reward, done, game_over)
    # ret[i] is NaN and length[i] is 0 unless env_id[i]'s whole game ended on this row

``done`` is the learning episode's end (terminated or truncated); ``game_over`` is the end the
statistics should report. They differ for Atari with episodic life: a lost life is a done (the
learner bootstraps with 0) but the game, and so the accumulated return, goes on.

Lazy autoreset: the row right after a done (and the first row after a reset) is a reset row. It
carries no agent action, reward 0, and is not counted in the length. This matches envpool's
``elapsed_step``, which stays put on the reset row after a lost life and restarts at 0 on the
reset row after a game ends.
"""

from __future__ import annotations

import numpy as np


class EpisodeStats:
    """Per-env return/length accumulators indexed by env_id."""

    def __init__(self, num_envs: int):
        # float64 so that long games of small rewards do not lose precision.
        self._return = np.zeros(num_envs, np.float64)
        self._length = np.zeros(num_envs, np.int64)
        # True: the next row received for this env is a reset row (no action took effect).
        self._next_is_reset_row = np.ones(num_envs, bool)

    def begin(self, env_id: np.ndarray | None = None) -> None:
        """Forget the running games of ``env_id`` (all envs when None): they were just reset."""
        index = slice(None) if env_id is None else np.asarray(env_id)
        self._return[index] = 0.0
        self._length[index] = 0
        self._next_is_reset_row[index] = True

    def update(
        self, env_id: np.ndarray, raw_reward: np.ndarray, done: np.ndarray, game_over: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Account one batch; return ``(episode_return float32, episode_length int32)`` rows."""
        env_id = np.asarray(env_id)
        done = np.asarray(done, bool)
        game_over = np.asarray(game_over, bool)
        counted = ~self._next_is_reset_row[env_id]
        self._return[env_id] += np.where(counted, np.asarray(raw_reward, np.float64), 0.0)
        self._length[env_id] += counted
        episode_return = np.full(env_id.shape, np.nan, np.float32)
        episode_length = np.zeros(env_id.shape, np.int32)
        ended = env_id[game_over]
        episode_return[game_over] = self._return[ended]
        episode_length[game_over] = self._length[ended]
        self._return[ended] = 0.0
        self._length[ended] = 0
        # A game over is always a done; `|` guards envs that report only one of them.
        self._next_is_reset_row[env_id] = done | game_over
        return episode_return, episode_length
