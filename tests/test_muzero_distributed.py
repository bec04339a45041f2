"""MuZero in the worker graph: the buffer's replay of searched segments and its reanalyse (targets refreshed with new
params; a ratio of 0 leaves them as the actors' searches made them), the plan and what it refuses, and (slow) a short
distributed run on envpool CartPole in the processes and threads backends that learns."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from srljax.config import ConfigError, EnvConfig, Experiment, LayoutConfig, LogConfig, TrainerConfig
from srljax.layout import BUFFER, PARAMS, TRAINER, Stream, plan_of
from srljax.prepare import check

pytest.importorskip("mctx")

from algos import make as make_algo  # noqa: E402
from algos.muzero import unroll_targets  # noqa: E402
from algos.muzero_config import MuZeroConfig  # noqa: E402
from srljax.replay.search import SearchReplay, window_rows  # noqa: E402
from srljax.types import EnvSpec, Trajectory  # noqa: E402

T, B, A = 12, 4, 2
SPEC = EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=A,
               num_envs=B, batch_size=B)


def _cfg(tmp_path, ratio=0.0, **kw) -> Experiment:
    base = Experiment(name="mzd", trial="t", total_env_steps=4096, env=EnvConfig(id="CartPole-v1", num_envs=B),
                      algo=MuZeroConfig(num_steps=T, num_simulations=4, unroll_steps=2, td_steps=3, batch_size=16,
                                        replay_capacity=1000, hidden_sizes=(16,), state_size=8, reanalyse_ratio=ratio),
                      trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=1, update_epochs=1),
                      layout=LayoutConfig(mode="distributed", num_actors=1, num_buffer_workers=1),
                      log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=1))
    return dataclasses.replace(base, **kw)


def _segment(seed=0) -> Trajectory:
    rng = np.random.default_rng(seed)
    terminated = np.zeros((T + 1, B), bool)
    terminated[5, 1] = True  # env 1's game ends on row 5; row 6 is its next game's first
    policy = rng.random((T + 1, B, A)).astype(np.float32)
    return Trajectory(obs=rng.normal(size=(T + 1, B, 4)).astype(np.float32),
                      action=rng.integers(0, A, (T + 1, B)).astype(np.int32),
                      reward=np.where(np.arange(T + 1)[:, None] == 6, 0.0, 1.0).astype(np.float32) * np.ones((1, B), np.float32),
                      terminated=terminated, truncated=np.zeros((T + 1, B), bool),
                      extras={"search_value": rng.normal(size=(T + 1, B)).astype(np.float32),
                              "search_policy": policy / policy.sum(-1, keepdims=True)},
                      policy_version=np.full(B, 3, np.int32))


def _replay(cfg, algo, segment) -> SearchReplay:
    replay = SearchReplay(algo, SPEC, cfg.algo, columns=8, seed=0, key=jax.random.PRNGKey(9))
    assert replay.insert(segment) == T * B
    return replay


def test_segment_columns_become_window_rows():
    seg = _segment()
    rows = window_rows(seg)
    assert rows["obs"].shape == (B, T + 1, 4) and rows["policy"].shape == (B, T + 1, A)
    np.testing.assert_array_equal(rows["reward"][:, :T], seg.reward[1:].T)  # row j: the reward of stepping from j
    np.testing.assert_array_equal(rows["terminated"][1, 4], True)  # stepping from row 4 ends env 1's game
    assert not rows["searched"][1, 5] and rows["searched"][1, 6] and rows["searched"][0].all()  # row 5: its last row
    np.testing.assert_array_equal(rows["value"], seg.extras["search_value"].T)


def _stream(rows: int, seed=0) -> Trajectory:
    """One continuous stream of ``rows`` rows of ``B`` envs (a game of env 1 ends on row 7)."""
    rng = np.random.default_rng(seed)
    terminated = np.zeros((rows, B), bool)
    terminated[7, 1] = True
    policy = rng.random((rows, B, A)).astype(np.float32)
    return Trajectory(obs=rng.normal(size=(rows, B, 4)).astype(np.float32),
                      action=rng.integers(0, A, (rows, B)).astype(np.int32),
                      reward=rng.random((rows, B)).astype(np.float32), terminated=terminated,
                      truncated=np.zeros((rows, B), bool),
                      extras={"search_value": rng.normal(size=(rows, B)).astype(np.float32),
                              "search_policy": policy / policy.sum(-1, keepdims=True)},
                      policy_version=np.full(B, 3, np.int32))


def test_windows_run_on_across_an_actors_segment_ends_as_in_the_anakin_ring(tmp_path):
    """An env's next segment starts with the last row of its previous one: the replay links the two columns, and
    windows starting in a segment's last K + n rows read on into the next (the single-process path's ring does; the
    worker graph once cut every window inside a segment, so those rows never started one); a segment of another
    actor, or one whose first row is not a held column's last, links to nothing; an overwritten column unlinks."""
    cfg = _cfg(tmp_path, 0.0)
    algo = make_algo(cfg, SPEC)
    w = cfg.algo.unroll_steps + cfg.algo.td_steps + 1
    whole = window_rows(_stream(2 * T + 1))  # [B, 2T+1]: what both segments hold, continuously
    stream = _stream(2 * T + 1)
    first, second = (jax.tree.map(lambda x, i=i: x[i * T: i * T + T + 1], stream._replace(policy_version=None))
                     ._replace(policy_version=stream.policy_version) for i in range(2))
    replay = SearchReplay(algo, SPEC, cfg.algo, columns=3 * B, seed=0)
    replay.insert(first, source=0)
    replay.insert(second, source=1)  # another actor: no link
    assert (replay.succ == -1).all()
    replay.insert(second, source=0)  # the same actor's next segment
    np.testing.assert_array_equal(replay.succ[:B], np.arange(2 * B, 3 * B))
    replay.algo = dataclasses.replace(algo, windows=4000)
    window, _ = replay.sample()
    # every sampled window is W consecutive rows of one env's stream, wherever it starts
    starts = set()
    for i in range(window.obs.shape[0]):
        env = int(np.flatnonzero((whole["obs"][:, :, 0] == window.obs[i, 0, 0]).any(axis=1))[0])
        at = int(np.flatnonzero(whole["obs"][env, :, 0] == window.obs[i, 0, 0])[0])
        starts.add(at)
        for name in ("obs", "action", "reward", "terminated", "searched", "value", "policy"):
            np.testing.assert_array_equal(window._asdict()[name][i], whole[name][env, at: at + w], err_msg=name)
    assert max(starts) == 2 * T + 1 - w and T - 1 in starts  # starts in the first segment's last rows, across its end
    # the first segment's columns overwritten: the second's lose their predecessor, and nothing links to them
    replay.insert(first, source=5)
    assert (replay.pred[2 * B:] == -1).all() and (replay.succ == -1).all()


