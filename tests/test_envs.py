"""The environment seam: specs, sync/async rounds, lazy autoreset and true episode statistics."""

from __future__ import annotations

import dataclasses

import envpool
import numpy as np
import pytest

import envs
from envs.probe import ConstantRewardTimeLimit, TerminalReward
from srljax.config import EnvConfig, Experiment

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered:UserWarning")

GYM_FACTORY = "envs.gym_adapter:make_gymnasium"


@pytest.mark.parametrize(
    "env_id, obs_shape, obs_dtype, kind, num_actions, action_shape",
    [
        ("CartPole-v1", (4,), "float32", "discrete", 2, ()),
        ("Pong-v5", (4, 84, 84), "uint8", "discrete", 6, ()),
        ("HalfCheetah-v4", (17,), "float32", "continuous", 0, (6,)),
    ],
)
def test_envpool_spec_and_dtypes(env_id, obs_shape, obs_dtype, kind, num_actions, action_shape):
    env = envs.make(EnvConfig(id=env_id, num_envs=2), seed=0)
    spec = env.spec
    assert (spec.obs_shape, spec.obs_dtype, spec.action_kind) == (obs_shape, obs_dtype, kind)
    assert (spec.num_actions, spec.action_shape, spec.num_envs, spec.batch_size) == (num_actions, action_shape, 2, 2)
    if kind == "continuous":
        assert spec.action_low == (-1.0,) * 6 and spec.action_high == (1.0,) * 6
    ts = env.reset()
    assert ts.obs.shape == (2, *obs_shape) and ts.obs.dtype == np.dtype(obs_dtype)
    action = np.zeros((2, *action_shape), spec.action_dtype)
    ts = env.step(action)
    assert ts.reward.dtype == np.float32 and ts.env_id.dtype == np.int32
    assert ts.terminated.dtype == bool and ts.truncated.dtype == bool
    assert ts.episode_return.dtype == np.float32 and ts.episode_length.dtype == np.int32
    env.close()


ASYNC_CASES = {
    "envpool": dict(id="CartPole-v1"),
    "gymnasium": dict(id="CartPole-v1", factory=GYM_FACTORY),
    "probe": dict(factory="envs.probe:make_constant_reward"),
}


@pytest.mark.parametrize("case", ASYNC_CASES)
def test_async_ring_rounds_and_truncation_stats(case):
    horizon = 5
    env = envs.make(EnvConfig(num_envs=4, batch_size=2, max_episode_steps=horizon, **ASYNC_CASES[case]), seed=0)
    assert (env.spec.num_envs, env.spec.batch_size) == (4, 2)
    with pytest.raises(RuntimeError, match="async_reset"):
        env.reset()
    env.async_reset()
    rows_seen = {i: 0 for i in range(4)}  # rows received per env, the reset row included
    episodes = {i: 0 for i in range(4)}
    for _ in range(40):
        ts = env.recv()
        assert ts.obs.shape[0] == 2 and ts.env_id.dtype == np.int32 and len(set(ts.env_id.tolist())) == 2
        for row, i in enumerate(ts.env_id.tolist()):
            step_in_episode = rows_seen[i] % (horizon + 1)  # 0 is the reset row
            rows_seen[i] += 1
            assert ts.reward[row] == (0.0 if step_in_episode == 0 else 1.0)
            assert not ts.terminated[row]
            assert ts.truncated[row] == (step_in_episode == horizon)
            if ts.truncated[row]:
                episodes[i] += 1
                assert (ts.episode_return[row], ts.episode_length[row]) == (horizon, horizon)
            else:
                assert np.isnan(ts.episode_return[row]) and ts.episode_length[row] == 0
        env.send(np.zeros(2, np.int32), ts.env_id)
    assert all(count >= 2 for count in episodes.values()), episodes
    env.close()


