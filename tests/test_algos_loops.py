"""The two compiled minibatch loops agree, and the CNN (unrolled, uint8 frames) update runs."""

from __future__ import annotations

import jax
import numpy as np

from algos.ppo import make_ppo
from algos.testing import random_trajectory
from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig
from srljax.types import EnvSpec

CARTPOLE = EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2)
PONG = EnvSpec(id="Pong-v5", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6)


def test_scan_and_unrolled_loops_compute_the_same_update():
    cfg = Experiment(
        env=EnvConfig(num_envs=4),
        algo=PPOConfig(num_steps=8, normalize_obs=True, normalize_reward=True),
        trainer=TrainerConfig(num_minibatches=2, update_epochs=2),
    )
    traj = random_trajectory(CARTPOLE, 8, 4, seed=5)
    results = []
    for loop in ("scan", "unroll"):
        algo = make_ppo(cfg, CARTPOLE, loop=loop)
        results.append(jax.jit(algo.update)(algo.init(jax.random.PRNGKey(0)), traj))
    for a, b in zip(jax.tree.leaves(results[0]), jax.tree.leaves(results[1])):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_nature_cnn_update_on_uint8_frames():
    cfg = Experiment(
        env=EnvConfig(num_envs=2), algo=PPOConfig(num_steps=4), trainer=TrainerConfig(num_minibatches=1, update_epochs=1)
    )
    algo = make_ppo(cfg, PONG)  # default loop for the CNN: unrolled
    state = jax.jit(algo.init)(jax.random.PRNGKey(0))
    traj = random_trajectory(PONG, 4, 2)
    assert traj.obs.dtype == np.uint8
    new, metrics = jax.jit(algo.update)(state, traj)
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert int(new.step) == 1
    assert not np.allclose(new.params["params"]["policy_head"]["kernel"], state.params["params"]["policy_head"]["kernel"])
