"""SAC and TD3: critic targets and the tanh-Gaussian log-prob against numpy, TD3's delayed actor and targets, the
entropy temperature's direction, K updates in one call, config checks, truncation-aware values through the replay
loop on a probe, SAC learning Pendulum-v1, and both through Ape-X's distributed layout in threads."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import algos.sac
import algos.td3
from algos.distributions import squashed_gaussian_sample
from algos.fit import spec_problems
from algos.sac import make_sac, soft_target
from algos.td3 import make_td3, smoothed_action, smoothed_target
from algos.twin_q import action_bounds, make_networks
from srljax.config import (
    CheckpointConfig,
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    ReplayConfig,
    SACConfig,
    TD3Config,
    TrainerConfig,
    algo_config_class,
    from_dict,
    problems,
    to_dict,
)
from srljax.learning.learner import Learner
from srljax.loops.replay import train_replay
from srljax.types import EnvSpec, ReplayBatch

QUIET = LogConfig(wandb="disabled", progress="lines")
SPEC = EnvSpec(id="Box", obs_shape=(3,), obs_dtype="float32", action_kind="continuous", action_shape=(2,),
               action_low=(-2.0, 0.0), action_high=(2.0, 1.0), num_envs=4, batch_size=4)
TRAINER = TrainerConfig(lr=1e-3, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1, update_epochs=1)


def n_step_oracle(reward, terminated, truncated, v_boot, gamma):
    """One window at a time, forward, Python floats: cut at the first done, bootstrap unless it terminated."""
    out = []
    for r, term, trunc, v in zip(reward, terminated, truncated, v_boot):
        g, discount = 0.0, 1.0
        for j in range(len(r)):
            g += discount * float(r[j])
            discount *= gamma
            if term[j]:
                discount = 0.0
            if term[j] or trunc[j]:
                break
        out.append(g + discount * float(v))
    return np.array(out)


def windows(n_samples, n, seed=0):
    rng = np.random.default_rng(seed)
    term = rng.random((n_samples, n)) < 0.2
    trunc = (rng.random((n_samples, n)) < 0.2) & ~term
    return ReplayBatch(obs=None, action=None, reward=rng.normal(size=(n_samples, n)).astype(np.float32),
                       terminated=term, truncated=trunc, next_obs=None, weight=np.ones(n_samples, np.float32))


@pytest.mark.parametrize("n", [1, 3])
def test_sac_soft_target_matches_numpy_oracle(n):
    """``r + gamma^k (min(Q1', Q2') - alpha log pi)``; a termination drops the bootstrap, a truncation keeps it."""
    batch = windows(500, n, seed=n)
    rng = np.random.default_rng(1)
    q_next, log_prob, alpha, gamma = rng.normal(size=(2, 500)).astype(np.float32), rng.normal(size=500), 0.3, 0.9
    got = np.asarray(soft_target(jnp.asarray(q_next), jnp.asarray(log_prob, jnp.float32), alpha, batch, gamma))
    v = np.minimum(q_next[0], q_next[1]) - alpha * log_prob
    np.testing.assert_allclose(got, n_step_oracle(batch.reward, batch.terminated, batch.truncated, v, gamma),
                               rtol=1e-5, atol=1e-5)
    assert batch.terminated[:, 0].any() and batch.truncated[:, 0].any()
    # by hand, one step: r=1, Q' = (3, 2), log pi = -1, alpha 0.5: 1 + 0.9 * (2 + 0.5) = 3.25; terminated: 1
    one = ReplayBatch(None, None, np.ones((2, 1), np.float32), np.array([[False], [True]]), np.zeros((2, 1), bool),
                      None, np.ones(2, np.float32))
    got = soft_target(jnp.array([[3.0, 3.0], [2.0, 2.0]]), jnp.array([-1.0, -1.0]), 0.5, one, 0.9)
    np.testing.assert_allclose(np.asarray(got), [3.25, 1.0], rtol=1e-6)


def test_td3_smoothed_action_and_target_match_numpy():
    rng = np.random.default_rng(0)
    u = np.tanh(rng.normal(size=(400, 2)) * 2).astype(np.float32)
    noise = (rng.normal(size=(400, 2)) * 0.4).astype(np.float32)
    scale, bias = action_bounds(SPEC)
    got = np.asarray(smoothed_action(jnp.asarray(u), jnp.asarray(noise), 0.5, scale, bias))
    expected = bias + scale * np.clip(u + np.clip(noise, -0.5, 0.5), -1, 1)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    assert (np.abs(noise) > 0.5).any() and (np.abs(u + np.clip(noise, -0.5, 0.5)) > 1).any()  # both clips bite
    batch = windows(400, 3, seed=2)
    q_next = rng.normal(size=(2, 400)).astype(np.float32)
    got = np.asarray(smoothed_target(jnp.asarray(q_next), batch, 0.95))
    oracle = n_step_oracle(batch.reward, batch.terminated, batch.truncated, q_next.min(axis=0), 0.95)
    np.testing.assert_allclose(got, oracle, rtol=1e-5, atol=1e-5)


def test_tanh_gaussian_log_prob_matches_numpy():
    """The change of variables in float64 numpy from the pre-squash sample x: ``log N(x) - sum log(scale /
    cosh(x)^2)``; where ``tanh`` saturates in float32 it stays finite and exact (CleanRL's
    ``log(scale * (1 - y^2) + 1e-6)`` is ~10 nats per dimension too high at x = 13)."""
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(1000, 2)).astype(np.float32)
    log_std = rng.uniform(-2, 0, (1000, 2)).astype(np.float32)
    mean[:5] = 13.0  # saturated: tanh(x) == 1 in float32
    scale, bias = action_bounds(SPEC)
    key = jax.random.PRNGKey(3)
    action, log_prob = squashed_gaussian_sample(key, jnp.asarray(mean), jnp.asarray(log_std), scale, bias)
    x = mean + np.exp(log_std) * np.asarray(jax.random.normal(key, mean.shape), np.float64)  # the pre-squash sample
    np.testing.assert_allclose(np.asarray(action), bias + scale * np.tanh(x), rtol=1e-5, atol=1e-5)
    gauss = -0.5 * ((x - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * math.log(2 * math.pi)
    oracle = (gauss - np.log(scale) + 2 * np.log(np.cosh(x))).sum(axis=1)
    np.testing.assert_allclose(np.asarray(log_prob), oracle, rtol=1e-5, atol=1e-4)
    assert np.isfinite(np.asarray(log_prob)).all() and (np.asarray(action)[:5, 0] == bias[0] + scale[0]).all()


def cfg_for(algo, total=50_000) -> Experiment:
    return Experiment(total_env_steps=total, env=EnvConfig(num_envs=4), algo=algo, trainer=TRAINER)


def random_batch(n=32, seed=0, spec=SPEC) -> ReplayBatch:
    rng = np.random.default_rng(seed)
    scale, bias = action_bounds(spec)
    obs_dim, act_dim = spec.obs_shape[0], spec.action_shape[0]
    return ReplayBatch(obs=rng.normal(size=(n, obs_dim)).astype(np.float32),
                       action=(bias + scale * rng.uniform(-1, 1, (n, act_dim))).astype(np.float32),
                       reward=rng.normal(size=(n, 1)).astype(np.float32), terminated=rng.random((n, 1)) < 0.1,
                       truncated=np.zeros((n, 1), bool), next_obs=rng.normal(size=(n, obs_dim)).astype(np.float32),
                       weight=np.ones(n, np.float32))


def same(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def single_and_scanned(algo_cfg, num_updates: int) -> tuple[list, Learner, tuple]:
    """``num_updates`` ``Learner.step`` calls on random batches (each update's params and metrics), and one
    ``Learner.steps`` call on the same batches stacked (the delayed actor's ``lax.cond`` inside the scan)."""
    cfg = cfg_for(algo_cfg)
    batches = [random_batch(seed=i) for i in range(num_updates)]
    one, many = Learner(cfg, SPEC, checkpoints=False), Learner(cfg, SPEC, checkpoints=False)
    history = [(jax.device_get(one.state.params), None)]  # host copies: the next step donates the state's buffers
    for batch in batches:
        metrics, per_sample = one.step(batch)
        assert np.asarray(per_sample["priority"]).shape == (32,)
        history.append((jax.device_get(one.state.params), jax.device_get(metrics)))
    stacked = many.steps(ReplayBatch(*(np.stack(x) for x in zip(*batches))))
    return history, many, stacked


def assert_scan_matches(history, many, stacked):
    """K updates in one compiled call = K ``step`` calls: the same params and metrics."""
    metrics, _ = stacked
    assert many.version == len(history) - 1
    for name in ("qf_loss", "actor_loss"):
        np.testing.assert_allclose(np.asarray(metrics[name]), [float(m[name]) for _, m in history[1:]], rtol=1e-4,
                                   atol=1e-6)
    for x, y in zip(jax.tree.leaves(history[-1][0]), jax.tree.leaves(many.state.params)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-6)


def test_td3_actor_and_targets_change_only_every_policy_frequency():
    """policy_frequency 3: the critics move every update; the actor and every target only at updates 3 and 6, the
    targets then Polyak towards the networks of that update; and ``Learner.steps`` gives the same 6 updates."""
    tau = 0.1
    history, many, stacked = single_and_scanned(TD3Config(batch_size=32, policy_frequency=3, tau=tau,
                                                          hidden_sizes=(32,)), 6)
    for i in range(1, 7):
        (before, _), (p, metrics) = history[i - 1], history[i]
        assert not same(p["critic"], before["critic"])
        if i % 3:
            assert same(p["actor"], before["actor"]) and same(p["actor_target"], before["actor_target"])
            assert same(p["critic_target"], before["critic_target"])
            continue
        assert not same(p["actor"], before["actor"])
        for name in ("actor", "critic"):
            expected = jax.tree.map(lambda o, t: tau * o + (1 - tau) * t, p[name], before[f"{name}_target"])
            jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7), p[f"{name}_target"],
                         expected)
        assert np.isfinite(float(metrics["actor_loss"])) and float(metrics["actor_loss"]) != 0.0
    assert float(history[4][1]["actor_loss"]) == float(history[3][1]["actor_loss"])  # the last actor step's, reported
    assert_scan_matches(history, many, stacked)