def test_sync_cartpole_reset_row_is_not_counted():
    """Two back-to-back episodes both report length 5: the reward-0 reset row is not a step."""
    env = envs.make(EnvConfig(id="CartPole-v1", num_envs=4, max_episode_steps=5), seed=0)
    assert env.reset().env_id.tolist() == [0, 1, 2, 3]
    rewards, lengths = [], []
    for _ in range(12):
        ts = env.step(np.zeros(4, np.int32))
        assert ts.env_id.tolist() == [0, 1, 2, 3] and not ts.terminated.any()
        rewards.append(ts.reward[0])
        lengths.append(ts.episode_length[0])
    assert rewards == [1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 0]
    assert lengths == [0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 5, 0]
    partial = env.step(np.zeros(2, np.int32), np.array([3, 1], np.int32))  # a subset, in sync mode
    assert partial.env_id.tolist() == [3, 1]


@pytest.mark.parametrize("typo, expected", [("Pong-v4x", "Pong-v5"), ("CartPol-v1", "CartPole-v1")])
def test_unknown_id_lists_close_matches_and_factory(typo, expected):
    with pytest.raises(ValueError) as error:
        envs.make(EnvConfig(id=typo), seed=0)
    message = str(error.value)
    assert repr(typo) in message and expected in message and "factory" in message


def test_atari_options_on_non_atari_id_warn():
    with pytest.warns(UserWarning, match="reward_clip=False"):
        envs.make(EnvConfig(id="CartPole-v1", options={"reward_clip": False}), seed=0).close()


def _twin(env_id: str, **options) -> envpool.python.protocol.GymnasiumEnvPool:
    """A bare envpool instance built like ours, to compare against its raw info."""
    return envpool.make(env_id, env_type="gymnasium", **options)


def test_atari_whole_game_stats_span_lives_and_are_unclipped():
    """SpaceInvaders (3 lives, rewards 5..30) with episodic life and reward clipping.

    Fails if stats restart on a lost life (return would be one life's), if clipped rewards
    were summed, or if reset rows were counted as steps.
    """
    options = dict(num_envs=2, episodic_life=True, reward_clip=True)
    env = envs.make(EnvConfig(id="SpaceInvaders-v5", num_envs=2, options={"episodic_life": True, "reward_clip": True}),
                    seed=7)
    twin = _twin("SpaceInvaders-v5", seed=7, **options)
    env.reset(), twin.reset()
    raw_sum, clipped_sum, lives_lost = np.zeros(2), np.zeros(2), np.zeros(2, int)
    finished = np.zeros(2, bool)
    rng = np.random.default_rng(0)
    for _ in range(3000):
        action = rng.integers(0, env.spec.num_actions, size=2).astype(np.int32)
        ts = env.step(action)
        obs, reward, terminated, truncated, info = twin.step(action)
        np.testing.assert_array_equal(ts.obs, obs)  # the twin is a faithful reference
        np.testing.assert_array_equal(ts.reward, reward)
        raw_sum += np.where(finished, 0, info["reward"])
        clipped_sum += np.where(finished, 0, reward)
        game_over = info["terminated"].astype(bool) | truncated
        life_lost = terminated & ~game_over
        lives_lost += life_lost & ~finished
        assert np.isnan(ts.episode_return[life_lost]).all() and (ts.episode_length[life_lost] == 0).all()
        for i in np.flatnonzero(game_over & ~finished):
            assert lives_lost[i] >= 1, "the game should have lost lives before it ended"
            assert ts.episode_return[i] == pytest.approx(raw_sum[i])
            assert raw_sum[i] > clipped_sum[i] > 0, "SpaceInvaders rewards exceed 1: clipping must show"
            assert ts.episode_length[i] == info["elapsed_step"][i]
            finished[i] = True
        assert np.isnan(ts.episode_return[~game_over]).all()
        if finished.all():
            break
    assert finished.all()
    env.close()


