"""Recurrent (LSTM) policies: carries across episode starts, segments and remote inference; learning a
partially observable task (``-m slow``) and a memory probe."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import algos
import envs
from algos.networks import make_actor_critic
from algos.recurrent import Recurrent, episode_starts
from envs.probe import CueMemory
from launch.threads import run_threads
from srljax.config import (
    EnvConfig,
    Experiment,
    IMPALAConfig,
    LogConfig,
    PPOConfig,
    TrainerConfig,
    apply_overrides,
    load_file,
    problems,
)
from srljax.learning.acting import Acting
from srljax.learning.rollout import SegmentBuilder
from srljax.loops.train import train
from srljax.system.acting.carries import CarryStore, RowTags, checked_tags

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_lstm_ppo.py"
QUIET = LogConfig(wandb="disabled", progress="lines", log_every=5)


def cue_experiment(lstm_size: int, **kw) -> Experiment:
    return Experiment(
        env=EnvConfig(factory="envs.probe:make_cue_memory", num_envs=8, max_episode_steps=4),
        algo=PPOConfig(num_steps=16, lstm_size=lstm_size, hidden_sizes=(32,), ent_coef=0.01, gamma=0.9),
        trainer=TrainerConfig(lr=3e-3, anneal_lr=False, num_minibatches=2, update_epochs=4),
        total_env_steps=8 * 16 * 10, **kw,
    )


def collect(cfg: Experiment, state, segments: int = 1):
    """Act with ``Acting`` on the config's env (async ring of 2 batches) and return the segment(s)."""
    env = envs.make(dataclasses.replace(cfg.env, batch_size=cfg.env.num_envs // 2), seed=3)
    algo = algos.make(cfg, env.spec)
    acting = Acting(algo, env.spec.num_envs, jax.random.PRNGKey(1))
    builder = SegmentBuilder(env.spec, cfg.algo.num_steps, algo.extras_spec)
    env.async_reset()
    out = []
    while len(out) < segments:
        ts = env.recv()
        action, extras = acting.act(algo.policy_params(state), ts)
        env.send(action, ts.env_id)
        builder.add(ts, action, extras, 0)
        if builder.ready(env.spec.num_envs):
            out.append(builder.pop(env.spec.num_envs))
    env.close()
    return algo, out


def test_acting_resets_at_episode_starts_and_unroll_reproduces_act():
    cfg = cue_experiment(lstm_size=16)
    spec = envs.make(cfg.env, 0).spec
    algo = algos.make(cfg, spec)
    state = algo.init(jax.random.PRNGKey(0))
    _, (seg1, seg2) = collect(cfg, state, segments=2)
    # episodes of 4 steps: reset rows (previous row done) and each env's very first row start at zero carry
    starts = np.asarray(episode_starts(seg1.terminated, seg1.truncated))
    assert starts.sum() >= 8
    zero = np.all(seg1.extras["lstm_c"] == 0, axis=-1) & np.all(seg1.extras["lstm_h"] == 0, axis=-1)
    np.testing.assert_array_equal(zero[1:], starts[1:])
    assert zero[0].all()  # every env's first row since the Acting started
    # the second segment starts mid-episode for some envs: its row-0 carry is the first one's last row
    np.testing.assert_array_equal(seg2.extras["lstm_c"][0], seg1.extras["lstm_c"][-1])
    assert (~np.all(seg2.extras["lstm_c"][0] == 0, axis=-1)).any()
    # the learner's unroll from the stored row-0 carry gives what the actor computed, row by row
    rec = Recurrent.from_feedforward(make_actor_critic(cfg.algo, spec), 16)
    for seg in (seg1, seg2):
        logits, value = rec.unroll_segment(state.params, jnp.asarray(seg.obs), seg.terminated, seg.truncated, seg.extras)
        np.testing.assert_allclose(value, seg.extras["value"], atol=1e-5)
        logp = jax.nn.log_softmax(logits)[np.arange(seg.obs.shape[0])[:, None], np.arange(8)[None], seg.action]
        np.testing.assert_allclose(logp, seg.extras["logp"], atol=1e-5)
    # without the resets inside the segment, the unroll would differ: the resets are doing something
    _, wrong = rec.unroll(state.params, (jnp.asarray(seg1.extras["lstm_c"][0]), jnp.asarray(seg1.extras["lstm_h"][0])),
                          jnp.asarray(seg1.obs), jnp.zeros(seg1.reward.shape, bool))
    assert np.abs(np.asarray(wrong) - seg1.extras["value"]).max() > 1e-3


def test_recurrent_update_first_epoch_ratio_is_one_and_columns_are_minibatches():
    cfg = dataclasses.replace(cue_experiment(lstm_size=16), trainer=TrainerConfig(num_minibatches=4, update_epochs=1, lr=1e-9))
    spec = envs.make(cfg.env, 0).spec
    algo = algos.make(cfg, spec)
    state = algo.init(jax.random.PRNGKey(0))
    _, (seg,) = collect(cfg, state)
    new_state, metrics = jax.jit(algo.update)(state, seg)
    assert abs(float(metrics["approx_kl"])) < 1e-6 and float(metrics["clipfrac"]) == 0.0
    assert int(new_state.step) == 1
    assert set(algo.extras_spec) == {"logp", "value", "lstm_c", "lstm_h"}
    assert algo.extras_spec["lstm_c"] == ((16,), "float32")


@pytest.mark.parametrize("vtrace", [False, True])
def test_recurrent_impala_and_appo_reunroll_what_the_actor_computed(vtrace):
    """IMPALA and APPO re-unroll the LSTM from each column's stored carry: on data acted with the same
    params, every importance ratio is exactly what the actor saw (rho = 1, PPO ratio = 1)."""
    base = cue_experiment(lstm_size=16)
    if vtrace:
        cfg = dataclasses.replace(base, algo=dataclasses.replace(base.algo, vtrace=True),
                                  trainer=TrainerConfig(num_minibatches=2, update_epochs=1, lr=1e-9))
    else:
        cfg = dataclasses.replace(base, algo=IMPALAConfig(num_steps=16, lstm_size=16, hidden_sizes=(32,)),
                                  trainer=TrainerConfig(num_minibatches=2, update_epochs=1, lr=1e-9))
    spec = envs.make(cfg.env, 0).spec
    algo = algos.make(cfg, spec)
    assert {"lstm_c", "lstm_h"} <= set(algo.extras_spec)
    state = algo.init(jax.random.PRNGKey(0))
    _, (seg,) = collect(cfg, state)
    _, metrics = jax.jit(algo.update)(state, seg)
    if vtrace:
        assert abs(float(metrics["approx_kl"])) < 1e-6 and float(metrics["clipfrac"]) == 0.0
    else:
        assert abs(float(metrics["rho_mean"]) - 1.0) < 1e-5 and float(metrics["rho_clipfrac"]) == 0.0
    # a wrong carry (zeros instead of the stored one) changes what the learner computes
    _, (_, later) = collect(cfg, state, segments=2)  # starts mid-episode for some envs: a non-zero row-0 carry
    wrong = later._replace(extras={**later.extras, "lstm_c": np.zeros_like(later.extras["lstm_c"]),
                                   "lstm_h": np.zeros_like(later.extras["lstm_h"])})
    right_metrics = jax.jit(algo.update)(state, later)[1]
    wrong_metrics = jax.jit(algo.update)(state, wrong)[1]
    # APPO clips around the learner's own re-unrolled policy (algo.proximal=auto), so its first step's policy loss
    # is the same with either carry; the values (value loss, V-trace targets) show the carry
    key = "value_loss" if vtrace else "policy_loss"
    assert abs(float(wrong_metrics[key]) - float(right_metrics[key])) > 1e-6


def test_carry_store_keeps_rows_apart_and_a_resend_does_not_step_twice():
    store = CarryStore(lambda n: (np.zeros((n, 2), np.float32),), num_envs=3, num_actors=2)
    ids, seq = np.array([0, 2], np.int32), np.array([1, 1], np.int64)
    (c,) = store.gather(1, ids, seq)
    np.testing.assert_array_equal(c, 0)
    store.scatter(1, ids, seq, (np.array([[1, 1], [2, 2]], np.float32),))
    (c,) = store.gather(1, ids, seq + 1)  # the next step of the same rows
    np.testing.assert_array_equal(c, [[1, 1], [2, 2]])
    store.scatter(1, ids, seq + 1, (np.array([[3, 3], [4, 4]], np.float32),))
    (c,) = store.gather(1, ids[:1], seq[:1] + 1)  # step 2 of env 0 again: a resend acts from the carry before it
    np.testing.assert_array_equal(c, [[1, 1]])
    assert store.resent_rows == 1
    store.scatter(1, ids[:1], seq[:1] + 1, (np.array([[3, 3]], np.float32),))
    (c,) = store.gather(1, ids, seq + 2)
    np.testing.assert_array_equal(c, [[3, 3], [4, 4]])
    (c,) = store.gather(0, ids, seq)  # actor 0's rows are its own
    np.testing.assert_array_equal(c, 0)


def test_row_tags_mark_first_rows_and_are_checked():
    env = CueMemory(num_envs=2, length=2)
    tags = RowTags(2, actor=1)
    ts = env.reset()
    firsts = []
    for _ in range(4):
        tree = tags.tag(ts)
        assert checked_tags(tree, 2, num_envs=2, num_actors=2)[0] == 1
        firsts.append(tree["first"].tolist())
        ts = env.step(np.zeros(2, np.int32))
    assert firsts == [[True, True], [False, False], [False, False], [True, True]]  # length 2: reset row at step 3
    assert tree["seq"].tolist() == [4, 4]
    with pytest.raises(ValueError, match="actor"):
        checked_tags({**tree, "actor": np.array([2], np.int32)}, 2, num_envs=2, num_actors=2)
    with pytest.raises(ValueError, match="env ids"):
        checked_tags({**tree, "env_id": np.array([0, 0], np.int32)}, 2, num_envs=2, num_actors=2)


def test_obs_mask_keeps_given_indices_of_any_env():
    full = envs.make(EnvConfig(id="CartPole-v1", num_envs=2), seed=5)
    masked = envs.make(EnvConfig(id="CartPole-v1", num_envs=2, obs_mask=(0, 2)), seed=5)
    assert masked.spec.obs_shape == (2,) and full.spec.obs_shape == (4,)
    a, b = full.reset(), masked.reset()
    for _ in range(5):
        np.testing.assert_array_equal(b.obs, a.obs[:, [0, 2]])
        a, b = full.step(np.ones(2, np.int32)), masked.step(np.ones(2, np.int32))
    full.close(), masked.close()
    with pytest.raises(ValueError, match=r"obs_mask=\(0, 4\).*\[0, 4\)"):
        envs.make(EnvConfig(id="CartPole-v1", num_envs=1, obs_mask=(0, 4)), seed=0)


def test_config_refuses_bad_recurrent_and_mask_settings():
    base = load_file(CONFIG)
    assert problems(base) == []
    found = problems(apply_overrides(base, ["trainer.num_minibatches=3"]))
    assert any("recurrent minibatches are whole env columns" in p and "16" in p for p in found), found
    assert any("lstm_size=-1" in p for p in problems(apply_overrides(base, ["algo.lstm_size=-1"])))
    assert any("distinct indices" in p for p in problems(apply_overrides(base, ["env.obs_mask=(0,0)"])))


def cue_return(tmp_path: Path, lstm_size: int) -> float:
    """Train on the memory probe (episodes of 4 steps, the cue shown only at the first); mean return."""
    log = dataclasses.replace(QUIET, run_root=str(tmp_path))
    cfg = dataclasses.replace(cue_experiment(lstm_size, name="cue", trial=f"lstm{lstm_size}", log=log),
                              total_env_steps=8 * 16 * 120)
    return train(cfg).metrics[-1]["episode_return"]


def test_memory_probe_needs_the_lstm(tmp_path):
    """Return 4 needs the cue at every step; a feed-forward policy earns about 1 + 3/2 = 2.5."""
    start = time.perf_counter()
    lstm = cue_return(tmp_path, 32)
    feedforward = cue_return(tmp_path, 0)
    print(f"cue memory: lstm {lstm:.2f}, feed-forward {feedforward:.2f} in {time.perf_counter() - start:.0f} s")
    assert lstm >= 3.7
    assert feedforward <= 3.0


def masked_cartpole(tmp_path: Path, trial: str, *overrides: str) -> Experiment:
    """``configs/cartpole_lstm_ppo.py`` (CartPole, velocities hidden), quiet, in ``tmp_path``."""
    return apply_overrides(load_file(CONFIG), [f"trial={trial}", f"log.run_root={tmp_path}", "log.wandb=disabled",
                                               "log.progress=lines", *overrides])


@pytest.mark.slow
def test_masked_cartpole_needs_the_lstm(tmp_path):
    """The config reaches a mean return of 400 with its LSTM; the same config feed-forward stays below 200."""
    start = time.perf_counter()
    lstm = train(masked_cartpole(tmp_path, "lstm")).metrics[-1]["episode_return"]
    middle = time.perf_counter()
    feedforward = train(masked_cartpole(tmp_path, "ff", "algo.lstm_size=0")).metrics[-1]["episode_return"]
    print(f"masked CartPole: lstm {lstm:.1f} ({middle - start:.0f} s), "
          f"feed-forward {feedforward:.1f} ({time.perf_counter() - middle:.0f} s)")
    assert lstm >= 400
    assert feedforward < 200


@pytest.mark.slow
def test_masked_cartpole_lstm_learns_with_remote_inference(tmp_path):
    """The same LSTM config as a worker graph: 2 actors whose carries live in a policy worker."""
    cfg = masked_cartpole(tmp_path, "remote", "layout.mode=distributed", "layout.inference=remote",
                          "layout.num_actors=2", "trainer.batch_envs=16", "env.num_envs=8")
    start = time.perf_counter()
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    final = result.metrics[-1]["episode_return"]
    print(f"masked CartPole, remote inference: lstm {final:.1f} ({time.perf_counter() - start:.0f} s)")
    assert final >= 400
    policy = result.worker_metrics("policy", 0)[-1]
    assert policy["rows"] > 0 and "carries/resent_rows" in policy


@pytest.mark.slow
def test_memory_probe_needs_the_lstm_with_impala(tmp_path):
    """The same probe with IMPALA (V-trace on the re-unrolled LSTM): 4 with memory, ~2.5 without."""
    def run(lstm_size: int) -> float:
        cfg = Experiment(
            name="cue_impala", trial=f"lstm{lstm_size}",
            env=EnvConfig(factory="envs.probe:make_cue_memory", num_envs=8, max_episode_steps=4),
            algo=IMPALAConfig(num_steps=16, lstm_size=lstm_size, hidden_sizes=(32,), ent_coef=0.01, gamma=0.9,
                              optimizer="adam"),
            trainer=TrainerConfig(lr=3e-3, anneal_lr=False, num_minibatches=2, update_epochs=1, max_grad_norm=40.0),
            total_env_steps=8 * 16 * 150, log=dataclasses.replace(QUIET, run_root=str(tmp_path)))
        return train(cfg).metrics[-1]["episode_return"]

    assert run(32) >= 3.7
    assert run(0) <= 3.0