def test_sac_actor_every_policy_frequency_and_targets_every_update():
    """SAC (CleanRL): the critics and their targets move every update; the actor and alpha every second update;
    ``Learner.steps`` gives the same updates."""
    history, many, stacked = single_and_scanned(SACConfig(batch_size=32, policy_frequency=2, hidden_sizes=(32,)), 4)
    for i in range(1, 5):
        (before, _), (p, _) = history[i - 1], history[i]
        assert not same(p["critic"], before["critic"]) and not same(p["critic_target"], before["critic_target"])
        assert same(p["actor"], before["actor"]) == bool(i % 2)
        assert same(p["log_alpha"], before["log_alpha"]) == bool(i % 2)
    assert {"qf_loss", "actor_loss", "alpha", "alpha_loss", "entropy", "q1_mean", "target_mean"} <= set(history[-1][1])
    assert_scan_matches(history, many, stacked)


@pytest.mark.parametrize("per_dim, direction", [(-5.0, -1), (0.6, 1)])
def test_entropy_temperature_moves_toward_the_target_entropy(per_dim, direction):
    """The initial policy's entropy (~-0.1 per dimension) is above a target of -5 x |A|: alpha falls (the policy may
    grow surer); below 0.6 x |A|: alpha rises."""
    cfg = cfg_for(SACConfig(batch_size=64, policy_frequency=1, hidden_sizes=(32,), target_entropy_per_dim=per_dim))
    algo = make_sac(cfg, SPEC)
    state = algo.init(jax.random.PRNGKey(0))
    update = jax.jit(algo.update)
    alphas = []
    for i in range(10):
        state, metrics, _ = update(state, random_batch(n=64, seed=i))
        alphas.append(float(metrics["alpha"]))
    assert np.all(direction * np.diff([1.0, *alphas]) > 0), alphas