def test_pong_truncation_reports_raw_return_and_is_not_termination():
    options = dict(num_envs=2, episodic_life=True, reward_clip=True, max_episode_steps=150)
    env = envs.make(EnvConfig(id="Pong-v5", num_envs=2, max_episode_steps=150,
                              options={"episodic_life": True, "reward_clip": True}), seed=3)
    twin = _twin("Pong-v5", seed=3, **options)
    env.reset(), twin.reset()
    raw_sum = np.zeros(2)
    rng = np.random.default_rng(1)
    for step in range(1, 151):
        action = rng.integers(0, 6, size=2).astype(np.int32)
        ts = env.step(action)
        *_, info = twin.step(action)
        raw_sum += info["reward"]
    assert ts.truncated.all() and not ts.terminated.any()
    assert (ts.episode_length == 150).all()
    np.testing.assert_allclose(ts.episode_return, raw_sum)
    assert (raw_sum != 0).any(), "some point should have been scored in 150 steps"
    after = env.step(np.zeros(2, np.int32))
    assert (after.reward == 0).all() and np.isnan(after.episode_return).all()


def test_continuous_actions_are_clipped_to_bounds():
    env = envs.make(EnvConfig(id="HalfCheetah-v4", num_envs=2), seed=0)
    twin = _twin("HalfCheetah-v4", num_envs=2, seed=0)
    env.reset(), twin.reset()
    wild = np.array([[5.0] * 6, [-3.0] * 6], np.float32)
    ts = env.step(wild)
    obs, reward, *_ = twin.step(np.clip(wild, -1, 1).astype(np.float64))
    np.testing.assert_array_equal(ts.obs, obs.astype(np.float32))
    # MuJoCo clamps the control itself, but envpool charges the control cost on the raw action.
    np.testing.assert_allclose(ts.reward, reward.astype(np.float32))


