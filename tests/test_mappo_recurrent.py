"""Recurrent MAPPO (``algo.lstm_size > 0``, ``algos/mappo.py``): the carry per agent, its reset at an env's episode
start, whole agent columns in the update, the legal-action masks."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import algos
from algos.mappo import agent_columns
from algos.mappo_config import MAPPOConfig
from envs.multi_agent import ParallelEnvVecEnv
from srljax.config import EnvConfig, TrainerConfig
from srljax.learning.rollout import SegmentBuilder
from srljax.prepare import problems
from tests.test_multi_agent import TinyParallel, _cfg, _spec

pytestmark = pytest.mark.filterwarnings("ignore:.*precision lowered:UserWarning")
H = 8


def _sharpen(state, scale: float = 300.0):
    """Policy logits large enough that a wrong carry moves the log-probabilities visibly (the head starts at 0.01)."""
    p = jax.tree.map(lambda x: x, state.params)
    p["params"]["policy_head"]["kernel"] = p["params"]["policy_head"]["kernel"] * scale
    return state.replace(params=p) if hasattr(state, "replace") else state._replace(params=p)


def test_agent_columns_keep_each_agent_of_each_env_in_time_order():
    x = jnp.arange(4 * 3 * 2).reshape(4, 3, 2)  # [T, B, N]
    cols = np.asarray(agent_columns(x))
    assert cols.shape == (6, 4)
    for b in range(3):
        for i in range(2):
            np.testing.assert_array_equal(cols[b * 2 + i], np.asarray(x)[:, b, i])
    env = jnp.arange(4 * 3).reshape(4, 3)  # env data repeated per agent as the update's GAE columns
    np.testing.assert_array_equal(np.asarray(jnp.repeat(env, 2, axis=1)).reshape(4, 3, 2),
                                  np.broadcast_to(np.asarray(env)[..., None], (4, 3, 2)))


def test_the_carry_is_per_agent_and_zeroed_where_an_env_starts_an_episode():
    spec = _spec()
    algo = algos.make(_cfg(lstm_size=H), spec)
    assert algo.extras_spec["lstm_c"] == ((2, H), "float32") and algo.extras_spec["lstm_h"] == ((2, H), "float32")
    pp = algo.policy_params(_sharpen(algo.init(jax.random.PRNGKey(0))))
    act = jax.jit(algo.act)
    rng = np.random.default_rng(0)
    obs = np.zeros((3, 2, 7), np.float32)
    obs[..., :3] = rng.normal(size=(3, 2, 3))
    obs[..., 3:] = 1.0  # every action legal
    zeros = algo.initial_actor_state(3)
    assert [z.shape for z in zeros] == [(3, 2, H)] * 2 and not np.any(np.asarray(zeros[0]))
    state = zeros
    for _ in range(3):  # some steps: a carry that is not zero, different per agent
        _, extras, state = act(pp, obs, state, np.zeros(3, bool), jax.random.PRNGKey(1))
    h = np.asarray(state[1])
    assert np.abs(h).min(axis=-1).max() > 0 and not np.allclose(h[:, 0], h[:, 1])
    first = np.array([True, False, False])
    _, extras, _ = act(pp, obs, state, first, jax.random.PRNGKey(2))
    np.testing.assert_array_equal(np.asarray(extras["lstm_c"])[0], 0.0)  # env 0 acted from a fresh carry
    np.testing.assert_array_equal(np.asarray(extras["lstm_h"])[1:], h[1:])  # the others from theirs
    _, fresh, _ = act(pp, obs, zeros, np.ones(3, bool), jax.random.PRNGKey(2))
    _, kept, _ = act(pp, obs, state, np.zeros(3, bool), jax.random.PRNGKey(2))
    np.testing.assert_allclose(extras["logp"][0], fresh["logp"][0], rtol=1e-6)
    np.testing.assert_allclose(extras["logp"][1:], kept["logp"][1:], rtol=1e-6)
    assert not np.allclose(kept["logp"][0], fresh["logp"][0])  # the carry matters to the policy


def test_masked_actions_are_never_sampled_by_the_recurrent_policy():
    spec = _spec()
    algo = algos.make(_cfg(lstm_size=H), spec)
    pp = algo.policy_params(algo.init(jax.random.PRNGKey(0)))
    obs = np.zeros((512, 2, 7), np.float32)
    obs[:, :, :3] = np.random.default_rng(0).normal(size=(512, 2, 3))
    obs[:, 0, 3:] = [0, 0, 1, 0]  # agent 0 (a dead unit): only action 2
    obs[:, 1, 3:] = [1, 0, 0, 1]
    action, extras, _ = jax.jit(algo.act)(pp, obs, algo.initial_actor_state(512), np.ones(512, bool),
                                          jax.random.PRNGKey(1))
    action = np.asarray(action)
    assert (action[:, 0] == 2).all() and set(action[:, 1]) == {0, 3}
    assert np.allclose(np.asarray(extras["logp"])[:, 0], 0.0, atol=1e-6)


def _segment(algo, pp, num_envs: int = 4, steps: int = 12):
    """A [T+1, B] segment of TinyParallel (5-step episodes: several ends inside it) acted by ``algo``'s recurrent
    policy, the carry reset on each env's first row as the shells do."""
    env = ParallelEnvVecEnv(TinyParallel, num_envs, 0)
    builder = SegmentBuilder(env.spec, steps, algo.extras_spec)
    ts, act = env.reset(), jax.jit(algo.act)
    state, first = algo.initial_actor_state(num_envs), np.ones(num_envs, bool)
    for t in range(steps + 1):
        action, extras, state = act(pp, ts.obs, state, first, jax.random.PRNGKey(t))
        builder.add(ts, np.asarray(action), jax.device_get(extras), 0)
        first = np.asarray(ts.terminated | ts.truncated)  # the next row is its env's reset row
        ts = env.step(np.asarray(action))
    traj = builder.pop(num_envs)
    env.close()
    return env.spec, traj


