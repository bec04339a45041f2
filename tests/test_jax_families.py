"""The jumanji, craftax and xminigrid families behind the JAX env seam (``envs/jax_envs``): their specs, envpool's
lazy autoreset through ``JaxEnv``, their refusals, and a short PPO run of each through the Anakin loop."""

from __future__ import annotations

import importlib.util
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import jax_envs
from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, TrainerConfig
from srljax.loops.train import train


def _rows(env: jax_envs.JaxEnv, actions: list) -> list:
    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    rows = []
    for a in actions:
        state, ts = step(state, jnp.full((env.spec.num_envs,), a, jnp.int32))
        rows.append(jax.device_get(ts))
    return rows


def _short_ppo(tmp_path, env: EnvConfig, steps: int = 2048) -> list[dict]:
    cfg = Experiment(name="fam", trial="t", total_env_steps=steps, env=env, algo=PPOConfig(num_steps=32),
                     trainer=TrainerConfig(num_minibatches=2, update_epochs=1),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=1))
    result = train(cfg)
    assert result.env_steps == steps
    lines = [json.loads(line) for line in (tmp_path / "fam" / "t" / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == steps // (32 * env.num_envs)
    for line in lines:
        assert all(math.isfinite(line[k]) for k in ("policy_loss", "value_loss", "entropy"))
        assert math.isfinite(line.get("episode_return", 0.0))  # present once an episode has finished
    return lines


# -- xminigrid ----------------------------------------------------------------------------------

def test_xminigrid_reaches_the_goal_as_a_termination_and_the_clock_as_a_truncation():
    pytest.importorskip("xminigrid")
    env = jax_envs.make(EnvConfig(id="xminigrid/MiniGrid-Empty-5x5", num_envs=2, max_episode_steps=100))
    assert env.spec.num_actions == 6 and env.spec.obs_shape == (7 * 7 * 25,) and env.spec.max_episode_steps == 100
    # from (1, 1) facing east: forward, forward, turn clockwise (south), forward, forward onto the goal at (3, 3)
    rows = _rows(env, [0, 0, 1, 0, 0, 2])
    assert [bool(r.terminated[0]) for r in rows] == [False] * 4 + [True, False]
    np.testing.assert_allclose(rows[4].reward, 1 - 0.9 * 5 / 100, rtol=1e-6)  # xminigrid pays the quicker more
    assert (rows[4].episode_length == 5).all() and (rows[5].reward == 0).all()  # then the reset row
    assert (np.array([r.obs.sum(axis=1) for r in rows]) == 7 * 7 * 2).all()  # one tile and one colour per cell

    short = jax_envs.make(EnvConfig(id="xminigrid/MiniGrid-Empty-5x5", num_envs=2, max_episode_steps=4))
    rows = _rows(short, [1] * 10)  # turning on the spot: only the clock ends it
    assert [bool(r.truncated.all()) for r in rows] == [False, False, False, True, False] * 2
    assert not any(r.terminated.any() for r in rows) and (rows[3].episode_length == 4).all()


def test_xminigrid_refuses_unknown_tasks_options_and_the_xland_rulesets():
    pytest.importorskip("xminigrid")
    (problem,) = envs.problems(EnvConfig(id="xminigrid/MiniGrid-Nope"))
    assert "xminigrid has no task 'MiniGrid-Nope'" in problem and "MiniGrid-DoorKey-5x5" in problem
    (problem,) = envs.problems(EnvConfig(id="xminigrid/XLand-MiniGrid-R1-9x9"))
    assert "benchmark's rulesets" in problem and "MiniGrid-Empty-8x8" in problem
    (problem,) = envs.problems(EnvConfig(id="xminigrid/MiniGrid-Empty-8x8", options={"max_steps": 9}))
    assert "does not take" in problem and "height, width, view_size" in problem and "env.max_episode_steps" in problem
    assert "must be odd" in envs.problems(EnvConfig(id="xminigrid/MiniGrid-Empty-8x8", options={"view_size": 4}))[0]
    env = jax_envs.make(EnvConfig(id="xminigrid/MiniGrid-Empty-8x8", options={"view_size": 5}))
    assert env.spec.obs_shape == (5 * 5 * 25,)


def test_xminigrid_ppo_runs_in_the_compiled_loop(tmp_path):
    pytest.importorskip("xminigrid")
    _short_ppo(tmp_path, EnvConfig(id="xminigrid/MiniGrid-Empty-5x5", num_envs=16))


# -- jumanji ------------------------------------------------------------------------------------

def test_jumanji_snake_maps_its_observation_mask_and_wall_death():
    pytest.importorskip("jumanji")
    env = jax_envs.make(EnvConfig(id="jumanji/Snake-v1", num_envs=3))
    spec = env.spec
    assert spec.obs_keys == ("grid", "step_count", "action_mask") and spec.obs_key_sizes == (12 * 12 * 5, 1, 4)
    assert spec.legal_actions == (12 * 12 * 5 + 1, 12 * 12 * 5 + 5) and spec.max_episode_steps == 4000
    rows = _rows(env, [0] * 14)  # always up: every snake meets the top wall within 12 steps
    terminated = np.array([r.terminated for r in rows])
    assert (terminated.sum(axis=0) >= 1).all() and not np.array([r.truncated for r in rows]).any()
    for e in range(3):
        end = int(np.argmax(terminated[:, e]))
        assert rows[end].episode_length[e] == end + 1 and rows[end + 1].reward[e] == 0
        assert not rows[end + 1].terminated[e]  # the reset row
    step_count = np.array([r.obs[:, 12 * 12 * 5] for r in rows])
    assert step_count[0].tolist() == [1, 1, 1]  # jumanji's own leaf, kept


def test_jumanji_time_limit_and_folded_multi_discrete_actions():
    pytest.importorskip("jumanji")
    env = jax_envs.make(EnvConfig(id="jumanji/Game2048-v1", num_envs=2, max_episode_steps=5))
    assert env.spec.obs_keys == ("board", "action_mask") and env.spec.legal_actions == (16, 20)
    rows = _rows(env, [0, 1, 2, 3, 0, 1, 2])
    assert [bool(r.truncated.all()) for r in rows] == [False] * 4 + [True, False, False]
    np.testing.assert_allclose(rows[4].episode_return, np.sum([r.reward for r in rows[:5]], axis=0), rtol=1e-6)
    tetris = jax_envs.make(EnvConfig(id="jumanji/Tetris-v0", num_envs=2))  # rotation x column: one masked choice
    assert tetris.spec.action_kind == "discrete" and tetris.spec.num_actions == 40 and tetris.spec.legal_actions
    rows = _rows(tetris, [1, 13])
    assert all(r.obs.shape == (2, tetris.spec.obs_shape[0]) for r in rows)


def test_jumanji_refuses_unknown_envs_and_options():
    pytest.importorskip("jumanji")
    (problem,) = envs.problems(EnvConfig(id="jumanji/Snek-v1"))
    assert "jumanji has no env 'Snek-v1'" in problem and "Snake-v1" in problem
    (problem,) = envs.problems(EnvConfig(id="jumanji/Snake-v1", options={"rows": 8}))
    assert "does not take" in problem and "num_cols, num_rows, time_limit" in problem
    env = jax_envs.make(EnvConfig(id="jumanji/Snake-v1", options={"num_rows": 6, "num_cols": 6}))
    assert env.spec.obs_key_sizes[0] == 6 * 6 * 5


def test_jumanji_ppo_runs_in_the_compiled_loop(tmp_path):
    pytest.importorskip("jumanji")
    _short_ppo(tmp_path, EnvConfig(id="jumanji/Snake-v1", num_envs=16))


# -- craftax ------------------------------------------------------------------------------------

def test_craftax_refuses_unknown_envs_and_options(monkeypatch):
    pytest.importorskip("craftax")
    (problem,) = envs.problems(EnvConfig(id="craftax/Craftax-Classic-v1"))
    assert "craftax has no env" in problem and "Craftax-Classic-Symbolic-v1" in problem
    (problem,) = envs.problems(EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1", options={"day": 10}))
    assert "does not take" in problem and "day_length" in problem and "env.max_episode_steps" in problem
    assert envs.problems(EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1", options={"day_length": 10})) == []
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "craftax" else real(name, *a))
    (problem,) = envs.problems(EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1"))
    assert "needs the craftax package" in problem and "pip install -e '.[jaxenvs]'" in problem


@pytest.mark.slow
def test_craftax_classic_steps_with_its_clock_as_a_truncation(tmp_path):
    """Slow: craftax's world generation takes minutes to compile on a loaded 2-core CPU."""
    pytest.importorskip("craftax")
    env = jax_envs.make(EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1", num_envs=2, max_episode_steps=3))
    assert env.spec.obs_shape == (1345,) and env.spec.num_actions == 17 and env.spec.max_episode_steps == 3
    rows = _rows(env, [0, 0, 0, 0, 0, 0, 0])  # noop
    assert [bool(r.truncated.all()) for r in rows] == [False, False, True, False, False, False, True]
    assert not any(r.terminated.any() for r in rows) and (rows[2].episode_length == 3).all()
    assert all(np.isfinite(r.obs).all() and r.obs.min() >= 0 for r in rows)
    _short_ppo(tmp_path, EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1", num_envs=16))
