"""PPO loss, masking, normalisers, networks, act and update (fast; CPU)."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos.base import RETURN_ACC, Algorithm
from algos.distributions import CATEGORICAL, DIAG_GAUSSIAN
from algos.networks import ActorCritic
from algos.normalizers import discounted_returns, init_norm, normalize, rms_init, rms_update, scale_rewards
from algos.ppo import make_ppo, ppo_loss
from algos.returns import valid_mask
from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig
from srljax.types import EnvSpec, Trajectory

CARTPOLE = EnvSpec(
    id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2, num_envs=8,
    batch_size=8,
)
CHEETAH = EnvSpec(
    id="HalfCheetah-v4",
    obs_shape=(17,),
    obs_dtype="float32",
    action_kind="continuous",
    action_shape=(6,),
    action_low=(-1.0,) * 6,
    action_high=(1.0,) * 6,
    num_envs=4,
    batch_size=4,
)
PONG = EnvSpec(id="Pong-v5", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6)
T = 16


def experiment(spec: EnvSpec, **algo) -> Experiment:
    return Experiment(
        env=EnvConfig(num_envs=spec.num_envs),
        algo=PPOConfig(num_steps=T, **algo),
        trainer=TrainerConfig(num_minibatches=2, update_epochs=2),
        total_env_steps=100 * T * spec.num_envs,
    )


# one config per spec, so each network compiles once per test session
NORMALISED = experiment(CARTPOLE, normalize_obs=True, normalize_reward=True)
CHEETAH_CFG = dataclasses.replace(
    experiment(CHEETAH, normalize_obs=True, init_log_std=-1.0), trainer=TrainerConfig(num_minibatches=1, update_epochs=1)
)
CONFIGS = {CARTPOLE.id: NORMALISED, CHEETAH.id: CHEETAH_CFG, PONG.id: experiment(dataclasses.replace(PONG, num_envs=2))}


@functools.lru_cache(maxsize=None)
def built(cfg: Experiment, spec: EnvSpec) -> tuple[Algorithm, Any, Any, Any]:
    """(algo, jitted init, act, update), shared by tests so each config compiles once."""
    algo = make_ppo(cfg, spec)
    return algo, jax.jit(algo.init), jax.jit(algo.act), jax.jit(algo.update)


def rollout(act, policy_params, spec: EnvSpec, seed: int = 0) -> Trajectory:
    """A Trajectory whose actions/extras come from ``act`` on random observations."""
    rng = np.random.default_rng(seed)
    B = spec.num_envs
    obs = (rng.normal(size=(T + 1, B, *spec.obs_shape)) * 3 + 1).astype(np.float32)
    action, extras, _ = act(policy_params, obs.reshape(-1, *spec.obs_shape), (), None, jax.random.PRNGKey(seed))
    term = rng.random((T + 1, B)) < 0.1
    trunc = (rng.random((T + 1, B)) < 0.05) & ~term
    reshape = lambda x: np.asarray(x).reshape((T + 1, B, *x.shape[1:]))  # noqa: E731
    return Trajectory(
        obs=obs,
        action=reshape(action),
        reward=rng.normal(size=(T + 1, B)).astype(np.float32),
        terminated=term,
        truncated=trunc,
        # ret_acc: the running returns a SegmentBuilder keeps for reward normalisation (ignored otherwise)
        extras={**{k: reshape(v) for k, v in extras.items()}, RETURN_ACC: rng.normal(size=(T + 1, B)).astype(np.float32)},
        policy_version=np.zeros((B,), np.int32),
    )


# -- the loss -------------------------------------------------------------------------


def fixed_apply(params, obs):
    """A 'network' whose outputs are its params, so the loss inputs are exactly chosen numbers."""
    return params["logits"], params["value"]


def test_ppo_loss_hand_computed_single_sample():
    # pi_new = 0.5, pi_old = 0.25 -> ratio 2, clipped to 1.2; adv 1 -> pg = max(-2, -1.2) = -1.2
    # value 1, old 0, ret 2: unclipped (1-2)^2 = 1, clipped (0.2-2)^2 = 3.24 -> v_loss = 0.5 * 3.24
    params = {"logits": jnp.zeros((1, 2)), "value": jnp.array([1.0])}
    mb = {
        "obs": jnp.zeros((1, 1)),
        "action": jnp.array([1], jnp.int32),
        "logp": jnp.array([math.log(0.25)]),
        "value": jnp.array([0.0]),
        "adv": jnp.array([1.0]),
        "ret": jnp.array([2.0]),
        "mask": jnp.array([1.0]),
    }
    loss, aux = ppo_loss(params, fixed_apply, mb, dist=CATEGORICAL, clip_coef=0.2, norm_adv=False)
    assert float(aux["policy_loss"]) == pytest.approx(-1.2, abs=1e-6)
    assert float(aux["value_loss"]) == pytest.approx(1.62, abs=1e-6)
    assert float(aux["entropy"]) == pytest.approx(math.log(2), abs=1e-6)
    assert float(aux["approx_kl"]) == pytest.approx(1 - math.log(2), abs=1e-6)
    assert float(aux["clipfrac"]) == 1.0
    assert float(loss) == pytest.approx(-1.2 - 0.01 * math.log(2) + 0.5 * 1.62, abs=1e-6)


def numpy_ppo_loss(logits, action, old_logp, old_v, new_v, adv, ret, mask, clip, ent_coef, vf_coef):
    keep = mask > 0
    logits, action, old_logp, old_v, new_v, adv, ret = (
        x[keep] for x in (logits, action, old_logp, old_v, new_v, adv, ret)
    )
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ratio = np.exp(log_p[np.arange(len(action)), action] - old_logp)
    adv = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
    pg = np.maximum(-adv * ratio, -adv * np.clip(ratio, 1 - clip, 1 + clip)).mean()
    v_clip = old_v + np.clip(new_v - old_v, -clip, clip)
    v_loss = 0.5 * np.maximum((new_v - ret) ** 2, (v_clip - ret) ** 2).mean()
    entropy = -(np.exp(log_p) * log_p).sum(-1).mean()
    return pg - ent_coef * entropy + vf_coef * v_loss, pg, v_loss, entropy


def test_ppo_loss_matches_numpy_with_clipping_and_mask():
    rng = np.random.default_rng(0)
    N, A = 12, 3
    logits = rng.normal(size=(N, A)).astype(np.float32)
    mb = {
        "obs": np.zeros((N, 1), np.float32),
        "action": rng.integers(0, A, N).astype(np.int32),
        "logp": (np.log(rng.uniform(0.1, 0.9, N))).astype(np.float32),  # ratios far from 1: clipping active
        "value": rng.normal(size=N).astype(np.float32),
        "adv": rng.normal(size=N).astype(np.float32),
        "ret": rng.normal(size=N).astype(np.float32),
        "mask": (rng.random(N) < 0.75).astype(np.float32),
    }
    new_v = (mb["value"] + rng.normal(size=N)).astype(np.float32)
    params = {"logits": jnp.asarray(logits), "value": jnp.asarray(new_v)}
    loss, aux = ppo_loss(params, fixed_apply, mb, dist=CATEGORICAL, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5)
    want = numpy_ppo_loss(
        logits, mb["action"], mb["logp"], mb["value"], new_v, mb["adv"], mb["ret"], mb["mask"], 0.2, 0.01, 0.5
    )
    got = (loss, aux["policy_loss"], aux["value_loss"], aux["entropy"])
    np.testing.assert_allclose(np.array(got, np.float64), np.array(want), rtol=1e-5, atol=1e-6)
    assert 0.0 < float(aux["clipfrac"]) < 1.0


def test_masked_samples_change_neither_loss_nor_gradient():
    net = ActorCritic(action_kind="discrete", action_dim=2, obs_ndim=1)
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    rng = np.random.default_rng(1)
    N = 10
    mb = {
        "obs": rng.normal(size=(N, 4)).astype(np.float32),
        "action": rng.integers(0, 2, N).astype(np.int32),
        "logp": np.full(N, -0.5, np.float32),
        "value": rng.normal(size=N).astype(np.float32),
        "adv": rng.normal(size=N).astype(np.float32),
        "ret": rng.normal(size=N).astype(np.float32),
        "mask": np.array([1, 1, 0, 1, 0, 1, 1, 1, 0, 1], np.float32),
    }
    off = mb["mask"] == 0
    other = {k: v.copy() for k, v in mb.items()}
    other["obs"][off] = 99.0
    other["action"][off] = 1 - other["action"][off]
    for key in ("logp", "value", "adv", "ret"):
        other[key][off] = 1e3
    loss_and_grad = jax.jit(
        jax.value_and_grad(lambda p, m: ppo_loss(p, net.apply, m, dist=CATEGORICAL, clip_coef=0.1), has_aux=True)
    )
    for a, b in zip(jax.tree.leaves(loss_and_grad(params, mb)), jax.tree.leaves(loss_and_grad(params, other))):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


# -- normalisers ----------------------------------------------------------------------


class NumpyRMS:
    """gym.wrappers.normalize.RunningMeanStd, verbatim semantics."""

    def __init__(self, shape=(), epsilon=1e-4):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), epsilon

    def update(self, x):
        bm, bv, bc = x.mean(0), x.var(0), x.shape[0]
        delta, tot = bm - self.mean, self.count + bc
        m2 = self.var * self.count + bv * bc + delta**2 * self.count * bc / tot
        self.mean, self.var, self.count = self.mean + delta * bc / tot, m2 / tot, tot


def test_running_mean_std_matches_gym_with_masks():
    rng = np.random.default_rng(0)
    ref, rms = NumpyRMS((3,)), rms_init((3,))
    for i in range(4):
        x = (rng.normal(size=(5, 6, 3)) * (i + 1) + i).astype(np.float32)
        mask = rng.random((5, 6)) < 0.7
        ref.update(x[mask].astype(np.float64))
        rms = rms_update(rms, x, mask)
    rms = rms_update(rms, x, np.zeros((5, 6)))  # an all-masked batch is a no-op
    np.testing.assert_allclose(rms.mean, ref.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rms.var, ref.var, rtol=1e-5)
    assert float(rms.count) == pytest.approx(ref.count, rel=1e-6)
    z = np.asarray(normalize(x, rms, 0.5))
    np.testing.assert_allclose(z, np.clip((x - ref.mean) / np.sqrt(ref.var + 1e-8), -0.5, 0.5), rtol=1e-4, atol=1e-5)


def test_reward_scaling_matches_gym_normalize_reward_across_batches():
    rng = np.random.default_rng(1)
    B, gamma = 3, 0.9
    rows = 2 * T + 1
    reward = rng.normal(size=(rows, B)).astype(np.float32)
    done = rng.random((rows, B)) < 0.15
    done[0] = False
    # oracle: step-by-step CleanRL wrapper without envpool's reset steps
    ref, ret, want = NumpyRMS(), np.zeros(B), np.zeros((rows - 1, B))
    for t in range(rows - 1):
        valid = ~done[t]
        ret = np.where(valid, ret * gamma + reward[t + 1], 0.0)
        if valid.any():
            ref.update(ret[valid])
        want[t] = reward[t + 1] / np.sqrt(ref.var + 1e-8)
    norm, got = init_norm((1,), obs=False, reward=True), []
    acc = np.zeros(B, np.float32)  # each column's accumulator at its row 0, as the SegmentBuilder keeps it
    for seg in (slice(0, T + 1), slice(T, 2 * T + 1)):  # segments share their boundary row
        mask = valid_mask(done[seg], np.zeros_like(done[seg]))
        scaled, norm = scale_rewards(norm, reward[seg][1:], mask, acc, gamma, 10.0)
        acc = np.asarray(discounted_returns(acc, reward[seg][1:], mask, gamma)[1])
        got.append(np.asarray(scaled))
    np.testing.assert_allclose(norm.ret.var, ref.var, rtol=1e-5)
    # gym scales each step with the stats so far; we scale a batch with its end-of-batch stats,
    # so the two agree exactly on each batch's last row
    np.testing.assert_allclose(got[0][-1], want[T - 1], rtol=1e-5)
    np.testing.assert_allclose(got[1][-1], want[-1], rtol=1e-5)


# -- networks and act -----------------------------------------------------------------


def test_network_output_shapes_and_cleanrl_param_count():
    # eval_shape: shapes without compiling the CNN (the act test below runs it for real)
    cnn = ActorCritic(action_kind="discrete", action_dim=6, obs_ndim=3, torso="cnn")
    frames = jax.ShapeDtypeStruct((2, 3, 4, 84, 84), jnp.uint8)  # extra leading dims pass through
    params = jax.eval_shape(cnn.init, jax.random.PRNGKey(0), frames)
    logits, value = jax.eval_shape(cnn.apply, params, frames)
    assert logits.shape == (2, 3, 6) and value.shape == (2, 3)
    # Nature CNN: convs + 3136->512 dense + heads, as CleanRL's ppo_atari (1,687,719 for 6 actions)
    assert sum(math.prod(x.shape) for x in jax.tree.leaves(params)) == 1_687_719
    mlp = ActorCritic(action_kind="continuous", action_dim=6, obs_ndim=1, hidden_sizes=(32, 16), activation="relu")
    params = jax.jit(mlp.init)(jax.random.PRNGKey(0), jnp.zeros((1, 17)))
    (mean, log_std), value = jax.jit(mlp.apply)(params, jnp.ones((5, 17)))
    assert mean.shape == log_std.shape == (5, 6) and value.shape == (5,)
    np.testing.assert_array_equal(params["params"]["log_std"], np.zeros(6))
    assert {"actor", "critic"} <= set(params["params"])
    assert [x.shape for x in jax.tree.leaves(params["params"]["actor"])] == [(32,), (17, 32), (16,), (32, 16)]


@pytest.mark.parametrize("spec", [CARTPOLE, CHEETAH, dataclasses.replace(PONG, num_envs=2)], ids=lambda s: s.id)
def test_act_shapes_and_dtypes(spec):
    algo, init, act, _ = built(CONFIGS[spec.id], spec)
    pp = algo.policy_params(init(jax.random.PRNGKey(0)))
    B = 3
    obs = jnp.zeros((B, *spec.obs_shape), spec.obs_dtype)
    assert algo.initial_actor_state(B) == ()
    action, extras, actor_state = act(pp, obs, (), jnp.zeros(B, bool), jax.random.PRNGKey(1))
    assert action.shape == (B, *spec.action_shape) and action.dtype == np.dtype(spec.action_dtype)
    assert set(extras) == set(algo.extras_spec) and actor_state == ()
    for name, (shape, dtype) in algo.extras_spec.items():
        assert extras[name].shape == (B, *shape) and extras[name].dtype == np.dtype(dtype)
    if spec.action_kind == "continuous":  # the behaviour logp is the Gaussian's at the sampled action
        (mean, log_std), _ = ActorCritic(action_kind="continuous", action_dim=6, obs_ndim=1).apply(pp["params"], obs)
        np.testing.assert_allclose(extras["logp"], DIAG_GAUSSIAN.log_prob((mean, log_std), action), rtol=1e-5)
        np.testing.assert_array_equal(log_std, -1.0)  # CHEETAH_CFG's init_log_std reaches the network


# -- update ---------------------------------------------------------------------------

def test_update_lowers_loss_changes_params_and_reports_finite_metrics():
    algo, init, act, update = built(NORMALISED, CARTPOLE)
    state0 = init(jax.random.PRNGKey(0))
    traj = rollout(act, algo.policy_params(state0), CARTPOLE)
    state, first = update(state0, traj)
    expected = {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "grad_norm"}
    assert expected | {"lr"} <= set(first)
    assert all(np.isfinite(float(v)) and np.shape(v) == () for v in first.values())
    assert float(first["lr"]) == pytest.approx(NORMALISED.trainer.lr)
    for _ in range(4):
        state, last = update(state, traj)
    assert float(last["loss"]) < float(first["loss"])
    assert float(last["lr"]) < float(first["lr"])  # annealed
    assert int(state.step) == 5
    changed = [not np.allclose(a, b) for a, b in zip(jax.tree.leaves(state0.params), jax.tree.leaves(state.params))]
    assert any(changed)
    n_valid = float(np.sum(valid_mask(traj.terminated, traj.truncated)))
    assert float(state.norm.obs.count) == pytest.approx(1e-4 + 5 * n_valid, rel=1e-6)


def test_update_ignores_data_of_invalid_transitions():
    algo, init, act, update = built(NORMALISED, CARTPOLE)
    state = init(jax.random.PRNGKey(0))
    traj = rollout(act, algo.policy_params(state), CARTPOLE, seed=2)
    done = traj.terminated | traj.truncated
    after_done = np.zeros_like(done)
    after_done[1:] = done[:-1]
    assert done[:-1].any()
    edited = traj._replace(
        action=np.where(done, 1 - traj.action, traj.action),  # the env ignored these actions
        reward=np.where(after_done, 7.0, traj.reward).astype(np.float32),  # reset-step rewards
        extras={**traj.extras, "logp": np.where(done, -9.0, traj.extras["logp"]).astype(np.float32)},
    )
    a, ma = update(state, traj)
    b, mb = update(state, edited)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    for k in ma:
        np.testing.assert_allclose(ma[k], mb[k], rtol=1e-5, atol=1e-6)


def test_first_ratio_is_one_with_obs_normalisation():
    """The loss sees the obs normalised with the stats the actors used, so the first step's KL is 0."""
    algo, init, act, update = built(CHEETAH_CFG, CHEETAH)  # one epoch of one minibatch
    state = init(jax.random.PRNGKey(0))
    state, _ = update(state, rollout(act, algo.policy_params(state), CHEETAH, seed=1))  # non-trivial obs stats
    assert float(jnp.abs(state.norm.obs.mean).max()) > 0.1
    _, metrics = update(state, rollout(act, algo.policy_params(state), CHEETAH, seed=2))
    assert float(metrics["approx_kl"]) == pytest.approx(0.0, abs=1e-6)
    assert float(metrics["clipfrac"]) == 0.0


