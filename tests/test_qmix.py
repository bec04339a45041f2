"""Value decomposition (VDN, QMIX) on JaxMARL's envs through the Anakin loop (``algos/qmix.py``,
``srljax/learning/anakin_qmix.py``)."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from algos.qmix import (
    QMixer,
    Sequences,
    agent_inputs,
    double_q_pick,
    epsilon_greedy,
    legal_actions,
    make_qmix,
    mixer_state,
    sequence_td,
    vdn_mix,
)
from algos.qmix_config import QMixConfig, VDNConfig
from envs import jax_envs
from srljax.config import (
    CheckpointConfig,
    ConfigError,
    EnvConfig,
    Experiment,
    LogConfig,
    TrainerConfig,
    apply_overrides,
)
from srljax.layout import plan_of
from srljax.prepare import check

pytest.importorskip("jaxmarl")

SPREAD = EnvConfig(id="jaxmarl/mpe:simple_spread", num_envs=8)
SMAX = EnvConfig(id="jaxmarl/smax:3m", num_envs=8)


def _cfg(tmp_path, algo=None, **kw) -> Experiment:
    base = Experiment(name="qmix", trial="t", total_env_steps=8 * 16 * 4, env=SPREAD,
                      algo=algo or QMixConfig(num_steps=16, hidden_size=16, batch_size=8, learning_starts=128,
                                              replay_capacity=1024, mixer_embed=8, hypernet_hidden=16),
                      trainer=TrainerConfig(lr=1e-3, update_epochs=2, num_minibatches=1, anneal_lr=False),
                      log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    return dataclasses.replace(base, **kw)


def test_the_qmix_mixer_is_monotonic_in_every_agent_q():
    mixer = QMixer(embed=8, hypernet_hidden=16)
    k_init, k_q, k_s = jax.random.split(jax.random.PRNGKey(0), 3)
    params = mixer.init(k_init, jnp.zeros((1, 3)), jnp.zeros((1, 5)))
    qs, states = jax.random.normal(k_q, (64, 3)) * 5, jax.random.normal(k_s, (64, 5)) * 3
    grads = jax.vmap(jax.grad(lambda q, s: mixer.apply(params, q, s)))(qs, states)
    assert grads.shape == (64, 3) and (grads >= 0).all() and (grads > 0).any()
    # the state matters (a hypernetwork, not a fixed mix): another state, another Q_tot for the same q
    assert not np.allclose(mixer.apply(params, qs, states), mixer.apply(params, qs, states[::-1]))


def test_vdn_is_the_sum_of_the_agents_q():
    q = jax.random.normal(jax.random.PRNGKey(1), (4, 5, 3))
    np.testing.assert_allclose(vdn_mix(q), q[..., 0] + q[..., 1] + q[..., 2], rtol=1e-6)


def test_vdn_td_errors_are_rlax_double_q_learning_summed_over_agents():
    rlax = pytest.importorskip("rlax")
    t, m, n, a = 5, 4, 3, 6
    k = jax.random.split(jax.random.PRNGKey(2), 6)
    q_online, q_target = jax.random.normal(k[0], (t + 1, m, n, a)), jax.random.normal(k[1], (t + 1, m, n, a))
    legal = jax.random.uniform(k[2], (t + 1, m, n, a)) < 0.6
    legal = legal.at[..., 0].set(True)  # every agent has a legal action
    action = jax.random.randint(k[3], (t, m, n), 0, a)
    reward = jax.random.normal(k[4], (t + 1, m))
    terminated = jax.random.uniform(k[5], (t + 1, m)) < 0.2
    batch = Sequences(obs=jnp.zeros((t + 1, m, n, 1)), action=action, reward=reward, terminated=terminated,
                      truncated=jnp.zeros((t + 1, m), bool), h0=jnp.zeros((m, n, 1)))
    gamma, scale = 0.9, 2.0
    td, valid = sequence_td(q_online, q_target, batch, legal, vdn_mix, vdn_mix, gamma, scale)
    # the oracle: each agent's rlax double-Q TD error with the team reward split evenly sums to VDN's
    selector = jnp.where(legal, q_online, -1e9)[1:]
    discount = jnp.broadcast_to((gamma * (1.0 - terminated[1:]))[..., None], (t, m, n))
    r = jnp.broadcast_to((scale * reward[1:] / n)[..., None], (t, m, n))
    flat = lambda x: x.reshape(t * m * n, *x.shape[3:])  # noqa: E731
    per_agent = jax.vmap(rlax.double_q_learning)(flat(q_online[:-1]), flat(action), flat(r), flat(discount),
                                                 flat(q_target[1:]), flat(selector))
    np.testing.assert_allclose(td, per_agent.reshape(t, m, n).sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(valid, ~terminated[:-1])  # a transition out of a done row is not learned


def test_double_q_never_bootstraps_from_an_illegal_action():
    q_online = jnp.array([[5.0, 1.0, 2.0]])  # the online argmax (action 0) is illegal
    q_target = jnp.array([[100.0, 10.0, 20.0]])
    legal = jnp.array([[False, True, True]])
    assert float(double_q_pick(q_online, q_target, legal)[0]) == 20.0  # action 2: the legal argmax


def test_masked_illegal_actions_are_never_chosen_greedy_or_exploring():
    b, n, a = 256, 3, 6
    k_q, k_l, k_act = jax.random.split(jax.random.PRNGKey(3), 3)
    q = jax.random.normal(k_q, (b, n, a)) * 10
    legal = (jax.random.uniform(k_l, (b, n, a)) < 0.4).at[..., 2].set(True)
    for eps in (0.0, 0.5, 1.0):
        action = epsilon_greedy(q, legal, jnp.full((b,), eps), k_act)
        assert jnp.take_along_axis(legal, action[..., None], axis=-1).all()
    greedy = epsilon_greedy(q, legal, jnp.zeros((b,)), k_act)
    np.testing.assert_array_equal(greedy, jnp.argmax(jnp.where(legal, q, -jnp.inf), axis=-1))
    explored = epsilon_greedy(q, legal, jnp.ones((b,)), k_act)
    assert (explored != greedy).mean() > 0.2  # random among the legal ones, not the argmax


def test_smax_rows_feed_the_agents_the_mixer_and_the_masks():
    env = jax_envs.make(SMAX)
    spec = env.spec
    cfg = _cfg(None, env=SMAX)
    algo = make_qmix(cfg, spec)
    state = algo.init(jax.random.PRNGKey(0))
    _, ts = env.reset(jax.random.PRNGKey(1))
    x, s, legal = agent_inputs(spec, ts.obs, True), mixer_state(spec, ts.obs), legal_actions(spec, ts.obs)
    assert x.shape == (8, 3, spec.agent_obs_size + 3) and s.shape == (8, spec.state_size)
    np.testing.assert_array_equal(x[0, :, -3:], np.eye(3))
    assert legal.shape == (8, 3, spec.num_actions) and not legal.all()  # SMAX flags out-of-range attacks
    actor = algo.initial_actor_state(8)
    for _ in range(3):
        action, _, actor = algo.act(algo.policy_params(state), ts.obs, actor, jnp.zeros(8, bool), jax.random.PRNGKey(2))
        assert jnp.take_along_axis(legal, action[..., None], axis=-1).all()
    assert float(jnp.abs(actor["h"]).sum()) > 0
    _, _, reset = algo.act(algo.policy_params(state), ts.obs, actor, jnp.ones(8, bool), jax.random.PRNGKey(2))
    _, _, fresh = algo.act(algo.policy_params(state), ts.obs, algo.initial_actor_state(8), None, jax.random.PRNGKey(2))
    np.testing.assert_allclose(reset["h"], fresh["h"], rtol=1e-6)  # ``first`` zeroes the GRU state


def test_the_plan_and_what_qmix_refuses(tmp_path):
    cfg = _cfg(tmp_path)
    plan = plan_of(cfg)
    assert plan.loop == "anakin" and plan.consumes == "sequences"
    check(cfg)
    vdn = apply_overrides(cfg, ["algo=vdn"])
    assert isinstance(vdn.algo, VDNConfig) and not isinstance(vdn.algo, QMixConfig)
    with pytest.raises(ConfigError, match="needs a multi-agent env"):
        check(_cfg(tmp_path, env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8)))
    with pytest.raises(ConfigError, match="built for the JAX multi-agent envs"):
        check(_cfg(tmp_path, env=EnvConfig(id="LevelBasedForaging-v0", num_envs=8)))
    with pytest.raises(ConfigError, match="must hold one iteration"):
        check(_cfg(tmp_path, algo=dataclasses.replace(cfg.algo, replay_capacity=64)))
    with pytest.raises(ConfigError, match="num_minibatches"):
        check(_cfg(tmp_path, trainer=dataclasses.replace(cfg.trainer, num_minibatches=2)))
    with pytest.raises(ConfigError, match="mixer_embed"):  # VDN has no mixer to size
        apply_overrides(cfg, ["algo=vdn", "algo.mixer_embed=4"])


def _lines(cfg: Experiment) -> list[dict]:
    return [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_launch_local_runs_qmix_and_resumes_the_replay_exactly(tmp_path):
    """Compiles the program three times: minutes on a loaded 2-core box."""
    from launch import local

    algo = dataclasses.replace(_cfg(tmp_path).algo, learning_starts=200)  # the second iteration's rows learn
    full = _cfg(tmp_path, trial="full", algo=algo)
    assert local.main(full) == 0
    half = _cfg(tmp_path, trial="half", algo=algo, total_env_steps=8 * 16 * 2, checkpoint=CheckpointConfig(every_updates=2))
    assert local.main(half) == 0
    assert local.main(dataclasses.replace(half, total_env_steps=8 * 16 * 4), resume=True) == 0
    a, b = _lines(full), _lines(half)
    assert [r["update"] for r in a] == [r["update"] for r in b] == [1, 2, 3, 4]
    assert a[0]["gradient_steps"] == 0 and a[-1]["gradient_steps"] == 2  # none before learning_starts
    assert all(np.isfinite(r["loss"]) for r in a) and a[-1]["loss"] > 0
    for x, y in zip(a, b):
        for key in ("loss", "q_mean", "td_abs_mean", "epsilon", "episode_return"):
            np.testing.assert_allclose(x.get(key, np.nan), y.get(key, np.nan), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qmix", "vdn"])
def test_value_decomposition_learns_smax_3m(tmp_path, name):
    """SMAX 3m against the heuristic enemy (team return: enemy health taken, up to 1, plus 1 for a win): random legal
    play returns ~0.15 and never wins (the first lines, epsilon ~1); ``configs/smax_3m_qmix.py``'s settings at 150k
    env steps reach a window return above 0.6 (the shipped run: ~1.0 and win rate 0.25-0.45 at 120-160k). A broken
    target, mask or unroll stays near random (MPE simple_spread was tried first: 100k steps are far too few for
    Q-learning there, JaxMARL trains it for 10M)."""
    from configs import smax_3m_qmix
    from srljax.loops.train import train

    shipped = smax_3m_qmix.experiment()
    algo = shipped.algo if name == "qmix" else VDNConfig(**{f.name: getattr(shipped.algo, f.name)
                                                            for f in dataclasses.fields(VDNConfig) if f.name != "name"})
    cfg = dataclasses.replace(shipped, name="smax", trial=name, total_env_steps=150_000, algo=algo,
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled", window=64))
    train(cfg)
    lines = _lines(cfg)
    first, last = lines[1]["episode_return"], max(r["episode_return"] for r in lines[-5:])
    print(name, "first", first, "last", last, "win rate", lines[-1].get("win_rate"))
    assert first < 0.3 and last > 0.6, (first, last)


# -- the worker graph: Ape-X's actors, replay buffer workers and trainer (issue 41, item 2) -------------------------


def _graph(cfg: Experiment, **layout) -> Experiment:
    layout = {"mode": "distributed", "num_actors": 2, "num_buffer_workers": 1, **layout}
    return dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, **layout))


def test_the_worker_graph_plan_is_ape_x_with_value_decomposition(tmp_path):
    from srljax.replay.apex import replay_ratio

    cfg = _graph(_cfg(tmp_path))
    plan = plan_of(cfg)
    assert plan.consumes == "replay" and plan.replay
    assert plan.workers["actor"].endswith("ApexActorWorker") and plan.workers["buffer"].endswith("ReplayBufferWorker")
    check(cfg)
    # the same keys, the same training: update_epochs batches of batch_size per num_envs x num_steps env steps
    assert replay_ratio(cfg) == 2 * 8 / (8 * 16)
    assert cfg.num_updates == int(replay_ratio(cfg) * (cfg.total_env_steps - 128) / 8)
    assert plan_of(_cfg(tmp_path)).consumes == "sequences"
    with pytest.raises(ConfigError, match="num_buffer_workers>=1"):
        check(_graph(cfg, num_buffer_workers=0))
    with pytest.raises(ConfigError, match="layout.inference=inline"):
        check(_graph(cfg, inference="remote"))
    with pytest.raises(ConfigError, match="apply to a worker graph"):  # graph-only keys in the Anakin loop
        check(_cfg(tmp_path, algo=dataclasses.replace(cfg.algo, throttle="none")))
    # the replay buffer workers' snapshots (Ape-X's --resume) are for the graph; the Anakin loop's replay is its carry
    check(dataclasses.replace(cfg, checkpoint=CheckpointConfig(replay=True)))
    with pytest.raises(ConfigError, match="keeps its replay in the Anakin loop's carry"):
        check(_cfg(tmp_path, checkpoint=CheckpointConfig(replay=True)))


@pytest.mark.slow  # ~20 s of CPU (the host env's and four programs' compiles): 130 s wall at load 10
def test_replay_rows_carry_the_gru_state_and_the_graph_update_is_the_anakin_update(tmp_path):
    """Rows acted by QMIX's epsilon-greedy GRU agents (the Ape-X actor's ``Acting`` and ``RowChunker``) go into the
    replay buffer worker's ``Replay``; a sampled sequence's stored GRU state re-unrolled over its rows (resets at
    episode starts) gives the state stored with every later row, and the trainer's update on the shard's
    ``SequenceBatch`` is the Anakin loop's update on the same sequences (same loss, same new params)."""
    from jax import lax

    from algos.qmix import AgentQ, sequences_of
    from algos.recurrent import episode_starts
    from envs.jax_envs.host import JaxVecEnv
    from srljax.learning.acting import Acting
    from srljax.replay.buffer import config_replay
    from srljax.system.acting.apex_actor import RowChunker

    env_cfg = EnvConfig(id="jaxmarl/mpe:simple_spread", num_envs=4, max_episode_steps=10)
    single = _cfg(tmp_path, env=env_cfg)
    graph = _graph(single)
    env = JaxVecEnv(env_cfg, seed=0)
    spec = env.spec
    algo, anakin = make_qmix(graph, spec), make_qmix(single, spec)
    assert algo.consumes == "replay" and anakin.consumes == "sequences"
    state = algo.init(jax.random.PRNGKey(0))
    pp = algo.policy_params(state)
    acting = Acting(algo, spec.num_envs, jax.random.PRNGKey(1))
    acting.actor_state["epsilon"][:] = 0.3
    chunker = RowChunker(spec, graph.algo.num_steps, algo, ("h",))
    replay = config_replay(graph, spec, 1024, spec.num_envs)
    ts = env.reset()
    ts = ts._replace(env_id=np.arange(spec.num_envs))
    for _ in range(3 * graph.algo.num_steps):
        action, extras = acting.act(pp, ts)
        chunker.add(ts, action, extras)
        while chunker.ready(spec.num_envs):
            rows = chunker.pop()
            for t in range(rows["reward"].shape[0]):
                replay.add(rows["obs"][t], rows["action"][t], rows["reward"][t], rows["terminated"][t],
                           rows["truncated"][t], rows["env_id"], priority=rows["priority"][t],
                           extras={"h": rows["h"][t]})
        ts = env.step(action)
        ts = ts._replace(env_id=np.arange(spec.num_envs))
    batch, keys = replay.sample(8, 1.0, np.random.default_rng(0))
    assert batch.obs.shape == (8, 17, *spec.obs_shape) and batch.state["h"].shape == (8, 3, 16)
    batch = jax.tree.map(jnp.asarray, batch)
    net = AgentQ(spec.num_actions, 16)

    @jax.jit
    def unrolled(agent, seq):  # the GRU run from row 0's stored state, zeroed where an episode starts: [T+1, M, N, H]
        first = episode_starts(seq.terminated, seq.truncated)

        def step(h, inp):
            x_t, first_t = inp
            h = jnp.where(first_t[:, None, None], 0.0, h)
            return net.apply(agent, h, x_t)[0], h

        return lax.scan(step, seq.h0, (agent_inputs(spec, seq.obs, True), first))[1], first

    seq = jax.jit(sequences_of)(batch)
    starts, first = unrolled(pp["agent"], seq)
    assert first.any()  # episodes of 10 steps end inside sequences of 16
    # the stored state of every row of the sequence (read back slot by slot) is that unroll's
    base, pos = (keys.slot // replay.length) * replay.length, keys.slot % replay.length
    for t in range(seq.obs.shape[0]):
        np.testing.assert_allclose(replay.extras["h"][base + (pos + t) % replay.length], starts[t], rtol=1e-4, atol=1e-5)
    # the trainer's update on the batch == the Anakin loop's on the same sequences (weights 1: uniform replay)
    s1, m1, per = jax.jit(algo.update)(state, batch)
    s2, m2 = jax.jit(anakin.update)(state, seq)
    np.testing.assert_allclose(m1["loss"], m2["loss"], rtol=1e-5)
    assert float(m1["loss"]) > 0 and per["priority"].shape == (8,) and (np.asarray(per["priority"]) >= 0).all()
    for a, b in zip(jax.tree.leaves(s1.params), jax.tree.leaves(s2.params)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # each actor compiles SMAX's step (minutes on a crowded 2-core box), then ~3-5 min of training
def test_qmix_learns_smax_3m_as_a_worker_graph(tmp_path):
    """``configs/smax_3m_qmix.py`` as Ape-X's graph (threads: 2 actors x 16 envs, a replay buffer worker, the trainer;
    ``trainer.update_epochs=2`` keeps the shipped config's 0.125 sequences per env step with 32 envs in all) to 150k
    env steps: the first line (at ``learning_starts``, an untrained greedy policy) returns well under random play's
    ~0.15-0.3, the last line's window above 0.6 with SMAX's outcomes reported (bench/RESULTS.md, session 25 issue 41:
    0.04 at 10k, 1.0 and win rate 0.25 at 137k)."""
    from pathlib import Path

    from launch.threads import run_threads
    from srljax.config import load_file
    from srljax.replay.apex import replay_ratio

    base = load_file(Path(__file__).resolve().parents[1] / "configs" / "smax_3m_qmix.py")
    cfg = apply_overrides(base, [
        "env.num_envs=16", "trainer.update_epochs=2", "total_env_steps=150000", "layout.mode=distributed",
        "layout.num_actors=2", "layout.num_buffer_workers=1", "layout.stall_seconds=1200", "trial=graph",
        f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines", "log.window=64"])
    assert replay_ratio(cfg) == replay_ratio(base) == 0.125
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    lines = result.metrics
    assert lines[-1]["update"] == cfg.num_updates and all(np.isfinite(x["loss"]) for x in lines)
    assert 0.1 < lines[-1]["samples_per_insert"] < 0.15  # Ape-X's throttle holds 0.125 within 10% (and its slack)
    assert "win_rate" in lines[-1] and lines[-1]["epsilon/actor_0"] == pytest.approx(0.05)
    first, last = lines[0]["episode_return"], lines[-1]["episode_return"]
    assert first < 0.3 and last > 0.6, [(x["env_steps"], round(x["episode_return"], 2)) for x in lines[::25]]