def test_reanalyse_refreshes_the_targets_with_new_params_and_ratio_zero_keeps_them(tmp_path):
    seg = _segment()
    cfg0, cfg_half = _cfg(tmp_path, 0.0), _cfg(tmp_path, 0.5)
    algo = make_algo(cfg0, SPEC)
    old = algo.init(jax.random.PRNGKey(1)).params
    new = algo.init(jax.random.PRNGKey(2)).params
    n = algo.windows

    # ratio 0: exactly the targets of the stored (acting) searches, whatever params are given
    replay = _replay(cfg0, algo, seg)
    window, _ = replay.sample()
    want = unroll_targets(window._replace(obs=window.obs[:, :1]), 2, 3, cfg0.algo.gamma)  # the first row's obs
    replay.rng = np.random.default_rng(0)  # the same windows again
    tree, meta = replay.batch(new, version=7)
    assert meta["reanalysed"] == 0 and meta["target_version"] == 3.0
    for name in ("value", "policy", "reward", "obs", "value_mask"):
        np.testing.assert_allclose(tree[name], np.asarray(getattr(want, name)), rtol=1e-6)

    # ratio 0.5: the first half's targets come from a new search; they differ with the params searched with
    got = {}
    replay = _replay(cfg_half, make_algo(cfg_half, SPEC), seg)
    for name, params in (("old", old), ("new", new)):
        replay.rng = np.random.default_rng(0)
        tree, meta = replay.batch(params, version=7)
        assert meta["reanalysed"] == n // 2 and meta["target_version"] == (7 * (n // 2) + 3 * (n - n // 2)) / n
        got[name] = tree
    half = n // 2
    for tree in got.values():  # the second half untouched
        np.testing.assert_allclose(tree["policy"][half:], np.asarray(want.policy)[half:], rtol=1e-6)
        np.testing.assert_allclose(tree["value"][half:], np.asarray(want.value)[half:], rtol=1e-6)
        mask = tree["policy_mask"][:half] > 0
        assert mask.any()
        assert np.abs(tree["policy"][:half] - np.asarray(want.policy)[:half])[mask].max() > 1e-3
        assert np.abs(tree["value"][:half] - np.asarray(want.value)[:half]).max() > 1e-3
    assert np.abs(got["old"]["policy"][:half] - got["new"]["policy"][:half]).max() > 1e-3
    assert np.abs(got["old"]["value"][:half] - got["new"]["value"][:half]).max() > 1e-3
    # no params yet: nothing reanalysed
    assert replay.batch(None, version=-1)[1]["reanalysed"] == 0