def test_act_explores_per_row_and_stays_in_the_box():
    """Rows with ``random`` 1 act uniformly over the box; the others with the policy (TD3: plus ``noise``)."""
    for make, algo_cfg in [(make_sac, SACConfig(hidden_sizes=(32,))), (make_td3, TD3Config(hidden_sizes=(32,)))]:
        algo = make(cfg_for(algo_cfg), SPEC)
        params = algo.policy_params(algo.init(jax.random.PRNGKey(0)))
        assert set(params) == {"actor"}
        obs = np.zeros((2000, 3), np.float32)
        state = {k: np.where(np.arange(2000) < 1000, 1.0, 0.0).astype(np.float32)
                 for k in algo.exploration(0, None, 1)}
        if "noise" in state:
            state["noise"] = np.full(2000, 0.1, np.float32)
        action = np.asarray(algo.act(params, obs, state, None, jax.random.PRNGKey(1))[0])
        assert (action >= np.array(SPEC.action_low)).all() and (action <= np.array(SPEC.action_high)).all()
        random, policy = action[:1000], action[1000:]
        np.testing.assert_allclose(random.mean(0), [0.0, 0.5], atol=0.1)
        np.testing.assert_allclose(random.std(0), np.array([4.0, 1.0]) / math.sqrt(12), rtol=0.1)
        assert (policy.std(0) < random.std(0) * 0.9).all()  # the same obs: a narrower spread than uniform
        greedy = np.asarray(algo.act_deterministic(params, obs, state, None, jax.random.PRNGKey(2))[0])
        assert np.ptp(greedy, axis=0).max() < 1e-6
    assert make_sac(cfg_for(SACConfig()), SPEC).exploration(4_999, None, 1) == {"random": 1.0}
    assert make_td3(cfg_for(TD3Config()), SPEC).exploration(25_000, None, 1) == {"random": 0.0, "noise": 0.1}


