"""Football's checkpoint reward (``env.options.reward=checkpoints``, envs/football.py): the bands' arithmetic on
hand-made frames, and on envpool's own scenario, where carrying the ball towards the goal pays and the episode
statistics keep the score."""

from __future__ import annotations

import numpy as np
import pytest

import envs
from envs.football import CHECKPOINTS, CheckpointReward, ball_distance, band_edges
from launch.cli import run_cli
from srljax.config import EnvConfig

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered:UserWarning")
RUN_TO_SCORE = "gfootball/academy_run_to_score_with_keeper-v1"
RIGHT = 5  # Football's action set: idle, left, top-left, top, top-right, right, ...


def _frames(*cols: int, row: int = 36) -> np.ndarray:
    """Minimap frames with the ball at (row, col) of each row's plane; col -1: no ball drawn."""
    frames = np.zeros((len(cols), 72, 96, 4), np.uint8)
    for i, col in enumerate(cols):
        if col >= 0:
            frames[i, row, col, 2] = 255
    return frames


def test_ball_distance_reads_the_ball_plane_in_football_coordinates():
    d = ball_distance(_frames(48, 95, 0, -1))
    assert d[0] == pytest.approx(1.0, abs=0.02)  # the centre spot
    assert d[1] == pytest.approx(0.0, abs=0.02)  # on the opponent's goal line
    assert d[2] == pytest.approx(2.0, abs=0.02)  # our own goal line
    assert d[3] == np.inf
    off_centre = ball_distance(_frames(95, row=0))[0]  # the goal line's top corner: (1, -0.42)
    assert off_centre == pytest.approx(0.42, abs=0.02)


def _col_at(distance: float) -> int:
    """A column whose centre lies ``distance`` from the goal on the centre row."""
    return int(round(((1.0 - distance) + 1.0) * 48 - 0.5))


def test_bands_are_paid_once_in_order_a_goal_pays_the_rest_and_a_new_episode_starts_over():
    shaper, ids = CheckpointReward(2), np.array([0, 1])
    no_goal, none_done = np.zeros(2, np.float32), np.zeros(2, bool)
    edges = band_edges()
    d = (edges[3] + edges[4]) / 2  # inside band 3: bands 0..3 reached
    r = shaper(_frames(_col_at(d), _col_at(d)), no_goal, np.array([0, 1]), none_done, ids)
    np.testing.assert_allclose(r, [0.4, 0.0])  # only our team's possession pays (team 1 is the opponent)
    r = shaper(_frames(_col_at(0.95), _col_at(d)), no_goal, np.array([0, -1]), none_done, ids)
    np.testing.assert_allclose(r, [0.0, 0.0])  # going back pays nothing; a loose ball pays nothing
    r = shaper(_frames(_col_at(d), 0), np.array([1.0, -1.0], np.float32), np.array([-1, 1]), np.array([True, True]),
               ids)
    np.testing.assert_allclose(r, [1.0 + 0.1 * (CHECKPOINTS - 4), -1.0])  # the goal pays the six bands left
    np.testing.assert_array_equal(shaper.collected, [0, 0])  # both episodes ended
    r = shaper(_frames(_col_at(0.1), _col_at(0.1)), no_goal, np.array([0, 0]), none_done, np.array([1, 0]))
    np.testing.assert_allclose(r, [1.0, 1.0])  # rows follow env_id; every band at once in the penalty area


def test_running_right_on_envpool_pays_bands_and_the_statistics_keep_the_score():
    cfg = EnvConfig(id=RUN_TO_SCORE, num_envs=2, options={"reward": "checkpoints"})
    env = envs.make(cfg, seed=1)
    try:
        env.reset()
        shaped, returns = 0.0, []
        for _ in range(60):
            ts = env.step(np.full(2, RIGHT, np.int32))
            shaped += float(ts.reward.sum())
            done = ts.terminated | ts.truncated
            returns += list(ts.episode_return[done])
        assert shaped >= 2 * 0.3  # each env's attacker carried the ball across at least three bands
        assert all(r in (-1.0, 0.0, 1.0) for r in returns)  # the score, not the shaped sum
    finally:
        env.close()
    plain = envs.make(EnvConfig(id=RUN_TO_SCORE, num_envs=2), seed=1)
    try:
        plain.reset()
        rewards = [plain.step(np.full(2, RIGHT, np.int32)).reward for _ in range(60)]
        assert all(set(np.unique(r)) <= {-1.0, 0.0, 1.0} for r in rewards)
    finally:
        plain.close()


def test_an_unknown_reward_is_refused_before_launch(capsys):
    code = run_cli(lambda cfg, resume=False: 0, ["configs/football_ppo.py", "env.options.reward=dense",
                                                 "log.wandb=disabled"], "launch", "")
    err = capsys.readouterr().err
    assert code == 2 and "env.options.reward='dense'" in err and "checkpoints" in err, err
    code = run_cli(lambda cfg, resume=False: 0, ["configs/football_ppo.py", "env.options.rewards=checkpoints",
                                                 "log.wandb=disabled"], "launch", "")
    err = capsys.readouterr().err
    assert code == 2 and "did you mean reward" in err, err
