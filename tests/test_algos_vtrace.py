"""V-trace against rlax (terminations), a plain-Python loop (truncations, c_bar), GAE (on-policy)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import rlax

from algos.returns import gae, valid_mask, vtrace


def vtrace_oracle(v, r, term, trunc, log_rho, gamma, rho_bar, c_bar):
    """One env at a time, backwards, Python floats: the paper's recursion with gae's flag conventions."""
    T, B = r.shape
    vs = np.zeros((T, B))
    pg = np.zeros((T, B))
    for b in range(B):
        vs_next = float(v[T, b])  # vs_T = V(x_T)
        for t in reversed(range(T)):
            rho = float(np.exp(log_rho[t, b]))
            rho_c, c = min(rho_bar, rho), min(c_bar, rho)
            bootstrap = 0.0 if term[t, b] else gamma * float(v[t + 1, b])
            done = term[t, b] or trunc[t, b]
            # after a done the next row belongs to the (masked) reset step: no trace, plain V(x_{t+1})
            target_next = float(v[t + 1, b]) if done else vs_next
            vs_t = float(v[t, b]) + rho_c * (float(r[t, b]) + bootstrap - float(v[t, b]))
            if not done:
                vs_t += gamma * c * (vs_next - float(v[t + 1, b]))
            pg_next = 0.0 if term[t, b] else gamma * target_next
            pg[t, b] = rho_c * (float(r[t, b]) + pg_next - float(v[t, b]))
            vs[t, b] = vs_t
            vs_next = vs_t
    return vs, pg


def random_segment(seed, T=29, B=5, p_term=0.1, p_trunc=0.0, spread=1.0):
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(T + 1, B)).astype(np.float32)
    r = rng.normal(size=(T, B)).astype(np.float32)
    term = rng.random((T, B)) < p_term
    trunc = (rng.random((T, B)) < p_trunc) & ~term
    log_rho = (spread * rng.normal(size=(T, B))).astype(np.float32)
    return v, r, term, trunc, log_rho


@pytest.mark.parametrize("rho_bar", [1.0, 2.0, 0.5])
def test_vtrace_matches_rlax_with_terminations(rho_bar):
    v, r, term, trunc, log_rho = random_segment(int(rho_bar * 10))
    assert term.any()
    gamma = 0.97
    vs, pg = (np.asarray(x) for x in vtrace(v, r, term, trunc, log_rho, gamma, rho_bar=rho_bar, c_bar=1.0))
    assert vs.shape == pg.shape == r.shape and vs.dtype == np.float32
    # rlax: one trajectory [T] at a time; its single discount_t cuts bootstrap and trace together
    ref = jax.vmap(
        lambda v_tm1, v_t, r_t, d_t, rho: rlax.vtrace_td_error_and_advantage(
            v_tm1, v_t, r_t, d_t, rho, clip_rho_threshold=rho_bar, clip_pg_rho_threshold=rho_bar
        ),
        in_axes=1,
        out_axes=1,
    )(v[:-1], v[1:], r, gamma * (1.0 - term.astype(np.float32)), np.exp(log_rho))
    np.testing.assert_allclose(vs, np.asarray(ref.errors) + v[:-1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg, np.asarray(ref.pg_advantage), rtol=1e-5, atol=1e-5)
    rlax_vs = jax.vmap(lambda *a: rlax.vtrace(*a, clip_rho_threshold=rho_bar), in_axes=1, out_axes=1)(
        v[:-1], v[1:], r, gamma * (1.0 - term.astype(np.float32)), np.exp(log_rho)
    )
    np.testing.assert_allclose(vs, np.asarray(rlax_vs) + v[:-1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lam", [0.95, 0.5, 0.0])
def test_vtrace_lambda_matches_rlax(lam):
    """Targets and policy-gradient advantages at lambda < 1 against rlax's ``vtrace_td_error_and_advantage``."""
    v, r, term, trunc, log_rho = random_segment(7)
    gamma = 0.97
    vs, pg = vtrace(v, r, term, np.zeros_like(term), log_rho, gamma, rho_bar=1.0, c_bar=1.0, lam=lam)
    ref = jax.vmap(lambda *a: rlax.vtrace_td_error_and_advantage(*a, lambda_=lam), in_axes=1, out_axes=1)(
        v[:-1], v[1:], r, gamma * (1.0 - term.astype(np.float32)), np.exp(log_rho)
    )
    np.testing.assert_allclose(np.asarray(vs), np.asarray(ref.errors) + v[:-1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pg), np.asarray(ref.pg_advantage), rtol=1e-5, atol=1e-5)
    full, full_pg = vtrace(v, r, term, np.zeros_like(term), log_rho, gamma)
    assert np.abs(np.asarray(full) - np.asarray(vs)).max() > 1e-3  # lambda does something
    assert np.abs(np.asarray(full_pg) - np.asarray(pg)).max() > 1e-3  # ... to the advantage too