@pytest.mark.slow  # one update compilation per case (~20 s of CPU on the shared box)
def test_the_update_unrolls_whole_agent_columns_from_the_stored_carry():
    """With lr 0 every minibatch re-unrolls the acting policy: the ratio is 1 (approx_kl ~0) only if each column is
    one agent's whole sequence in time order, started from the carry row 0 was acted with and reset after every
    done row inside the segment. Breaking either (a zeroed row-0 carry, episode ends moved) shows as a KL."""
    env = ParallelEnvVecEnv(TinyParallel, 4, 0)
    spec = env.spec
    env.close()
    cfg = dataclasses.replace(_cfg(lstm_size=H), env=EnvConfig(factory="x:y", num_envs=4),
                              trainer=TrainerConfig(num_minibatches=2, update_epochs=2, lr=0.0))
    algo = algos.make(cfg, spec)
    state = _sharpen(algo.init(jax.random.PRNGKey(0)))
    pp = algo.policy_params(state)
    _, traj = _segment(algo, pp, steps=24)
    traj = jax.tree.map(lambda x: x[14:], traj)  # [11, 4]: starts mid-episode (resets at rows 0, 6, 12, ...)
    assert np.abs(np.asarray(traj.extras["lstm_h"][0])).max() > 0
    done = np.asarray(traj.terminated | traj.truncated)[:-1]
    assert done.any()
    update = jax.jit(algo.update)
    _, m = update(state, traj)
    assert float(m["approx_kl"]) < 1e-5 and float(m["clipfrac"]) == 0.0, m
    zero0 = traj._replace(extras={**traj.extras, **{k: jnp.asarray(traj.extras[k]).at[0].set(0.0)
                                                    for k in ("lstm_c", "lstm_h")}})
    _, m0 = update(state, zero0)
    moved = traj._replace(truncated=np.roll(traj.truncated, 1, axis=0))
    _, m1 = update(state, moved)
    assert float(m0["approx_kl"]) > 100 * max(float(m["approx_kl"]), 1e-7), (m0, m)
    assert float(m1["approx_kl"]) > 100 * max(float(m["approx_kl"]), 1e-7), (m1, m)
    print("approx_kl", float(m["approx_kl"]), float(m0["approx_kl"]), float(m1["approx_kl"]))