@pytest.mark.parametrize("consistency", [0.0, 1.0])
def test_a_buffers_batch_crosses_the_wire_into_the_trainers_source_and_trains(tmp_path, consistency):
    """What the buffer sends is what the trainer's ``SearchSource`` accepts (a batch of the first rows' obs, and the
    next K rows' only where the consistency loss reads them), and the update trains on it (the merge of the
    consistency loss once made the buffer send the first obs feature of each window and the trainer drop them all)."""
    from types import SimpleNamespace

    from srljax.comm.codec import decode, encode
    from srljax.system.training.search_source import SearchSource

    cfg = _cfg(tmp_path, 0.5)
    cfg = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, consistency_coef=consistency, projection_size=8))
    algo = make_algo(cfg, SPEC)
    state = algo.init(jax.random.PRNGKey(1))
    replay = _replay(cfg, algo, _segment())
    window, _ = replay.sample()
    replay.rng = np.random.default_rng(0)  # the same windows again
    tree, meta = replay.batch(state.params, version=5)
    msg = decode(encode("sample", "mzd/t", tree, meta=meta), expect_trial="mzd/t")
    source = SearchSource(SimpleNamespace(learner=SimpleNamespace(algo=algo), spec=SPEC, cfg=cfg))
    batch = source._checked(msg.tree)  # ValueError if the trainer would drop it
    np.testing.assert_array_equal(batch.obs, window.obs[:, 0])
    k = cfg.algo.unroll_steps if consistency else 0
    np.testing.assert_array_equal(batch.next_obs, window.obs[:, 1: 1 + k])
    new, metrics = algo.update(state, batch)
    assert int(new.step) == 1 and np.isfinite(float(metrics["value_loss"]))
    assert ("consistency_loss" in metrics) == bool(consistency)


def test_a_target_network_reanalyses_until_the_newest_params_are_n_versions_past_it():
    from srljax.system.staging.search_buffer import reanalyse_params

    assert reanalyse_params(None, None, -1, 4) is None  # nothing held yet
    assert reanalyse_params(None, "p3", 3, 4) == ("p3", 3)
    held = ("p3", 3)
    assert reanalyse_params(held, "p6", 6, 4) == held  # 3 versions past: kept
    assert reanalyse_params(held, "p7", 7, 4) == ("p7", 7)  # 4 past: renewed
    assert reanalyse_params(held, "p1", 1, 4) == ("p1", 1)  # a trainer restarted from an older checkpoint
    assert reanalyse_params(held, "p4", 4, 0) == ("p4", 4)  # 0: always the newest
    assert reanalyse_params(held, None, -1, 0) == held


