"""The synthetic env (envs/synthetic.py): envpool's semantics, wall time without CPU, determinism, its checks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import envs
from srljax.config import EnvConfig

FACTORY = "envs.synthetic:make_synthetic"
ROOT = Path(__file__).resolve().parents[1]


def make(num_envs=4, batch_size=0, seed=0, **options):
    return envs.make(EnvConfig(factory=FACTORY, num_envs=num_envs, batch_size=batch_size, options=options), seed=seed)


def test_shapes_dtypes_and_action_kinds():
    env = make(obs_shape="84x84x4", obs_dtype="uint8", step_ms=0.0)
    assert env.spec.obs_shape == (84, 84, 4) and env.spec.num_actions == 2
    ts = env.reset()
    assert ts.obs.shape == (4, 84, 84, 4) and ts.obs.dtype == np.uint8 and ts.obs.std() > 0
    cont = make(action_kind="continuous", action_dim=3, obs_shape="17", step_ms=0.0)
    assert cont.spec.action_shape == (3,) and cont.spec.action_low == (-1.0,) * 3
    cont.reset()
    ts = cont.step(np.zeros((4, 3), np.float32))
    assert ts.obs.shape == (4, 17) and ts.obs.dtype == np.float32
    assert np.all((ts.reward > 0) & (ts.reward <= 1))  # 1 - |0 - target|, target in [-1, 1]


def test_lazy_autoreset_and_true_episode_stats():
    env = make(num_envs=2, episode_length=3, step_ms=0.0)
    ts = env.reset()
    returns, lengths = [], []
    for t in range(8):
        ts = env.step(np.zeros(2, np.int32))
        done = ts.terminated
        if t in (2, 6):  # the third step ends the episode: terminated, stats out; then a reset row, three more
            assert done.all() and not ts.truncated.any()
            returns.append(ts.episode_return.copy())
            lengths.append(ts.episode_length.copy())
        elif t in (3, 7):  # the reset row: reward 0, no flags, no stats
            assert not done.any() and np.all(ts.reward == 0) and np.isnan(ts.episode_return).all()
        else:
            assert not done.any()
    assert lengths[0].tolist() == lengths[1].tolist() == [3, 3]
    assert 0 <= returns[0].min() and returns[0].max() <= 3


def test_the_reward_follows_the_target_so_a_policy_can_learn_it():
    env = make(num_envs=64, num_actions=4, step_ms=0.0, episode_length=1000)
    env.reset()
    # the oracle: the target of each env's current row (what an observation tells a learned policy)
    target = env._target[(env._start + env._elapsed) % len(env._target)]
    right = env.step(target.astype(np.int32))
    target = env._target[(env._start + env._elapsed) % len(env._target)]
    wrong = env.step(((target + 1) % 4).astype(np.int32))
    assert np.all(right.reward == 1) and np.all(wrong.reward == 0)


def test_each_batch_step_costs_its_wall_time_and_almost_no_cpu():
    env = make(num_envs=16, step_ms=20.0, obs_shape="84x84x4", obs_dtype="uint8")
    env.reset()
    start, cpu = time.monotonic(), time.process_time()
    for _ in range(10):
        env.step(np.zeros(16, np.int32))
    wall, cpu = time.monotonic() - start, time.process_time() - cpu
    assert 0.2 <= wall < 0.4, wall
    assert cpu < 0.25 * wall, (cpu, wall)


def test_an_env_ring_overlaps_its_batches():
    env = make(num_envs=8, batch_size=4, step_ms=30.0)
    env.async_reset()
    seen = []
    start = time.monotonic()
    for _ in range(10):
        ts = env.recv()
        seen.append(ts.env_id.tolist())
        env.send(np.zeros(4, np.int32), ts.env_id)
    wall = time.monotonic() - start
    assert seen[:2] == [[0, 1, 2, 3], [4, 5, 6, 7]] and seen[2] == [0, 1, 2, 3]
    # ten batches of 4 in about five step times: two halves in flight at once
    assert 0.12 <= wall < 0.25, wall
    with pytest.raises(RuntimeError, match="sync mode"):
        env.step(np.zeros(8, np.int32))


def rollout(seed, steps=50, **options):
    env = make(num_envs=4, seed=seed, step_ms=0.0, random_length=True, episode_length=5, **options)
    rng = np.random.default_rng(0)
    ts = env.reset()
    out = [ts]
    for _ in range(steps):
        out.append(env.step(rng.integers(0, 2, 4).astype(np.int32)))
    return out


def test_deterministic_per_seed_and_random_lengths_vary():
    a, b, c = rollout(1), rollout(1), rollout(2)
    for x, y in zip(a, b):
        for field in ("obs", "reward", "terminated", "episode_length"):
            assert np.array_equal(getattr(x, field), getattr(y, field))
    assert any(not np.array_equal(x.obs, y.obs) for x, y in zip(a, c))
    lengths = {int(n) for ts in a for n in ts.episode_length if n}
    assert len(lengths) >= 3 and max(lengths) <= 9


def test_bad_options_are_named_before_launch():
    assert envs.problems(EnvConfig(factory=FACTORY, options={"obs_shape": "84by84"}))[0].startswith(
        "env.options.obs_shape='84by84' is not a shape")
    assert "use float32 or uint8" in envs.problems(EnvConfig(factory=FACTORY, options={"obs_dtype": "int16"}))[0]
    assert "did you mean step_ms" in envs.problems(EnvConfig(factory=FACTORY, options={"step_m": 1.0}))[0]
    assert "expects a int" in envs.problems(EnvConfig(factory=FACTORY, options={"episode_length": "5"}))[0]
    assert envs.problems(EnvConfig(factory=FACTORY, options={"step_ms": 5, "obs_shape": "17"})) == []
    with pytest.raises(ValueError, match="env.options.episode_length"):
        envs.make(EnvConfig(factory=FACTORY, max_episode_steps=5), seed=0)


def test_ppo_learns_the_synthetic_task_from_the_command_line(tmp_path):
    """A user's path: launch.local with the factory and its options; PPO beats chance (1/4 per step) clearly."""
    cmd = [sys.executable, "-m", "launch.local", "configs/cartpole_ppo.py", "-e", "synthetic", "-f", "t",
           f"log.run_root={tmp_path}", "log.wandb=disabled", "checkpoint.final=false", "total_env_steps=40000",
           f"env.factory={FACTORY}", "env.options.step_ms=0.0", "env.options.num_actions=4",
           "env.options.episode_length=20", "env.options.obs_shape=8", "trainer.lr=1e-3"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "synthetic" / "t" / "metrics.jsonl").read_text().splitlines()]
    returns = [x["episode_return"] for x in lines if x.get("episode_return") is not None]
    # chance is 5 per 20-step episode (the 20-episode mean: sd ~0.4)
    assert returns[0] < 7 and max(returns[-3:]) >= 10, returns
