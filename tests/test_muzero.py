"""MuZero on gymnax MinAtar through the Anakin path: the scalar transform and its supports, the n-step unroll targets
at game ends against hand computations, the replay's window sampling, what MuZero refuses, a short launch.local run
with exact resume of the replay in the carry."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from srljax.config import CheckpointConfig, ConfigError, EnvConfig, Experiment, LogConfig, TrainerConfig
from srljax.layout import plan_of
from srljax.prepare import check

pytest.importorskip("mctx")
pytest.importorskip("gymnax")

from algos import make as make_algo  # noqa: E402
from algos.muzero import (  # noqa: E402
    Window,
    from_support,
    inverse_scalar_transform,
    scalar_transform,
    to_support,
    unroll_targets,
)
from algos.muzero_config import MuZeroConfig  # noqa: E402
from envs import jax_envs  # noqa: E402
from srljax.learning.anakin_muzero import MuZeroProgram  # noqa: E402


def _cfg(tmp_path, **kw) -> Experiment:
    base = Experiment(name="mz", trial="t", total_env_steps=8 * 8 * 4,
                      env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=8),
                      algo=MuZeroConfig(num_steps=8, num_simulations=4, unroll_steps=2, td_steps=3, batch_size=16,
                                        replay_capacity=8 * 24, hidden_sizes=(32,), state_size=16),
                      trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=2, update_epochs=1),
                      log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=1))
    return dataclasses.replace(base, **kw)


def test_scalar_transform_round_trips_and_matches_its_formula():
    x = jnp.array([-300.0, -7.5, -1.0, -1e-3, 0.0, 0.4, 1.0, 3.0, 42.0, 1000.0])
    np.testing.assert_allclose(inverse_scalar_transform(scalar_transform(x)), x, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(scalar_transform(jnp.array([0.0, 3.0, -8.0])), [0.0, 1.003, -2.008], rtol=1e-6)


def test_support_is_two_hot_with_the_transformed_mean_and_decodes_back():
    size = 5
    x = jnp.array([0.0, 0.5, -2.0, 7.0, 20.0, 1e6])
    p = to_support(x, size)
    assert p.shape == (6, 11)
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-6)
    assert int(jnp.max(jnp.sum(p > 0, -1))) <= 2  # two neighbouring bins at most
    mean = jnp.sum(p * jnp.arange(-size, size + 1), -1)
    np.testing.assert_allclose(mean, jnp.clip(scalar_transform(x), -size, size), rtol=1e-5, atol=1e-6)
    # 0.5: h = sqrt(1.5) - 1 + 0.0005 = 0.22524 -> bins 0 and 1 (indices 5, 6)
    np.testing.assert_allclose(p[1, 5:7], [1 - 0.2252449, 0.2252449], rtol=1e-5)
    assert p[5, -1] == 1.0  # beyond the support: its last bin
    decoded = from_support(jnp.log(p + 1e-12), size)
    np.testing.assert_allclose(decoded[:5], x[:5], rtol=1e-3, atol=1e-3)


def _window(searched, terminated, reward=(1.0, 2.0, 3.0, 4.0, 5.0), value=(10.0, 20.0, 30.0, 40.0, 50.0)):
    w = len(reward)
    policy = jnp.tile(jnp.arange(w, dtype=jnp.float32)[:, None], (1, 3))[None]
    return Window(obs=jnp.tile(jnp.arange(3.0)[None, :, None], (1, 1, 4)), action=jnp.arange(w, dtype=jnp.int32)[None],
                  reward=jnp.array([reward], jnp.float32), terminated=jnp.array([terminated], bool),
                  searched=jnp.array([searched], bool), value=jnp.array([value], jnp.float32), policy=policy)


@pytest.mark.parametrize("case", ["running", "terminated", "truncated", "ended_at_row_1", "first_row_last"])
def test_unroll_targets_match_a_hand_computation(case):
    g = 0.9  # K = 2, n = 2: 5 rows
    T, F = True, False
    win, z, vmask, pmask = {
        # no game end: z_k = r_k + g r_{k+1} + g^2 v_{k+2}
        "running": (_window([T] * 5, [F] * 5), [1 + g * 2 + g * g * 30, 2 + g * 3 + g * g * 40, 3 + g * 4 + g * g * 50],
                    [1, 1, 1], [1, 1, 1]),
        # stepping from row 1 terminated, row 2 is the game's last (not searched): its value is 0
        "terminated": (_window([T, T, F, T, T], [F, T, F, F, F]), [1 + g * 2, 2.0, 0.0], [1, 1, 1], [1, 1, 0]),
        # the same, cut by a time limit: row 2's searched value bootstraps
        "truncated": (_window([T, T, F, T, T], [F, F, F, F, F]), [1 + g * 2 + g * g * 30, 2 + g * 30, 30.0],
                      [1, 1, 1], [1, 1, 0]),
        # row 1 is the last of a terminated game: position 2 is the next game's, masked
        "ended_at_row_1": (_window([T, F, T, T, T], [T, F, F, F, F]), [1.0, 0.0, None], [1, 1, 0], [1, 0, 0]),
        "first_row_last": (_window([F, T, T, T, T], [F, F, F, F, F]), [None] * 3, [0, 0, 0], [0, 0, 0]),
    }[case]
    out = unroll_targets(win, unroll_steps=2, td_steps=2, gamma=g)
    assert out.action.shape == (1, 2) and out.reward.shape == (1, 2) and out.policy.shape == (1, 3, 3)
    np.testing.assert_array_equal(out.value_mask[0], vmask)
    np.testing.assert_array_equal(out.reward_mask[0], vmask[1:])
    np.testing.assert_array_equal(out.policy_mask[0], pmask)
    np.testing.assert_array_equal(out.action[0], [0, 1])
    np.testing.assert_array_equal(out.obs[0], [0.0] * 4)
    np.testing.assert_array_equal(out.next_obs[0], [[1.0] * 4, [2.0] * 4])  # rows 1..K: the consistency targets
    np.testing.assert_allclose(out.reward[0], [1.0, 2.0])
    for k, expected in enumerate(z):
        if expected is not None:
            np.testing.assert_allclose(out.value[0, k], expected, rtol=1e-6)


def test_windows_are_consecutive_written_rows_of_one_env_across_the_ring_end(tmp_path):
    cfg = _cfg(tmp_path)
    env = jax_envs.make(cfg.env)
    algo = make_algo(cfg, env.spec)
    program = MuZeroProgram(env, algo, num_steps=8, max_iterations=1, capacity=8 * 20)
    L, B, W = program.length, program.num_envs, program.span
    assert L == 24 and W == 6  # 20 rows per env rounded up to whole iterations of 8
    tag = jnp.arange(L)[:, None] * 100 + jnp.arange(B)[None]  # row t of env b holds 100 t + b
    replay = Window(obs=jnp.broadcast_to(tag[..., None, None, None], (L, B, 10, 10, 4)).astype(jnp.float32),
                    action=tag, reward=tag.astype(jnp.float32), terminated=jnp.zeros((L, B), bool),
                    searched=jnp.ones((L, B), bool), value=jnp.zeros((L, B)), policy=jnp.zeros((L, B, 3)))
    ptr, count = jnp.int32(8), jnp.int32(24)  # the ring is full; the newest row is 7, the oldest 8
    starts = set()
    for seed in range(4):
        win = program.sample(replay, ptr, count, jax.random.PRNGKey(seed))
        a = np.asarray(win.action)
        assert a.shape == (algo.windows, W)
        t, b = a // 100, a % 100
        assert (b == b[:, :1]).all()  # one env
        np.testing.assert_array_equal(t, (t[:, :1] + np.arange(W)) % L)  # consecutive, wrapping at the ring's end
        age_last = (7 - t[:, -1]) % L
        assert (age_last >= 0).all() and (age_last <= L - W).all()  # written, never across the write point
        np.testing.assert_array_equal(np.asarray(win.obs)[:, :, 0, 0, 0], a[:, :3])  # the first K + 1 rows' obs
        starts |= set(t[:, 0].tolist())
    assert 8 in starts and max(starts) > 18  # the oldest row and rows past the ring's end get sampled
    # fewer rows written than a window: nothing counts
    assert not np.asarray(program.sample(replay, jnp.int32(5), jnp.int32(5), jax.random.PRNGKey(0)).searched).any()



def _batch(algo, env, n, key):
    """``n`` windows of real MinAtar rows (random moves, one env each), as the program hands them to the update."""
    K, W = algo.unroll_steps, algo.unroll_steps + algo.td_steps + 1

    def step(c, k):
        state, obs = c
        action = jax.random.randint(k, (env.spec.num_envs,), 0, env.spec.num_actions)
        nxt_state, nxt = env.step(state, action)
        return (nxt_state, nxt.obs), (obs[0], action[0], nxt.reward[0], nxt.terminated[0], ~state.done[0])

    state, ts = env.reset(key)
    _, (obs, action, reward, term, searched) = jax.jit(lambda c, ks: jax.lax.scan(step, c, ks))(
        (state, ts.obs), jax.random.split(key, W + n))  # env 0's rows: [T, ...]
    pick = lambda x, width: jnp.stack([x[i: i + width] for i in range(n)])  # noqa: E731
    w = Window(obs=pick(obs, K + 1), action=pick(action, W), reward=pick(reward, W), terminated=pick(term, W),
               searched=pick(searched, W), value=jnp.zeros((n, W)),
               policy=jnp.full((n, W, env.spec.num_actions), 1.0 / env.spec.num_actions))
    return unroll_targets(w, K, algo.td_steps, algo.gamma)


def test_the_consistency_loss_pulls_the_dynamics_state_to_the_next_rows_representation(tmp_path):
    cfg = _cfg(tmp_path, algo=dataclasses.replace(_cfg(tmp_path).algo, consistency_coef=2.0, projection_size=32))
    env = jax_envs.make(cfg.env)
    algo = make_algo(cfg, env.spec)
    state = algo.init(jax.random.PRNGKey(0))
    assert "projector" in state.params["params"] and "predictor" in state.params["params"]
    batch = _batch(algo, env, 32, jax.random.PRNGKey(1))
    update = jax.jit(algo.update)
    first = None
    for _ in range(30):
        state, metrics = update(state, batch)
        first = float(metrics["consistency_loss"]) if first is None else first
    last = float(metrics["consistency_loss"])
    assert -1.0 <= last < first - 0.1, (first, last)  # negative cosine similarity, falling towards -1
    # off: no heads, no term
    plain = make_algo(_cfg(tmp_path), env.spec)
    assert "projector" not in plain.init(jax.random.PRNGKey(0)).params["params"]
    assert "consistency_loss" not in jax.jit(plain.update)(plain.init(jax.random.PRNGKey(0)), batch)[1]


def test_fresh_bootstrap_values_are_the_current_networks_at_rows_n_to_n_plus_k(tmp_path):
    cfg = _cfg(tmp_path, algo=dataclasses.replace(_cfg(tmp_path).algo, value_bootstrap="fresh", support_size=3))
    env = jax_envs.make(cfg.env)
    algo = make_algo(cfg, env.spec)
    assert algo.fresh_values
    program = MuZeroProgram(env, algo, num_steps=8, max_iterations=1, capacity=8 * 24)
    params = algo.init(jax.random.PRNGKey(0)).params
    params = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(jax.random.PRNGKey(2), x.shape), params)  # values != 0
    L, B, W, K, n = program.length, program.num_envs, program.span, algo.unroll_steps, algo.td_steps
    obs = jax.random.bernoulli(jax.random.PRNGKey(3), 0.3, (L, B, 10, 10, 4))
    replay = Window(obs=obs, action=jnp.zeros((L, B), jnp.int32), reward=jnp.zeros((L, B)),
                    terminated=jnp.zeros((L, B), bool), searched=jnp.ones((L, B), bool),
                    value=jnp.full((L, B), 7.0), policy=jnp.zeros((L, B, 3)))
    win = program.sample(replay, jnp.int32(0), jnp.int32(L), jax.random.PRNGKey(4))
    assert win.obs.shape[1] == W  # every row's obs, for the refresh
    out = program.refresh(params, win)
    assert out.obs.shape[1] == K + 1
    np.testing.assert_array_equal(out.obs, win.obs[:, : K + 1])
    np.testing.assert_array_equal(out.value[:, :n], 7.0)  # rows before n keep the stored search values
    _, expected = algo.predict(params, win.obs[:, n: n + K + 1].reshape(-1, 10, 10, 4))
    np.testing.assert_allclose(out.value[:, n:], expected.reshape(-1, K + 1), rtol=1e-5, atol=1e-6)
    assert float(jnp.std(expected)) > 1e-3
    # the targets bootstrap from them: no rewards, no game end, so z_k = gamma^n v[k + n]
    z = unroll_targets(out, K, n, algo.gamma).value
    np.testing.assert_allclose(z, algo.gamma**n * out.value[:, n:], rtol=1e-5)


def test_rescale_values_changes_the_gumbel_policy_target(tmp_path):
    env = jax_envs.make(_cfg(tmp_path).env)
    targets = []
    for rescale in (True, False):
        cfg = _cfg(tmp_path, algo=dataclasses.replace(_cfg(tmp_path).algo, rescale_values=rescale))
        algo = make_algo(cfg, env.spec)
        params = algo.init(jax.random.PRNGKey(0)).params  # values 0, a near-uniform prior
        head = params["params"]["reward_head"]
        head["kernel"] = 0.01 * head["kernel"]  # rewards, so q-values, a few hundredths apart
        _, ts = env.reset(jax.random.PRNGKey(1))
        search = jax.jit(lambda p, k, o: algo.search(p, k, o, None, None, 8)[1])  # noqa: B023 - called here
        targets.append(search(params, jax.random.PRNGKey(5), ts.obs))
    # min-max rescaled, the tiny q differences of a fresh model become whole steps: a sharp target; at their own
    # scale they leave it near the uniform prior
    entropy = [float(-jnp.sum(p * jnp.log(p + 1e-12), -1).mean()) for p in targets]
    assert entropy[0] < 0.8 < 1.0 < entropy[1], entropy

def test_the_plan_and_what_muzero_refuses(tmp_path):
    cfg = _cfg(tmp_path)
    assert plan_of(cfg).loop == "anakin" and plan_of(cfg).consumes == "search"
    with pytest.raises(ConfigError, match="must be a JAX env"):
        check(_cfg(tmp_path, env=EnvConfig(id="CartPole-v1")))
    with pytest.raises(ConfigError, match="keeps its replay in the buffer workers"):  # the worker graph's MuZero
        check(dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, mode="distributed")))
    with pytest.raises(ConfigError, match="must hold a window"):
        check(_cfg(tmp_path, algo=dataclasses.replace(cfg.algo, replay_capacity=16)))
    if jax_envs.problems(EnvConfig(id="pgx/connect_four", num_envs=8)) == []:
        with pytest.raises(ConfigError, match="players taking turns"):
            check(_cfg(tmp_path, env=EnvConfig(id="pgx/connect_four", num_envs=8)))


@pytest.mark.slow
def test_launch_local_runs_it_and_resumes_the_replay_exactly(tmp_path):
    """Compiles the program three times: minutes on a loaded 2-core box."""
    from launch import local

    full = _cfg(tmp_path, trial="full")
    assert local.main(full) == 0
    half = _cfg(tmp_path, trial="half", total_env_steps=8 * 8 * 2, checkpoint=CheckpointConfig(every_updates=2))
    assert local.main(half) == 0
    assert local.main(dataclasses.replace(half, total_env_steps=8 * 8 * 4), resume=True) == 0
    a, b = ([json.loads(x) for x in (tmp_path / "mz" / t / "metrics.jsonl").read_text().splitlines()]
            for t in ("full", "half"))
    assert [r["update"] for r in a] == [r["update"] for r in b] == [1, 2, 3, 4]
    assert all(np.isfinite(r["loss"]) for r in a) and a[-1]["windows_used"] > 0.5
    for x, y in zip(a, b):
        for key in ("policy_loss", "value_loss", "reward_loss", "searched_value", "value_target"):
            np.testing.assert_allclose(x[key], y[key], rtol=1e-4, atol=1e-5)