def test_the_worker_graph_plan_and_what_it_refuses(tmp_path):
    cfg = _cfg(tmp_path, 0.5)
    check(cfg)
    plan = plan_of(cfg)
    assert plan.mode == "distributed" and plan.consumes == "search"
    assert plan.workers[BUFFER] == "srljax.system.staging.search_buffer:SearchBufferWorker"
    assert Stream(PARAMS, TRAINER, BUFFER) in plan.layout.streams
    with pytest.raises(ConfigError, match="layout.num_buffer_workers>=1"):
        check(dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, num_buffer_workers=0)))
    with pytest.raises(ConfigError, match="must hold a window"):
        check(dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, num_steps=4)))
    with pytest.raises(ConfigError, match="reanalyse_ratio=0.5 with layout.mode=single"):
        check(dataclasses.replace(cfg, layout=LayoutConfig(), env=EnvConfig(id="gymnax/CartPole-v1", num_envs=B)))
    with pytest.raises(ConfigError, match="reanalyse_target_every=2 with layout.mode=single"):
        check(dataclasses.replace(cfg, layout=LayoutConfig(), env=EnvConfig(id="gymnax/CartPole-v1", num_envs=B),
                                  algo=dataclasses.replace(cfg.algo, reanalyse_ratio=0.0, reanalyse_target_every=2)))
    with pytest.raises(ConfigError, match=r"must be in \[0, 1\]"):
        check(_cfg(tmp_path, 1.5))


def test_status_shows_a_buffers_reanalyse_figures():
    from launch.status import summarise

    gauges = {"srljax_reanalyse_seconds_per_sample": 0.004, "srljax_reanalyse_share": 0.5,
              "srljax_reanalyse_target_lag": 3.0}
    roles = summarise([("buffer", {}, gauges, 1.0)])
    assert roles["buffer"].figures == {"reanalyse s/sample": 0.004, "reanalysed share": 0.5, "target lag": 3.0}
    assert summarise([("buffer", {}, {}, 1.0)])["buffer"].figures == {}  # another algorithm's buffer: none


def _learns(tmp_path, backend: str) -> None:
    """A short run of configs/cartpole_muzero_distributed.py: its model learns CartPole's rewards and values (the
    losses a broken learner keeps) and its episodes get longer than one move's ~9, with half of each batch reanalysed
    by the buffer, whose figures it writes."""
    from srljax.config import apply_overrides, load_file

    cfg = apply_overrides(load_file("configs/cartpole_muzero_distributed.py"), [
        f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines", "log.log_every=1", f"trial={backend}",
        "total_env_steps=16384", "seed=1"])
    if backend == "threads":
        from launch.threads import run_threads

        result = run_threads(cfg)
        assert result.exit_code == 0, result.message
    else:
        from launch import local

        assert local.main(cfg) == 0
    lines = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["update"] == cfg.num_updates == 64 and lines[-1]["env_steps"] >= 16384 - 2 * 256
    assert lines[-1]["reanalyse/share"] == pytest.approx(0.5) and lines[-1]["reanalyse/seconds_per_sample"] > 0
    first, last = lines[0], lines[-2:]
    assert max(r["reward_loss"] for r in last) < 0.5 * first["reward_loss"], [r["reward_loss"] for r in lines]
    assert max(r["value_loss"] for r in last) < 0.75 * first["value_loss"], [r["value_loss"] for r in lines]
    assert max(r.get("episode_return", 0) for r in lines) >= 15, [r.get("episode_return") for r in lines]
    status = json.loads((cfg.run_dir / "workers" / "buffer-0.jsonl").read_text().splitlines()[-1])
    assert status["reanalyse/seconds_per_sample"] > 0 and status["reanalyse/share"] == pytest.approx(0.5)
    assert status["reanalyse_params_version"] >= cfg.num_updates - 2 and "reanalyse/target_lag" in status


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["processes", "threads"])
def test_a_short_distributed_run_learns_cartpole(tmp_path, backend):
    _learns(tmp_path, backend)