def test_gymnasium_adapter_matches_envpool_semantics():
    common = dict(id="CartPole-v1", num_envs=2, max_episode_steps=5)
    pool = envs.make(EnvConfig(**common), seed=0)
    gym = envs.make(EnvConfig(factory=GYM_FACTORY, **common), seed=0)
    assert gym.spec == pool.spec
    for first in (pool.reset(), gym.reset()):
        assert (first.reward == 0).all() and first.obs.dtype == np.float32
    for _ in range(13):
        a, b = pool.step(np.zeros(2, np.int32)), gym.step(np.zeros(2, np.int32))
        for field in ("reward", "terminated", "truncated", "env_id", "episode_length"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        np.testing.assert_array_equal(a.episode_return, b.episode_return)  # NaNs compare equal here


def not_a_vec_env(cfg: EnvConfig, seed: int) -> object:
    return object()


def test_factory_errors_are_explained():
    with pytest.raises(ValueError, match="must look like 'package.module:name'"):
        envs.make(EnvConfig(factory="no_colon_here"), seed=0)
    with pytest.raises(ValueError, match="has no 'nope'"):
        envs.make(EnvConfig(factory="envs.probe:nope"), seed=0)
    with pytest.raises(TypeError, match="spec, reset"):
        envs.make(EnvConfig(factory=f"{__name__}:not_a_vec_env"), seed=0)
    with pytest.raises(ValueError, match="max_episode_steps"):
        envs.make(EnvConfig(factory="envs.probe:make_constant_reward"), seed=0)


def _td_errors(rows: list, values: list, gamma: float, bootstrap_truncation: bool) -> np.ndarray:
    """One-step TD errors of valid transitions (those that start at a row that is not done)."""
    errors = []
    for t in range(len(rows) - 1):
        if rows[t].terminated[0] or rows[t].truncated[0]:
            continue  # crosses an episode boundary
        nxt = rows[t + 1]
        cut = nxt.terminated[0] or (nxt.truncated[0] and not bootstrap_truncation)
        errors.append(nxt.reward[0] + gamma * values[t + 1] * (not cut) - values[t])
    return np.array(errors)


def test_constant_reward_probe_needs_truncation_bootstrapping():
    env = envs.make(EnvConfig(factory="envs.probe:make_constant_reward", num_envs=1, max_episode_steps=3), seed=0)
    assert isinstance(env, ConstantRewardTimeLimit) and isinstance(env, envs.VecEnv)
    rows = [env.reset()] + [env.step(np.zeros(1, np.int32)) for _ in range(8)]
    assert [float(r.reward[0]) for r in rows] == [0, 1, 1, 1, 0, 1, 1, 1, 0]
    assert [bool(r.truncated[0]) for r in rows] == [False, False, False, True, False, False, False, True, False]
    assert not any(r.terminated[0] for r in rows)
    assert all((r.obs == rows[0].obs).all() for r in rows)  # value cannot see time
    assert (rows[3].episode_return[0], rows[3].episode_length[0]) == (3.0, 3)
    gamma = 0.9
    value = env.true_value(gamma)
    assert value == pytest.approx(10.0)
    values = [value] * len(rows)
    np.testing.assert_allclose(_td_errors(rows, values, gamma, bootstrap_truncation=True), 0, atol=1e-6)
    assert np.abs(_td_errors(rows, values, gamma, bootstrap_truncation=False)).max() > 5


def test_terminal_reward_probe_values_are_exact():
    env = TerminalReward(num_envs=2, length=3, batch_size=1)
    env.async_reset()
    rows = []
    for _ in range(12):
        ts = env.recv()
        if ts.env_id[0] == 1:
            rows.append(ts)
        env.send(np.ones(1, np.int32), ts.env_id)
    indices = [int(np.argmax(r.obs[0])) for r in rows]
    assert indices == [0, 1, 2, 3, 0, 1]
    assert [float(r.reward[0]) for r in rows] == [0, 0, 0, 1, 0, 0]
    assert [bool(r.terminated[0]) for r in rows] == [False, False, False, True, False, False]
    assert (rows[3].episode_return[0], rows[3].episode_length[0]) == (1.0, 3)
    gamma = 0.5
    values = [float(env.true_value(r.obs, gamma)[0]) for r in rows]
    assert values[:3] == [0.25, 0.5, 1.0]
    np.testing.assert_allclose(_td_errors(rows, values, gamma, bootstrap_truncation=True), 0, atol=1e-6)


def test_env_options_are_checked_by_their_family_before_launch():
    """Atari's options by name, type and range; a user's factory by its declared ``make_fn.options``; a typo
    names the close option. Fails if env.options were passed through unchecked."""
    from srljax.config import apply_overrides

    cfg = apply_overrides(Experiment(env=EnvConfig(id="Pong-v5")), ["env.options.reward_clp=false",
                                                                     "env.options.stack_num=two",
                                                                     "env.options.repeat_action_probability=1.5"])
    found = envs.problems(cfg.env)
    assert any("env.options.reward_clp: unknown option" in p and "reward_clip" in p for p in found), found
    assert any("env.options.stack_num='two'" in p and "expects a int" in p for p in found), found
    assert any("repeat_action_probability=1.5 must be in [0, 1]" in p for p in found), found
    good = apply_overrides(Experiment(env=EnvConfig(id="Pong-v5")), ["env.options.reward_clip=false"])
    assert good.env.options == {"reward_clip": False} and envs.problems(good.env) == []
    family = EnvConfig(factory="tests.parity_env:make_env", num_envs=1, max_episode_steps=4, options={"rewrd": 2.0})
    assert any("env.options.rewrd: unknown option" in p and "reward" in p for p in envs.problems(family))
    family = dataclasses.replace(family, options={"reward": 2.0})
    assert envs.problems(family) == []
    env = envs.make(family, seed=0)
    env.reset()
    ts = env.step(np.zeros(1, np.int32))  # step 0: parity 0, the right action pays the option's reward
    assert float(ts.reward[0]) == 2.0
    env.close()