def test_configs_name_check_and_round_trip():
    assert algo_config_class("sac") is SACConfig and algo_config_class("td3") is TD3Config
    for algo_cfg in (SACConfig(network_options={}), TD3Config()):
        cfg = cfg_for(algo_cfg)
        back = from_dict(to_dict(cfg))
        assert back == cfg and hash(back.algo) == hash(cfg.algo)
        assert problems(cfg) == []
    found = problems(cfg_for(SACConfig(tau=0.0, policy_frequency=0, log_std_min=3.0, replay_ratio=0)))
    for text in ("algo.tau=0.0", "algo.policy_frequency=0", "algo.log_std_min=3.0", "algo.replay_ratio=0"):
        assert any(text in p for p in found), (text, found)
    discrete = EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2)
    assert spec_problems(SACConfig(), discrete) == [
        "algo=sac takes continuous actions; CartPole-v1 has discrete actions: pick an algorithm that takes them "
        "(algo=ppo takes all three)"]
    assert spec_problems(TD3Config(), SPEC) == []
    with pytest.raises(ValueError, match="continuous actions"):
        make_networks(SACConfig(), discrete, stochastic=True)


def probe_q(tmp_path, algo_cfg, trial: str) -> float:
    """A constant reward of 1 cut by a time limit of 10 steps, any action: with no entropy bonus Q = 1 / (1 - 0.9)."""
    cfg = Experiment(
        name="probe", trial=trial, seed=0, total_env_steps=3_000,
        env=EnvConfig(factory="envs.probe:make_constant_reward_box", num_envs=4, max_episode_steps=10),
        algo=dataclasses.replace(algo_cfg, gamma=0.9, batch_size=64, replay_ratio=32.0, learning_starts=200,
                                 hidden_sizes=(16,), tau=0.2, replay=ReplayConfig(capacity=2_000),
                                 updates_per_call=8),
        trainer=TRAINER, log=dataclasses.replace(QUIET, run_root=str(tmp_path), log_every=100),
    )
    result = train_replay(cfg)
    spec = EnvSpec("p", (1,), "float32", "continuous", action_shape=(1,), action_low=(-1.0,), action_high=(1.0,))
    critic = make_networks(cfg.algo, spec, stochastic=isinstance(algo_cfg, SACConfig)).critic
    actions = np.linspace(-1, 1, 5, dtype=np.float32)[:, None]
    q = np.asarray(critic.apply(result.state.params["critic"], np.ones((5, 1), np.float32), actions))
    return float(q.mean())