class _LazyResetEnv:
    """A host env of ``B`` columns with envpool's lazy autoreset (``srljax.types.TimeStep``): env i's games last
    ``3 + 2 i`` moves (terminated), the next step after a game's last row returns the reset observation with
    reward 0 (the move sent for it ignored); observations and rewards depend on the moves played."""

    def __init__(self) -> None:
        self.t = np.zeros(B, np.int64)
        self.obs = np.random.default_rng(3).normal(size=(B, 4)).astype(np.float32)
        self.done = np.zeros(B, bool)

    def recv(self, action=None):
        from srljax.types import TimeStep

        reward, term = np.zeros(B, np.float32), np.zeros(B, bool)
        if action is not None:
            for i in range(B):
                if self.done[i]:
                    self.t[i], self.done[i] = 0, False
                    self.obs[i] = np.random.default_rng(100 + i).normal(size=4)
                    continue
                self.t[i] += 1
                self.obs[i] = np.tanh(self.obs[i][::-1] * 1.3 + (0.5 if action[i] else -0.5))
                reward[i] = 0.25 + 0.5 * action[i] + 0.1 * self.obs[i, 0]
                term[i] = self.done[i] = self.t[i] == 3 + 2 * i
        return TimeStep(obs=self.obs.copy(), reward=reward, terminated=term, truncated=np.zeros(B, bool),
                        env_id=np.arange(B, dtype=np.int32), episode_return=np.full(B, np.nan, np.float32),
                        episode_length=np.zeros(B, np.int32))


def test_reanalysing_with_the_acting_params_and_no_noise_reproduces_the_actors_searches(tmp_path):
    """The buffer's reanalyse against the actor's own search: an actor's path (``Acting`` with its reply packing,
    ``SegmentBuilder``, a lazily resetting env) acts 3 segments per env with fixed params and the search's Gumbel
    noise off; the replay links them, and reanalysing sampled windows (inside segments and across their ends) with
    the same params and no noise gives every row the value and move distribution the actor's search stored at that
    row (row alignment: row j's obs with row j's targets). The value targets made from them are the n-step returns
    of the stream, cut at each game's end (0 after a termination), bootstrapped from the search value n rows on."""
    import functools

    from srljax.learning.acting import Acting
    from srljax.learning.rollout import SegmentBuilder
    from srljax.system.acting.packing import ReplyPacking

    cfg = _cfg(tmp_path, 1.0)
    noisy = make_algo(cfg, SPEC)
    algo = dataclasses.replace(noisy, search=functools.partial(noisy.search, explore=False))
    algo = dataclasses.replace(algo, act=_act_with(algo))
    params = noisy.init(jax.random.PRNGKey(4)).params
    acting = Acting(algo, B, jax.random.PRNGKey(5), packing=ReplyPacking(SPEC, algo.extras_spec))
    builder = SegmentBuilder(SPEC, T, algo.extras_spec)
    env, action, segments, stream = _LazyResetEnv(), None, [], []
    while len(segments) < 3:
        ts = env.recv(action)
        action, extras = acting.act(params, ts)
        stream.append((ts, action, extras))
        if builder.add(ts, action, extras, version=7):
            segments.append(builder.pop(B))
    replay = SearchReplay(algo, SPEC, cfg.algo, columns=3 * B, seed=0, key=jax.random.PRNGKey(11))
    for seg in segments:
        replay.insert(seg, source=0)
    assert (replay.succ[: 2 * B] >= 0).all()  # the segments link
    replay.algo = dataclasses.replace(algo, windows=256)
    window, _ = replay.sample()
    fresh = jax.device_get(replay.search(params, jax.random.PRNGKey(12), window.obs, window))
    # the values agree to float32's rounding in h^-1 (sqrt(1 + 4 eps x) - 1 cancels: steps of ~5e-5)
    np.testing.assert_allclose(fresh.value, window.value, rtol=0, atol=3e-4)
    np.testing.assert_allclose(fresh.policy, window.policy, rtol=0, atol=1e-4)

    # row alignment against the stream the actor saw: window row j's obs, move and stored search are one row's
    K, n, gamma = cfg.algo.unroll_steps, cfg.algo.td_steps, cfg.algo.gamma
    obs = np.stack([s[0].obs for s in stream], 1)  # [B, R, 4]
    acts = np.stack([s[1] for s in stream], 1)
    reward = np.stack([s[0].reward for s in stream], 1)
    term = np.stack([s[0].terminated for s in stream], 1)
    value = np.stack([s[2]["search_value"] for s in stream], 1)
    policy = np.stack([s[2]["search_policy"] for s in stream], 1)
    targets = unroll_targets(window._replace(obs=window.obs[:, :1]), K, n, gamma)
    crossed = 0
    for i in range(window.obs.shape[0]):
        env_i, at = (int(x[0]) for x in np.nonzero((obs == window.obs[i, 0]).all(-1)))
        assert (obs[env_i, at: at + K + n + 1] == window.obs[i]).all()
        np.testing.assert_array_equal(acts[env_i, at: at + K + n + 1], window.action[i])
        np.testing.assert_array_equal(value[env_i, at: at + K + n + 1], window.value[i])
        np.testing.assert_array_equal(policy[env_i, at: at + K + n + 1], window.policy[i])
        crossed += at % T + K + n + 1 > T + 1
        for k in range(K + 1):  # the n-step return from row at + k, by hand from the stream
            z, row, mask = 0.0, at + k, float(not term[env_i, at: at + k].any())
            for step in range(n):
                if term[env_i, row]:  # the game ended on this row: nothing after it
                    break
                z += gamma**step * reward[env_i, row + 1]
                row += 1
            else:
                z += gamma**n * (0.0 if term[env_i, row] else value[env_i, row])
            if term[env_i, at]:
                mask = 0.0  # a window starting on a game's last row counts nothing
            assert float(targets.value_mask[i, k]) == mask
            if mask:
                np.testing.assert_allclose(float(targets.value[i, k]), z, rtol=1e-5, atol=1e-6)
    assert crossed > 0  # windows read on across a segment's end


