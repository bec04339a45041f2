"""Prioritized replay: the sum-tree against a brute-force cumsum oracle, the sampling distribution
(chi-square), importance weights by hand, ring overwrite, n-step windows that stay inside one
episode of one env, frame deduplication against envpool's own stacks, and every bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats

from srljax.config import DQNConfig, EnvConfig, Experiment, ReplayConfig, TrainerConfig
from srljax.prepare import problems  # the config tree, and the replay against memory
from srljax.replay import buffer as replay_mod
from srljax.replay.buffer import Replay, ReplayMemoryError, memory_problem, replay_bytes
from srljax.replay.sum_tree import SumTree


def oracle_find(weights: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The slot i with cumsum[i-1] <= u < cumsum[i] (zero-weight slots have empty intervals)."""
    return np.searchsorted(np.cumsum(weights), u, side="right")


@pytest.mark.parametrize("capacity, branching", [(1, 16), (7, 2), (1000, 16), (4096, 16), (5000, 3)])
def test_sum_tree_matches_cumsum_oracle_through_batch_updates(capacity, branching):
    rng = np.random.default_rng(capacity)
    tree, weights = SumTree(capacity, branching), np.zeros(capacity)
    for _ in range(20):
        slots = rng.choice(capacity, size=min(capacity, 64), replace=False)
        values = rng.random(slots.size) * (rng.random(slots.size) > 0.3)  # some zeros
        tree.set(slots, values)
        weights[slots] = values
        np.testing.assert_allclose(tree.total, weights.sum(), rtol=1e-12)
        np.testing.assert_array_equal(tree.get(np.arange(capacity)), weights)
        if weights.sum() > 0:
            u = rng.random(2000) * weights.sum()
            np.testing.assert_array_equal(tree.find(u), oracle_find(weights, u))
    # every internal node is exactly its children's sum
    for below, level in zip(tree.levels[:-1], tree.levels[1:]):
        np.testing.assert_array_equal(level[: below.size // tree.branching], below.reshape(-1, tree.branching).sum(1))


@pytest.mark.parametrize("branching", [2, 16])
def test_sum_tree_never_returns_zero_weight_slots_even_at_interval_edges(branching):
    tree = SumTree(8, branching)
    tree.set(np.arange(8), np.array([0, 1, 0, 0, 2, 0, 0, 0], float))
    edges = np.array([0.0, 1.0, np.nextafter(3.0, 0), 3.0 - 1e-15])
    assert set(tree.find(edges).tolist()) <= {1, 4}
    assert tree.find(np.array([0.0, 1.0]))[0] == 1 and tree.find(np.array([1.0]))[0] == 4


def test_sum_tree_repeated_slot_takes_last_weight_and_stays_consistent():
    tree = SumTree(5)
    tree.set(np.array([2, 2, 4]), np.array([1.0, 3.0, 0.5]))
    assert tree.get(np.array([2]))[0] == 3.0 and tree.total == 3.5


def fill(replay: Replay, rows: int, streams: int, obs_dim: int = 3, done_every: int = 0, seed: int = 0):
    """Rows encode (stream, row index) in obs[0], obs[1] and reward = 1000 * stream + t."""
    rng = np.random.default_rng(seed)
    for t in range(rows):
        ids = np.arange(streams)
        obs = np.zeros((streams, obs_dim), np.float32)
        obs[:, 0], obs[:, 1] = ids, t
        term = (rng.random(streams) < 0.15) if done_every == 0 else np.full(streams, t % done_every == done_every - 1)
        trunc = (rng.random(streams) < 0.1) & ~term if done_every == 0 else np.zeros(streams, bool)
        replay.add(obs, (ids + t) % 2, (1000 * ids + t).astype(np.float32), term, trunc, ids)


def test_sampling_distribution_matches_priorities_chi_square():
    replay = Replay(64, 1, (3,), "float32", n_step=1, alpha=0.7, priority_eps=1e-6, check_memory=False)
    fill(replay, 40, 1, done_every=1000)  # no dones: rows 0..38 sampleable (row 39's window is unwritten)
    assert replay.size == 39
    rng = np.random.default_rng(0)
    priorities = rng.random(39) * 3
    replay.update_priorities(replay_mod.SampleKeys(np.arange(39), replay.written[:39]), priorities)
    expected = (priorities + 1e-6) ** 0.7 / np.sum((priorities + 1e-6) ** 0.7)
    np.testing.assert_allclose(replay.tree.get(np.arange(39)) / replay.tree.total, expected, rtol=1e-9)
    counts = np.zeros(39)
    for _ in range(400):
        _, k = replay.sample(64, beta=0.5, rng=rng)
        counts += np.bincount(k.slot, minlength=39)[:39]
    chi2 = np.sum((counts - counts.sum() * expected) ** 2 / (counts.sum() * expected))
    assert stats.chi2.sf(chi2, df=38) > 1e-3, chi2
    # and a distribution it must not pass: uniform
    uniform = np.full(39, 1 / 39)
    chi2_uniform = np.sum((counts - counts.sum() * uniform) ** 2 / (counts.sum() * uniform))
    assert stats.chi2.sf(chi2_uniform, df=38) < 1e-6


def test_importance_weights_hand_computed():
    # three sampleable rows with priorities 1, 2, 5 (alpha = 1): P = 1/8, 2/8, 5/8, N = 3, beta = 0.5
    # w = (3 P)^-0.5 = (3/8)^-.5, (6/8)^-.5, (15/8)^-.5 = 1.63299, 1.15470, 0.73030; / max -> 1, 0.70711, 0.44721
    replay = Replay(16, 1, (3,), "float32", n_step=1, alpha=1.0, priority_eps=1e-12, check_memory=False)
    fill(replay, 4, 1, done_every=1000)
    assert replay.size == 3
    keys = replay_mod.SampleKeys(np.arange(3), replay.written[:3])
    assert replay.update_priorities(keys, np.array([1.0, 2.0, 5.0])) == 3
    batch, k = replay.sample(300, beta=0.5, rng=np.random.default_rng(1))
    expected = {0: 1.0, 1: 0.70710678, 2: 0.44721360}
    for slot, w in zip(k.slot, batch.weight):
        assert w == pytest.approx(expected[int(slot)], rel=1e-5)
    # alpha = 0 is uniform: every weight 1 whatever the priorities
    uniform = Replay(16, 1, (3,), "float32", alpha=0.0, check_memory=False)
    fill(uniform, 6, 1, done_every=1000)
    uniform.update_priorities(replay_mod.SampleKeys(np.arange(3), uniform.written[:3]), np.array([1.0, 9.0, 0.1]))
    batch, _ = uniform.sample(50, beta=1.0, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(batch.weight, 1.0)


def test_ring_overwrites_oldest_rows_and_drops_stale_priority_updates():
    replay = Replay(20, 2, (3,), "float32", n_step=2, alpha=0.6, check_memory=False)  # 10 rows per stream
    fill(replay, 8, 2, done_every=1000)
    _, old_keys = replay.sample(16, beta=0.4, rng=np.random.default_rng(0))
    fill(replay, 30, 2, done_every=1000, seed=1)  # rows 0..29 again: overwrite every slot
    assert replay.count.tolist() == [38, 38] and replay.size == 2 * (10 - 2)
    batch, _ = replay.sample(256, beta=0.4, rng=np.random.default_rng(1))
    rows = batch.obs[:, 1]  # the second fill's rows 0..29; the ring holds its last 10 per stream
    assert rows.min() >= 20 and rows.max() <= 27
    assert replay.update_priorities(old_keys, np.full(16, 50.0)) == 0  # every key is stale
    assert replay.max_priority < 50


def test_n_step_windows_stay_inside_one_episode_of_one_env():
    n = 4
    replay = Replay(3 * 40, 3, (3,), "float32", n_step=n, alpha=0.0, check_memory=False)
    fill(replay, 100, 3, seed=3)  # random terminations and truncations, overwritten rings
    batch, keys = replay.sample(2000, beta=1.0, rng=np.random.default_rng(0))
    stream, t = batch.obs[:, 0].astype(int), batch.obs[:, 1].astype(int)
    # the window is the same stream's next n rows: reward = 1000 * stream + row
    np.testing.assert_array_equal(batch.reward, 1000 * stream[:, None] + t[:, None] + 1 + np.arange(n))
    # a start row is never a done row (its transition is the autoreset step)
    assert not np.any(replay.terminated[keys.slot] | replay.truncated[keys.slot])
    # the bootstrap row is the first done row of the window, else the window's last row
    done = batch.terminated | batch.truncated
    k = np.where(done.any(1), done.argmax(1), n - 1)
    np.testing.assert_array_equal(batch.next_obs[:, 0], stream)
    np.testing.assert_array_equal(batch.next_obs[:, 1], t + 1 + k)
    assert done.any() and (done.sum(1) > 1).any()  # windows that run into the next episode were drawn


def stack_of(frames: list[np.ndarray], start: int, t: int, stack: int) -> np.ndarray:
    return np.stack([frames[max(start, t - j)] for j in reversed(range(stack))])


def test_dedup_frames_restack_equals_stored_stacks_synthetic():
    """A stream whose stacks restart at some rows (a game reset) and run on at others (a lost life)."""
    stack, length = 4, 12
    full = Replay(2 * length, 2, (stack, 3, 3), "uint8", n_step=2, alpha=0.0, check_memory=False)
    dedup = Replay(2 * length, 2, (stack, 3, 3), "uint8", n_step=2, alpha=0.0, dedup_frames=True, check_memory=False)
    rng = np.random.default_rng(0)
    frames = [[], []]
    start = [0, 0]
    for t in range(50):
        obs, term = np.zeros((2, stack, 3, 3), np.uint8), np.zeros(2, bool)
        for e in range(2):
            frames[e].append(rng.integers(0, 255, (3, 3), dtype=np.uint8))
            if t and rng.random() < 0.15 and t - start[e] > 1:
                start[e] = t  # game reset: the stack repeats this row's frame
            obs[e] = stack_of(frames[e], start[e], t, stack)
            term[e] = rng.random() < 0.2  # lost lives / episode ends that do not restart the stack
        for r in (full, dedup):
            r.add(obs, np.zeros(2, np.int32), np.ones(2, np.float32), term, np.zeros(2, bool), np.arange(2))
        if t > 5:
            batch, keys = dedup.sample(64, beta=1.0, rng=rng)
            reference = full._gather(keys.slot, batch.weight)  # the same transitions from the full stacks
            for name in batch._fields:
                np.testing.assert_array_equal(getattr(batch, name), getattr(reference, name))
    assert dedup.obs.nbytes * stack == full.obs.nbytes


def test_dedup_frames_restack_equals_envpool_breakout_stacks():
    """Breakout with episodic life (lost lives keep the stack, game overs restart it) and a time limit."""
    import envs

    env = envs.make(EnvConfig(id="Breakout-v5", num_envs=2, max_episode_steps=60, options={"noop_max": 1}), seed=3)
    spec = env.spec
    full = Replay(2 * 150, 2, spec.obs_shape, "uint8", n_step=3, alpha=0.0, check_memory=False)
    dedup = Replay(2 * 150, 2, spec.obs_shape, "uint8", n_step=3, alpha=0.0, dedup_frames=True, check_memory=False)
    rng = np.random.default_rng(0)
    env.async_reset()
    after_done = np.zeros(2, bool)
    runs_on = time_limits = 0
    for _ in range(400):  # wraps each 150-row ring
        ts = env.recv()
        action = rng.integers(0, spec.num_actions, len(ts.env_id)).astype(np.int32)
        env.send(action, ts.env_id)
        for r in (full, dedup):
            r.add(ts.obs, action, ts.reward, ts.terminated, ts.truncated, ts.env_id)
        fresh = dedup.stack_start[ts.env_id * 150 + (dedup.count[ts.env_id] - 1) % 150]
        runs_on += int(np.sum(after_done[ts.env_id] & ~fresh))  # the row after a lost life continues the stack
        time_limits += int(np.sum(ts.truncated))  # the row after a time limit restarts it
        after_done[ts.env_id] = ts.terminated | ts.truncated
    env.close()
    assert runs_on > 2 and time_limits > 2  # both kinds of episode boundary occurred
    valid = np.flatnonzero(dedup.tree.get(np.arange(300)) > 0)
    np.testing.assert_array_equal(dedup._obs(valid), full.obs[valid])
    batch, keys = dedup.sample(256, beta=1.0, rng=np.random.default_rng(5))
    reference = full._gather(keys.slot, batch.weight)
    for name in batch._fields:
        np.testing.assert_array_equal(getattr(batch, name), getattr(reference, name))


def test_bad_inputs_each_one_clear_error():
    r = Replay(40, 2, (3,), "float32", n_step=2, check_memory=False)
    with pytest.raises(ValueError, match=r"obs \(2, 4\).*must be \(2, 3\)"):
        r.add(np.zeros((2, 4)), np.zeros(2), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), np.arange(2))
    with pytest.raises(ValueError, match="must be distinct and in"):
        r.add(np.zeros((2, 3)), np.zeros(2), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), np.array([1, 1]))
    with pytest.raises(ValueError, match="no sampleable transition yet"):
        r.sample(4, 0.4, np.random.default_rng(0))
    fill(r, 6, 2, done_every=1000)
    _, keys = r.sample(4, 0.4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="must be finite"):
        r.update_priorities(keys, np.array([1.0, np.nan, 1.0, 1.0]))
    with pytest.raises(ValueError, match="streams 3 rows; it needs more than n_step"):
        Replay(6, 2, (3,), "float32", n_step=2, check_memory=False)
    with pytest.raises(ValueError, match="dedup_frames needs stacked frames"):
        Replay(100, 1, (4,), "float32", dedup_frames=True, check_memory=False)
    dedup = Replay(40, 1, (2, 2, 2), "uint8", dedup_frames=True, check_memory=False)
    with pytest.raises(ValueError, match="neither repeats one frame nor continues"):
        dedup.add(np.arange(8, dtype=np.uint8).reshape(1, 2, 2, 2), np.zeros(1), np.zeros(1), np.zeros(1, bool),
                  np.zeros(1, bool), np.arange(1))


def test_memory_check_names_size_and_fix():
    atari = dict(capacity=1_000_000, num_streams=1, obs_shape=(4, 84, 84), obs_dtype="uint8")
    need = replay_bytes(**atari)
    assert 28.2e9 < need < 28.4e9  # 1M x 28,224 bytes of frames, plus ~50 MB of rows and tree
    assert 7.0e9 < replay_bytes(**atari, dedup_frames=True) < 7.2e9
    message = memory_problem(**atari, available=24 * 10**9)
    assert "28.3 GB" in message and "21.6 GB" not in message and "24.0 GB" in message
    assert "algo.replay.dedup_frames=true" in message and "7.1 GB" in message
    assert "lower algo.replay.capacity" in message
    assert memory_problem(**atari, dedup_frames=True, available=24 * 10**9) is None
    with pytest.raises(ReplayMemoryError, match="need 28.3 GB"):
        replay_mod.MEMORY_HEADROOM, old = 1e-12, replay_mod.MEMORY_HEADROOM
        try:
            Replay(1_000_000, 1, (4, 84, 84), "uint8")
        finally:
            replay_mod.MEMORY_HEADROOM = old


def dqn_experiment(**algo) -> Experiment:
    return Experiment(total_env_steps=50_000, env=EnvConfig(id="CartPole-v1", num_envs=1),
                      algo=DQNConfig(**{"learning_starts": 1000, **algo}),
                      trainer=TrainerConfig(num_minibatches=1, update_epochs=1))


def test_config_problems_one_clear_message_each(monkeypatch):
    assert problems(dqn_experiment()) == []
    found = problems(dqn_experiment(learning_starts=60_000))
    assert len(found) == 1 and "algo.learning_starts=60,000" in found[0] and "total_env_steps=50,000" in found[0]
    found = problems(dqn_experiment(replay_ratio=0.0))
    assert len(found) == 1 and "algo.replay_ratio=0.0 must be > 0" in found[0]
    found = problems(dqn_experiment(replay=ReplayConfig(capacity=2)))
    assert len(found) == 1 and "fewer than an n-step window needs" in found[0]
    monkeypatch.setattr(replay_mod, "available_memory_bytes", lambda: 24 * 10**9)
    atari = Experiment(total_env_steps=10**7, env=EnvConfig(id="Pong-v5", num_envs=1),
                       algo=DQNConfig(replay=ReplayConfig(capacity=1_000_000)),
                       trainer=TrainerConfig(num_minibatches=1, update_epochs=1))
    found = problems(atari)
    assert len(found) == 1 and "28.3 GB" in found[0] and "dedup_frames=true" in found[0], found
    ok = dataclasses.replace(atari, algo=DQNConfig(replay=ReplayConfig(capacity=1_000_000, dedup_frames=True)))
    assert problems(ok) == []
    found = problems(dataclasses.replace(ok, trainer=TrainerConfig()))
    assert len(found) == 1 and "trainer.update_epochs=4 and trainer.num_minibatches=4 must be 1" in found[0]


def test_train_replay_refuses_a_replay_that_does_not_fit_before_creating_anything(tmp_path, monkeypatch):
    """Envs whose observations the config cannot tell (here CartPole) are checked with the env's spec."""
    from srljax.config import ConfigError, LogConfig
    from srljax.loops.replay import train_replay

    monkeypatch.setattr(replay_mod, "available_memory_bytes", lambda: 100_000)
    cfg = dataclasses.replace(dqn_experiment(), log=LogConfig(run_root=str(tmp_path), wandb="disabled"))
    with pytest.raises(ConfigError, match=r"algo.replay.capacity=1,000,000 transitions of 4 float32 .* lower "
                                          r"algo.replay.capacity to at most"):
        train_replay(cfg)
    assert not any(tmp_path.iterdir())


def test_sampling_several_batches_at_once_each_spans_the_replay():
    """``sample(..., batches=K)``: K stacked batches, each distributed as the priorities say (the strata are shuffled
    before they are dealt, so no batch holds one stretch of the tree) and each with its own weights' maximum at 1."""
    replay = Replay(64, 1, (3,), "float32", n_step=1, alpha=1.0, priority_eps=1e-6, check_memory=False)
    fill(replay, 40, 1, done_every=1000)
    rng = np.random.default_rng(0)
    priorities = rng.random(39) * 3 + 0.1
    replay.update_priorities(replay_mod.SampleKeys(np.arange(39), replay.written[:39]), priorities)
    expected = (priorities + 1e-6) / np.sum(priorities + 1e-6)
    counts = np.zeros((4, 39))
    for _ in range(300):
        batch, keys = replay.sample(32, beta=0.5, rng=rng, batches=4)
        assert batch.obs.shape == (4, 32, 3) and batch.reward.shape == (4, 32, 1) and keys.slot.shape == (4, 32)
        np.testing.assert_allclose(batch.weight.max(axis=1), 1.0)
        np.testing.assert_array_equal(batch.obs[..., 1], keys.slot)  # obs[1] is the row index: rows match keys
        for k in range(4):
            counts[k] += np.bincount(keys.slot[k], minlength=39)[:39]
    for k in range(4):
        chi2 = np.sum((counts[k] - counts[k].sum() * expected) ** 2 / (counts[k].sum() * expected))
        assert stats.chi2.sf(chi2, df=38) > 1e-4, (k, chi2)