@pytest.mark.parametrize("algo_cfg", [SACConfig(autotune=False, alpha=0.0), TD3Config()], ids=["sac", "td3"])
def test_replay_loop_learns_truncation_aware_values(tmp_path, monkeypatch, algo_cfg):
    """The whole loop with continuous actions (float32 actions in the replay, random starts, the twin critics):
    Q lands on 10, and treating the time limit as a termination lands clearly below."""
    assert abs(probe_q(tmp_path, algo_cfg, "right") - 10.0) < 0.5
    module = algos.sac if isinstance(algo_cfg, SACConfig) else algos.td3
    real = module.n_step_return
    monkeypatch.setattr(module, "n_step_return",
                        lambda r, term, trunc, v, g: real(r, term | trunc, jnp.zeros_like(trunc), v, g))
    assert probe_q(tmp_path, algo_cfg, "truncation_as_termination") < 9.0


def test_sac_learns_pendulum(tmp_path):
    """SAC on envpool Pendulum-v1 (random play: about -1,200 to -1,600): a small SAC (64x64, one update of 128 samples
    per env step, 4 envs) passes -400 over its last 8 episodes within 10,000 env steps (seeds 1, 2, 3: -195, -186,
    -172; ~10 s on 2 cores). A broken target, log-prob or actor step stays near random play."""
    cfg = Experiment(
        name="pendulum", trial="sac", seed=1, total_env_steps=10_000,
        env=EnvConfig(id="Pendulum-v1", num_envs=4),
        algo=SACConfig(batch_size=128, replay_ratio=128.0, learning_starts=1_000, hidden_sizes=(64, 64),
                       updates_per_call=16, replay=ReplayConfig(capacity=20_000)),
        trainer=TRAINER, log=dataclasses.replace(QUIET, run_root=str(tmp_path), log_every=500, window=8),
    )
    returns = [m["episode_return"] for m in train_replay(cfg).metrics if "episode_return" in m]
    assert returns[0] < -900 and returns[-1] > -400, returns


@pytest.mark.parametrize("algo_cfg", [SACConfig(autotune=False, alpha=0.0), TD3Config()], ids=["sac", "td3"])
def test_apex_layout_in_threads_learns_truncation_aware_values(tmp_path, algo_cfg):
    """The distributed path (Ape-X's actors, replay buffer worker and trainer, as threads) with continuous actions:
    actors act randomly until ``learning_starts`` by their reckoning, then with the policy; every update is made at
    the replay ratio; the critics land on the probe's Q = 10."""
    from launch.threads import run_threads

    cfg = Experiment(
        name="apex", trial=algo_cfg.name, seed=0, total_env_steps=4_000,
        env=EnvConfig(factory="envs.probe:make_constant_reward_box", num_envs=2, max_episode_steps=10),
        algo=dataclasses.replace(algo_cfg, gamma=0.9, batch_size=64, replay_ratio=32.0, learning_starts=400,
                                 hidden_sizes=(16,), tau=0.2, replay=ReplayConfig(capacity=4_000), updates_per_call=8,
                                 num_steps=8),
        trainer=TRAINER, layout=LayoutConfig(mode="distributed", num_actors=2, num_buffer_workers=1),
        log=dataclasses.replace(QUIET, run_root=str(tmp_path), log_every=40), checkpoint=CheckpointConfig(final=False),
    )
    assert problems(cfg) == []
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    last = result.metrics[-1]
    assert last["update"] == cfg.num_updates and abs(last["q1_mean"] - 10.0) < 0.5, last
    assert 32 / 1.1 - 2 <= last["samples_per_insert"] <= 32 * 1.1 + 2, last
    lines = (tmp_path / "apex" / algo_cfg.name / "workers" / "actor-0.jsonl").read_text().splitlines()
    actor = [json.loads(x) for x in lines]
    seen = [line["random"] for line in actor if "random" in line]  # the actor's gauge, a line every second or so
    assert seen[0] == 1.0 and seen[-1] == 0.0, seen