def test_recurrent_mappo_config_checks():
    assert problems(_cfg(lstm_size=H)) == []
    found = " | ".join(problems(_cfg(lstm_size=-1)))
    assert "algo.lstm_size=-1 must be >= 0" in found


class CueParallel(TinyParallel):
    """Two agents see a cue (+1 or -1) only on an episode's first row, then zeros; every step each agent earns 1 when
    its action is the cue's (0 for -1, 1 for +1; action 2 masked). 5 steps: remembering the cue earns 10 per episode,
    a policy without memory 2 + 4 x 2 x 0.5 = 6 in expectation."""

    def __init__(self) -> None:
        super().__init__()
        self.rng, self.cue = np.random.default_rng(0), 0

    def _obs(self) -> dict:
        shown = (2.0 * self.cue - 1.0) if self.t == 0 else 0.0
        return {a: {"observation": np.array([shown, self.t / 5.0], np.float32), "action_mask": np.array([1, 1, 0], np.int8)}
                for a in self.possible_agents}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.cue = int(self.rng.integers(0, 2))
        return super().reset(seed, options)

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        rewards = {a: float(actions[a] == self.cue) for a in self.possible_agents}
        self.t += 1
        self.total += sum(rewards.values())
        done = {a: self.t >= 5 for a in self.possible_agents}
        return self._obs(), rewards, {a: False for a in done}, done, {a: {} for a in done}


def make_cue(cfg: EnvConfig, seed: int) -> ParallelEnvVecEnv:
    return ParallelEnvVecEnv(CueParallel, cfg.num_envs, seed, batch_size=cfg.envs_per_recv)


@pytest.mark.slow  # two short trainings on a Python env (~1-2 min of CPU)
def test_recurrent_mappo_learns_to_remember_a_cue_and_feed_forward_cannot(tmp_path):
    from srljax.config import CheckpointConfig, Experiment, LogConfig
    from srljax.loops.train import train

    def run(lstm_size: int) -> float:
        cfg = Experiment(name="cue", trial=f"lstm{lstm_size}",
                         env=EnvConfig(factory="tests.test_mappo_recurrent:make_cue", num_envs=8),
                         algo=MAPPOConfig(num_steps=10, ent_coef=0.0, critic="local", hidden_sizes=(32,), lstm_size=lstm_size),
                         trainer=TrainerConfig(lr=3e-3, num_minibatches=2, update_epochs=4),
                         total_env_steps=8 * 10 * 60, log=LogConfig(run_root=str(tmp_path), wandb="disabled",
                                                                    progress="lines", window=40),
                         checkpoint=CheckpointConfig(final=False))
        return train(cfg).metrics[-1]["episode_return"]

    recurrent, feed_forward = run(16), run(0)
    assert recurrent > 8.5 and feed_forward < 7.5, (recurrent, feed_forward)