@pytest.mark.parametrize("lam", [0.95, 0.0])
def test_vtrace_on_policy_advantage_is_gae_lambda(lam):
    """rho = c = 1: the policy-gradient advantage is GAE(lambda), truncations included (APPO at lag 0 is PPO)."""
    v, r, term, trunc, _ = random_segment(11, T=40, B=6, p_term=0.07, p_trunc=0.07)
    assert term.any() and trunc.any()
    _, pg = vtrace(v, r, term, trunc, np.zeros_like(r), 0.95, lam=lam)
    np.testing.assert_allclose(np.asarray(pg), np.asarray(gae(v, r, term, trunc, 0.95, lam)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rho_bar,c_bar", [(1.0, 1.0), (1.5, 0.8), (0.7, 2.0)])
def test_vtrace_matches_loop_with_truncations(rho_bar, c_bar):
    v, r, term, trunc, log_rho = random_segment(int(rho_bar * 100 + c_bar * 10), p_term=0.08, p_trunc=0.1)
    assert term.any() and trunc.any()
    gamma = 0.9
    vs, pg = vtrace(v, r, term, trunc, log_rho, gamma, rho_bar=rho_bar, c_bar=c_bar)
    want_vs, want_pg = vtrace_oracle(v, r, term, trunc, log_rho, gamma, rho_bar, c_bar)
    np.testing.assert_allclose(np.asarray(vs), want_vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pg), want_pg, rtol=1e-5, atol=1e-5)


def test_vtrace_on_policy_is_the_lambda_one_return():
    """rho = c = 1: vs is the lambda=1 return and pg_adv the lambda=1 GAE advantage, truncations included."""
    v, r, term, trunc, _ = random_segment(7, T=40, B=6, p_term=0.07, p_trunc=0.07)
    assert term.any() and trunc.any()
    gamma = 0.95
    vs, pg = (np.asarray(x) for x in vtrace(v, r, term, trunc, np.zeros_like(r), gamma))
    adv = np.asarray(gae(v, r, term, trunc, gamma, 1.0))
    np.testing.assert_allclose(vs, adv + v[:-1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(pg, adv, rtol=1e-5, atol=1e-5)
    # and rlax's lambda-return where the flags are terminations only
    no_trunc = np.zeros_like(trunc)
    vs2, _ = vtrace(v, r, term, no_trunc, np.zeros_like(r), gamma)
    ref = jax.vmap(lambda *a: rlax.lambda_returns(*a, lambda_=1.0), in_axes=1, out_axes=1)(
        r, gamma * (1.0 - term.astype(np.float32)), v[1:]
    )
    np.testing.assert_allclose(np.asarray(vs2), np.asarray(ref), rtol=1e-5, atol=1e-5)


def test_vtrace_hand_computed_truncation_and_clipping():
    # gamma 0.5, v = [1, 2, 3, 4], r = 1; transition 1 truncated; rho = [2, 0.5, 1], rho_bar = c_bar = 1.
    # t=2: vs = 3 + 1*(1 + .5*4 - 3) = 3;                       pg = 1*(1 + .5*4 - 3) = 0
    # t=1: vs = 2 + .5*(1 + .5*3 - 2) = 2.25 (truncated: bootstrap, no trace); pg = .5*(1 + .5*3 - 2) = 0.25
    # t=0: vs = 1 + 1*(1 + .5*2 - 1) + .5*1*(2.25 - 2) = 2.125; pg = 1*(1 + .5*2.25 - 1) = 1.125
    v = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    r = np.ones((3, 1), np.float32)
    trunc = np.array([[False], [True], [False]])
    log_rho = np.log(np.array([[2.0], [0.5], [1.0]], np.float32))
    vs, pg = vtrace(v, r, np.zeros_like(trunc), trunc, log_rho, 0.5)
    np.testing.assert_allclose(np.asarray(vs)[:, 0], [2.125, 2.25, 3.0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(pg)[:, 0], [1.125, 0.25, 0.0], atol=1e-6)


def test_vtrace_valid_outputs_ignore_reset_step_data():
    """Reward, ratio and value-free data of the reset step (after a done row) never reach valid outputs."""
    rng = np.random.default_rng(11)
    T, B = 24, 4
    term_rows = rng.random((T + 1, B)) < 0.15
    trunc_rows = (rng.random((T + 1, B)) < 0.1) & ~term_rows
    term_rows[0] = trunc_rows[0] = False
    v = rng.normal(size=(T + 1, B)).astype(np.float32)
    r_rows = rng.normal(size=(T + 1, B)).astype(np.float32)
    log_rho = rng.normal(size=(T, B)).astype(np.float32)
    mask = np.asarray(valid_mask(term_rows, trunc_rows))
    reset = mask == 0  # transitions out of a done row
    assert reset.any()
    args = (term_rows[1:], trunc_rows[1:])
    vs, pg = vtrace(v, r_rows[1:], *args, log_rho, 0.99, rho_bar=1.2, c_bar=0.9)
    r2 = r_rows.copy()
    r2[1:][reset] = 123.0
    log_rho2 = np.where(reset, 5.0, log_rho).astype(np.float32)
    vs2, pg2 = vtrace(v, r2[1:], *args, log_rho2, 0.99, rho_bar=1.2, c_bar=0.9)
    np.testing.assert_allclose(np.asarray(vs2) * mask, np.asarray(vs) * mask, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(pg2) * mask, np.asarray(pg) * mask, rtol=1e-5, atol=1e-5)


# -- APPO: PPO with algo.vtrace=True ----------------------------------------------------------


def appo_case(vtrace_on: bool, lam: float, lagged: bool):
    """One PPO update on a CartPole-shaped segment acted by the initial params (``lagged``: the
    behaviour log-probs are shifted, as if an older policy had acted)."""
    import dataclasses

    from algos.ppo import make_ppo
    from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig
    from srljax.types import EnvSpec, Trajectory

    spec = EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2,
                   num_envs=4, batch_size=4)
    T, B = 16, 4
    cfg = Experiment(env=EnvConfig(num_envs=B), algo=PPOConfig(num_steps=T, gae_lambda=lam, vtrace=vtrace_on),
                     trainer=TrainerConfig(num_minibatches=2, update_epochs=2), total_env_steps=T * B * 10)
    algo = make_ppo(cfg, spec)
    state = algo.init(jax.random.PRNGKey(0))
    rng = np.random.default_rng(5)
    obs = rng.normal(size=(T + 1, B, 4)).astype(np.float32)
    action, extras, _ = algo.act(algo.policy_params(state), obs.reshape(-1, 4), (), np.zeros((T + 1) * B, bool),
                                 jax.random.PRNGKey(1))
    extras = {k: np.asarray(v).reshape(T + 1, B) for k, v in extras.items()}
    if lagged:
        extras["logp"] = extras["logp"] + rng.normal(0.0, 0.5, size=(T + 1, B)).astype(np.float32)
    term = rng.random((T + 1, B)) < 0.1
    trunc = (rng.random((T + 1, B)) < 0.05) & ~term
    traj = Trajectory(obs=obs, action=np.asarray(action).reshape(T + 1, B), reward=rng.normal(size=(T + 1, B)).astype(
        np.float32), terminated=term, truncated=trunc, extras=extras, policy_version=np.zeros((B,), np.int32))
    assert dataclasses.asdict(cfg)["algo"]["vtrace"] is vtrace_on
    return jax.jit(algo.update)(state, traj)


def test_appo_on_policy_equals_ppo_with_lambda_one_and_corrects_lagged_data():
    """On-policy (the learner's params acted, rho = 1) APPO's update is PPO's with gae_lambda=1;
    with lagged behaviour log-probs V-trace changes the targets, so the update differs."""
    ppo_state, ppo_metrics = appo_case(vtrace_on=False, lam=1.0, lagged=False)
    appo_state, appo_metrics = appo_case(vtrace_on=True, lam=1.0, lagged=False)
    jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=2e-4, atol=2e-5),
                 ppo_state.params, appo_state.params)
    assert float(appo_metrics["value_loss"]) == pytest.approx(float(ppo_metrics["value_loss"]), rel=1e-3)
    # APPO's gae_lambda is the trace's lambda: 0.95 gives other value targets than 1
    _, appo_lam_metrics = appo_case(vtrace_on=True, lam=0.95, lagged=False)
    assert float(appo_lam_metrics["value_loss"]) != pytest.approx(float(appo_metrics["value_loss"]), rel=1e-3)
    lag_ppo, _ = appo_case(vtrace_on=False, lam=1.0, lagged=True)
    lag_appo, _ = appo_case(vtrace_on=True, lam=1.0, lagged=True)
    diff = jax.tree.map(lambda x, y: float(np.max(np.abs(np.asarray(x) - np.asarray(y)))), lag_ppo.params,
                        lag_appo.params)
    assert max(jax.tree.leaves(diff)) > 1e-4
