"""IMPALA: the loss against hand-computed values, and ``make_impala`` through the seam (fast; CPU)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import algos
from algos.distributions import CATEGORICAL
from algos.impala import impala_loss
from algos.testing import random_trajectory
from srljax.config import ConfigError, EnvConfig, Experiment, IMPALAConfig, TrainerConfig, apply_overrides, validate
from srljax.types import EnvSpec

LN2 = math.log(2.0)
CARTPOLE = EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2,
                   num_envs=4, batch_size=4)


def tiny_batch():
    """T = 2, two columns. Column 0: no dones, rho = (2, 0.5). Column 1: terminates at t=0, so t=1 is
    the (masked) reset step, on-policy. The "network" returns the logits and values given as params."""
    params = {
        # [T+1, B, 2]: col 0 rows pi = (.5, .5), (.75, .25), (.5, .5); col 1 uniform
        "logits": jnp.array([[[0.0, 0.0], [0.0, 0.0]], [[math.log(3.0), 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]),
        "value": jnp.array([[1.0, 1.0], [2.0, 5.0], [3.0, 7.0]]),
    }
    mb = {
        "obs": jnp.zeros((3, 2, 1)),
        "action": jnp.array([[0, 0], [1, 0]], jnp.int32),
        "logp": jnp.log(jnp.array([[0.25, 0.5], [0.5, 0.5]])),
        "reward": jnp.array([[1.0, 2.0], [1.0, 9.0]]),
        "terminated": jnp.array([[False, True], [False, False]]),
        "truncated": jnp.zeros((2, 2), bool),
        "mask": jnp.array([[1.0, 1.0], [1.0, 0.0]]),
    }
    return params, mb


def test_impala_loss_hand_computed():
    params, mb = tiny_batch()
    loss, aux = impala_loss(params, lambda p, obs: (p["logits"], p["value"]), mb, dist=CATEGORICAL, gamma=0.5,
                            ent_coef=0.01, vf_coef=0.5)
    # column 0 (gamma .5, rho' = (1, .5), c = (1, .5)):
    #   vs_1 = 2 + .5 (1 + .5*3 - 2) = 2.25;  vs_0 = 1 + (1 + .5*2 - 1) + .5*1*(2.25 - 2) = 2.125
    #   pg_1 = .5 (1 + .5*3 - 2) = .25;        pg_0 = 1 (1 + .5*2.25 - 1) = 1.125
    # column 1: terminal at t=0: vs_0 = 1 + (2 - 1) = 2, pg_0 = 1; t=1 masked (its reward 9 never counts)
    np.testing.assert_allclose(np.asarray(aux["vs"])[:, 0], [2.125, 2.25], atol=1e-6)
    np.testing.assert_allclose(float(aux["vs"][0, 1]), 2.0, atol=1e-6)
    pg = -(math.log(0.5) * 1.125 + math.log(0.25) * 0.25 + math.log(0.5) * 1.0)  # = 2.625 ln 2
    v = 0.5 * ((2.125 - 1) ** 2 + (2.25 - 2) ** 2 + (2 - 1) ** 2)
    h = LN2 + -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) + LN2
    assert float(aux["policy_loss"]) == pytest.approx(pg, abs=1e-5) and pg == pytest.approx(2.625 * LN2)
    assert float(aux["value_loss"]) == pytest.approx(v, abs=1e-5)
    assert float(aux["entropy"]) == pytest.approx(h / 3, abs=1e-5)
    assert float(aux["rho_mean"]) == pytest.approx((2 + 0.5 + 1) / 3, abs=1e-5)
    assert float(aux["rho_clipfrac"]) == pytest.approx(1 / 3, abs=1e-6)
    assert float(loss) == pytest.approx(pg + 0.5 * v - 0.01 * h, abs=1e-5)


def test_impala_loss_gradients_stop_at_targets():
    """d loss / d V(x_t) = -vf_coef (vs_t - V(x_t)) on valid rows only: the bootstrap row, the masked
    reset step and the V-trace targets carry no gradient."""
    params, mb = tiny_batch()
    grads = jax.grad(lambda p: impala_loss(p, lambda q, obs: (q["logits"], q["value"]), mb, dist=CATEGORICAL,
                                           gamma=0.5, ent_coef=0.0, vf_coef=0.5)[0])(params)
    want = np.array([[-0.5 * 1.125, -0.5 * 1.0], [-0.5 * 0.25, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(np.asarray(grads["value"]), want, atol=1e-6)
    # policy: -adv * d log pi(a) / d logits = -adv * (onehot(a) - pi); row 0 col 0: a=0, pi=(.5,.5), adv 1.125
    np.testing.assert_allclose(np.asarray(grads["logits"])[0, 0], [-1.125 * 0.5, 1.125 * 0.5], atol=1e-6)
    np.testing.assert_allclose(np.asarray(grads["logits"])[2], 0.0, atol=1e-7)  # bootstrap row
    np.testing.assert_allclose(np.asarray(grads["logits"])[1, 1], 0.0, atol=1e-7)  # masked reset step


def impala_experiment(**trainer) -> Experiment:
    return Experiment(env=EnvConfig(num_envs=4), algo=IMPALAConfig(num_steps=8, hidden_sizes=(16, 16)),
                      trainer=TrainerConfig(**{"num_minibatches": 2, "update_epochs": 1, "lr": 1e-3, **trainer}),
                      total_env_steps=8 * 4 * 10)


def test_make_impala_acts_and_updates_through_the_seam():
    cfg = validate(impala_experiment())
    algo = algos.make(cfg, CARTPOLE)
    assert set(algo.extras_spec) == {"logp"}
    state = jax.jit(algo.init)(jax.random.PRNGKey(0))
    pp = algo.policy_params(state)
    obs = np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32)
    action, extras, actor_state = jax.jit(algo.act)(pp, obs, algo.initial_actor_state(4), np.ones(4, bool),
                                                     jax.random.PRNGKey(1))
    assert action.shape == (4,) and extras["logp"].shape == (4,) and actor_state == ()
    np.testing.assert_allclose(np.asarray(extras["logp"]), np.log(0.5), atol=0.02)  # near-uniform initial policy
    traj = random_trajectory(CARTPOLE, 8, 4)
    traj = traj._replace(extras={"logp": traj.extras["logp"]})
    new, metrics = jax.jit(algo.update)(state, traj)
    assert int(new.step) == 1
    for key in ("loss", "policy_loss", "value_loss", "entropy", "rho_mean", "grad_norm", "explained_variance", "lr"):
        assert np.isfinite(float(metrics[key])), key
    moved = jax.tree.map(lambda x, y: float(jnp.max(jnp.abs(x - y))), state.params, new.params)
    assert max(jax.tree.leaves(moved)) > 0
    # two minibatches = two optimiser steps: the annealed lr is sampled at step 0 of 2 * num_updates
    assert float(metrics["lr"]) == pytest.approx(1e-3)


def test_impala_config_errors_and_selection():
    with pytest.raises(ConfigError) as err:
        validate(impala_experiment(update_epochs=4, num_minibatches=3))
    text = str(err.value)
    assert "trainer.update_epochs=4: IMPALA takes one pass" in text and "not divisible by trainer.num_minibatches=3" in text
    cfg = apply_overrides(Experiment(), ["algo=impala", "algo.rho_bar=2.0", "trainer.update_epochs=1"])
    assert isinstance(cfg.algo, IMPALAConfig) and cfg.algo.rho_bar == 2.0
    with pytest.raises(ConfigError, match="unknown algorithm; known: ppo, impala"):
        apply_overrides(Experiment(), ["algo=imapla"])
    with pytest.raises(ConfigError, match="algo.c_bar=0.0 must be > 0"):
        validate(apply_overrides(Experiment(), ["algo=impala", "trainer.update_epochs=1", "algo.c_bar=0"]))


# -- learning ------------------------------------------------------------------------------


def test_cartpole_impala_single_process_learns(tmp_path):
    """configs/cartpole_impala.py, cut to 120k env steps (~20 s): a random policy scores ~22."""
    import dataclasses

    from configs import cartpole_impala
    from srljax.config import CheckpointConfig, LogConfig
    from srljax.loops.train import train

    cfg = dataclasses.replace(cartpole_impala.experiment(), name="impala", trial="learn", total_env_steps=120_000,
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled", progress="lines"),
                              checkpoint=CheckpointConfig(final=False))
    result = train(cfg)
    returns = [m["episode_return"] for m in result.metrics if "episode_return" in m]
    assert max(returns) >= 200, returns[-10:]


@pytest.mark.slow
def test_cartpole_impala_distributed_reaches_475_with_lag(tmp_path):
    """The acceptance run: asynchronous inline actors, lag logged, mean return >= 475 within 500k steps, exit 0
    (about 75-120 s on 2 cores)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "launch.local", "configs/cartpole_impala_distributed.py", "-f", "accept",
           f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines"]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "cartpole_impala_distributed" / "accept" / "metrics.jsonl").open()]
    assert rows[-1]["env_steps"] >= 500_000 - 32 * 16 and all("lag/mean" in r and "lag/max" in r for r in rows)
    assert max(r["lag/max"] for r in rows) >= 1  # it really trained on lagged segments
    assert max(r["episode_return"] for r in rows if r["env_steps"] <= 500_000) >= 475