@pytest.mark.parametrize("proximal", ["behaviour", "auto"])
def test_appo_proximal_policy_on_lagged_samples(proximal):
    """Samples from a policy some updates old: APPO clipping around the actors' policy starts with ratios
    away from 1 (some clipped at once); around the learner's (``algo.proximal=auto``, i.e. ``learner``) at 1."""
    cfg = dataclasses.replace(CHEETAH_CFG, algo=dataclasses.replace(CHEETAH_CFG.algo, vtrace=True, proximal=proximal))
    algo, init, act, update = built(cfg, CHEETAH)
    old = init(jax.random.PRNGKey(0))
    state = old
    for seed in range(3):  # the learner moves on while the lagged segment was being collected
        state, _ = update(state, rollout(act, algo.policy_params(state), CHEETAH, seed=seed))
    lagged = rollout(act, algo.policy_params(old), CHEETAH, seed=7)
    _, metrics = update(state, lagged)  # one epoch of one minibatch: the metrics are the first step's
    if proximal == "auto":  # APPO's default: the learner's
        assert float(metrics["approx_kl"]) == pytest.approx(0.0, abs=1e-6)
        assert float(metrics["clipfrac"]) == 0.0
    else:
        assert float(metrics["approx_kl"]) > 1e-4
        assert float(metrics["clipfrac"]) > 0.0


def test_proximal_needs_vtrace():
    from srljax.config import problems

    cfg = dataclasses.replace(CHEETAH_CFG, algo=dataclasses.replace(CHEETAH_CFG.algo, proximal="learner"))
    assert any("algo.proximal=learner needs algo.vtrace=true" in p for p in problems(cfg)), problems(cfg)


def test_make_dispatches_on_the_algo_config():
    import algos

    if not hasattr(algos, "make"):
        pytest.skip("algos imported as a namespace package: the editable install predates algos/__init__.py")
    algo = algos.make(CHEETAH_CFG, CHEETAH)
    assert set(algo.extras_spec) == {"logp", "value"}