def _act_with(algo):
    """``algos.muzero``'s act (the search's move, value and distribution as extras) over ``algo.search``."""
    from algos.muzero import SEARCH_POLICY, SEARCH_VALUE

    def act(params, obs, actor_state, first, rng):
        action, policy, value = algo.search(params, rng, obs, None, None, algo.num_simulations)
        return action.astype(np.int32), {SEARCH_VALUE: value, SEARCH_POLICY: policy}, actor_state

    return act


@pytest.mark.parametrize("what", ["value", "policy"])
def test_reanalysing_one_kind_of_target_keeps_the_actors_other(tmp_path, what):
    """``algo.reanalyse_targets``: ``value`` refreshes only the values of the rows the n-step targets bootstrap from
    (rows n..n+K; the actors' policy targets kept), ``policy`` only the move distributions of rows 0..K; ``both``
    (the default) both, from one search of those rows."""
    import functools

    seg = _segment()
    cfg = _cfg(tmp_path, 1.0)
    K, n = cfg.algo.unroll_steps, cfg.algo.td_steps
    new = make_algo(cfg, SPEC).init(jax.random.PRNGKey(2)).params
    got = {}
    for mode in ("both", what):
        c = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, reanalyse_targets=mode))
        algo = make_algo(c, SPEC)  # the search without noise: the same rows' outputs whatever else it searches
        replay = _replay(c, dataclasses.replace(algo, search=functools.partial(algo.search, explore=False)), seg)
        replay.rng = np.random.default_rng(0)
        window, _ = replay.sample()
        replay.rng = np.random.default_rng(0)
        got[mode] = replay.batch(new, version=7)[0]
    want = unroll_targets(window._replace(obs=window.obs[:, :1]), K, n, cfg.algo.gamma)
    kept, fresh = ("policy", "value") if what == "value" else ("value", "policy")
    np.testing.assert_allclose(got[what][kept], np.asarray(getattr(want, kept)), rtol=1e-6)  # the actors'
    np.testing.assert_allclose(got[what][fresh], got["both"][fresh], rtol=1e-5, atol=1e-6)  # the new search's
    assert np.abs(got[what][fresh] - np.asarray(getattr(want, fresh))).max() > 1e-3
    with pytest.raises(ConfigError, match="reanalyse_targets"):
        check(dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, reanalyse_targets=what),
                                  layout=LayoutConfig(mode="single")))