@pytest.mark.parametrize("lstm_size", [0, H])
def test_clip_per_network_keeps_the_actors_step_apart_from_the_critics_gradient(lstm_size):
    from algos.mappo import gradient_clip

    algo = algos.make(_cfg(lstm_size=lstm_size), _spec())
    params = algo.init(jax.random.PRNGKey(0)).params
    assert {"actor", "critic", "policy_head", "value_head"} <= set(params["params"])

    def grads(critic_scale: float):
        return {"params": {k: jax.tree.map(lambda x: jnp.full_like(x, critic_scale if k in ("critic", "value_head")
                                                                  else 1.0), v) for k, v in params["params"].items()}}

    def clipped(per: bool, critic_scale: float):
        tx = gradient_clip(MAPPOConfig(clip_per_network=per), 0.25)
        out, _ = tx.update(grads(critic_scale), tx.init(params), params)
        return out["params"]

    small, big = clipped(True, 1.0), clipped(True, 1000.0)
    for k in small:  # the actor's clipped gradient is the same whatever the critic's
        if k not in ("critic", "value_head"):
            jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-6), small[k], big[k])
    norm = lambda tree, keys: float(optax.tree.norm({k: tree[k] for k in keys}))  # noqa: E731
    actor_keys = [k for k in small if k not in ("critic", "value_head")]
    assert abs(norm(big, actor_keys) - 0.25) < 1e-4 and abs(norm(big, ["critic", "value_head"]) - 0.25) < 1e-4
    joint = clipped(False, 1000.0)  # one norm: the critic's gradient shrinks the actor's step
    assert norm(joint, actor_keys) < 0.25 / 100


GRU_RC = dict(lstm_size=H, rnn_cell="gru", recurrent_critic=True, post_rnn_sizes=(8,))
"""JaxMARL's shape: a GRU in the actor and in the critic, a dense layer after each."""


def test_gru_and_critic_carries_are_per_agent_and_zeroed_where_an_env_starts_an_episode():
    spec = _spec()
    algo = algos.make(_cfg(**GRU_RC), spec)
    assert {k: v for k, v in algo.extras_spec.items() if k not in ("logp", "value")} == {
        "gru_h": ((2, H), "float32"), "critic_gru_h": ((2, H), "float32")}
    pp = algo.policy_params(_sharpen(algo.init(jax.random.PRNGKey(0))))
    assert {"gru", "post_0", "critic_gru", "critic_post_0"} <= set(pp["params"]["params"])
    act = jax.jit(algo.act)
    obs = np.zeros((3, 2, 7), np.float32)
    obs[..., :3] = np.random.default_rng(0).normal(size=(3, 2, 3))
    obs[..., 3:] = 1.0
    zeros = algo.initial_actor_state(3)
    assert [z.shape for z in zeros] == [(3, 2, H)] * 2 and not np.any(np.asarray(zeros))
    state = zeros
    for _ in range(3):
        _, extras, state = act(pp, obs, state, np.zeros(3, bool), jax.random.PRNGKey(1))
    for h in map(np.asarray, state):  # the actor's and the critic's carries: set, different per agent
        assert np.abs(h).min(axis=-1).max() > 0 and not np.allclose(h[:, 0], h[:, 1])
    assert not np.allclose(np.asarray(state[0]), np.asarray(state[1]))
    first = np.array([True, False, False])
    _, extras, _ = act(pp, obs, state, first, jax.random.PRNGKey(2))
    for k, h in zip(("gru_h", "critic_gru_h"), state):
        np.testing.assert_array_equal(np.asarray(extras[k])[0], 0.0)  # env 0 acted from fresh carries
        np.testing.assert_array_equal(np.asarray(extras[k])[1:], np.asarray(h)[1:])  # the others from theirs
    _, fresh, _ = act(pp, obs, zeros, np.ones(3, bool), jax.random.PRNGKey(2))
    _, kept, _ = act(pp, obs, state, np.zeros(3, bool), jax.random.PRNGKey(2))
    for k in ("logp", "value"):
        np.testing.assert_allclose(extras[k][0], fresh[k][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(extras[k][1:], kept[k][1:], rtol=1e-5, atol=1e-6)
        assert np.abs(np.asarray(kept[k][0]) - np.asarray(fresh[k][0])).max() > 1e-4, k  # each carry matters


@pytest.mark.slow  # three update compilations (~30 s of CPU on the shared box)
def test_the_update_unrolls_the_critics_carry_apart_from_the_actors():
    """lr 0, one minibatch: the re-unrolled policy is the acting one (approx_kl ~0) and the re-unrolled values are
    the stored ones (the value loss is the stored values' error against their own GAE targets). Zeroing the critic's
    row-0 carry moves only the value loss; zeroing the actor's moves the policy."""
    from algos.returns import gae, valid_mask

    env = ParallelEnvVecEnv(TinyParallel, 4, 0)
    spec = env.spec
    env.close()
    cfg = dataclasses.replace(_cfg(**GRU_RC, value_norm=False), env=EnvConfig(factory="x:y", num_envs=4),
                              trainer=TrainerConfig(num_minibatches=1, update_epochs=1, lr=0.0))
    algo = algos.make(cfg, spec)
    state = _sharpen(algo.init(jax.random.PRNGKey(0)))
    _, traj = _segment(algo, algo.policy_params(state), steps=24)
    traj = jax.tree.map(lambda x: x[14:], traj)  # starts mid-episode: non-zero row-0 carries
    assert np.abs(np.asarray(traj.extras["critic_gru_h"][0])).max() > 0
    t1, n = traj.reward.shape[0], spec.num_agents
    values = jnp.asarray(traj.extras["value"], jnp.float32).reshape(t1, -1)
    per_agent = lambda x: jnp.repeat(jnp.asarray(x), n, axis=1)  # noqa: E731
    rew = (jnp.asarray(traj.obs[1:, :, :, spec.agent_row()["reward"]][..., 0]).reshape(t1 - 1, -1)
           if spec.agent_rewards else per_agent(traj.reward[1:]))
    adv = gae(values, rew, per_agent(traj.terminated[1:]), per_agent(traj.truncated[1:]), 0.99, 0.95)
    mask = per_agent(valid_mask(traj.terminated, traj.truncated))
    expected = 0.5 * float(jnp.sum(mask * jnp.square(adv)) / jnp.sum(mask))  # (value - (adv + value))^2
    update = jax.jit(algo.update)
    _, m = update(state, traj)
    assert float(m["approx_kl"]) < 1e-5 and abs(float(m["value_loss"]) - expected) < 1e-4 * max(expected, 1.0), (m, expected)

    def zeroed(key):
        return traj._replace(extras={**traj.extras, key: jnp.asarray(traj.extras[key]).at[0].set(0.0)})

    _, mc = update(state, zeroed("critic_gru_h"))
    _, ma = update(state, zeroed("gru_h"))
    assert float(mc["approx_kl"]) < 1e-5 and abs(float(mc["value_loss"]) - expected) > 1e-3 * expected, (mc, expected)
    assert float(ma["approx_kl"]) > 100 * max(float(m["approx_kl"]), 1e-7), (ma, m)
    assert abs(float(ma["value_loss"]) - expected) < 1e-4 * max(expected, 1.0)


def test_recurrent_options_are_refused_without_a_cell():
    assert problems(_cfg(**GRU_RC)) == []
    for kw in (dict(rnn_cell="gru"), dict(recurrent_critic=True), dict(post_rnn_sizes=(8,))):
        found = " | ".join(problems(_cfg(**kw)))
        assert f"algo.{next(iter(kw))}=" in found and "algo.lstm_size=0" in found, (kw, found)
    assert "algo.rnn_cell='rnn'" in " | ".join(problems(_cfg(lstm_size=H, rnn_cell="rnn")))
    assert "post_rnn_sizes" in " | ".join(problems(_cfg(lstm_size=H, post_rnn_sizes=(0,))))


def test_clip_per_network_counts_the_critics_cell_and_layers_as_the_critics():
    from algos.mappo import network_parts

    params = algos.make(_cfg(**GRU_RC), _spec()).init(jax.random.PRNGKey(0)).params
    labels = {k: set(jax.tree.leaves(v)) for k, v in network_parts(params)["params"].items()}
    assert labels == {"actor": {"actor"}, "gru": {"actor"}, "post_0": {"actor"}, "policy_head": {"actor"},
                      "critic": {"critic"}, "critic_gru": {"critic"}, "critic_post_0": {"critic"},
                      "value_head": {"critic"}}
