"""Ape-X (distributed DQN): initial priorities against the replay's own n-step targets, the priority
stream kind, routing of priorities to the shard incarnation that drew a batch, shard stream ids, the
actor's row chunks, the replay's checkpoint state, and the config refusals. The learning run and a
two-shard graph are ``-m slow``."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import zmq

from algos.dqn import Q_EXTRAS, initial_priorities
from algos.returns import n_step_return
from srljax.comm import PriorityReceiver, PrioritySender, PriorityUpdate
from srljax.config import (
    CheckpointConfig,
    DQNConfig,
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    PPOConfig,
    ReplayConfig,
    TrainerConfig,
)
from srljax.evaluation.evaluator import read_evals
from srljax.layout import ACTOR, BUFFER, PRIORITIES, TRAINER, build_layout, worker_class
from srljax.prepare import problems
from srljax.replay.apex import actor_allowance, shard_actors, shard_of, shard_streams, stream_base, trainer_allowance
from srljax.replay.buffer import Replay, SampleKeys
from srljax.storage.run_dir import resume_problems
from srljax.system.acting.apex_actor import RowChunker
from srljax.types import EnvSpec, TimeStep

REPO = Path(__file__).resolve().parents[1]
TRIAL = "exp/t0"


def random_stream(rng: np.random.Generator, rows: int) -> dict[str, np.ndarray]:
    done = rng.random(rows) < 0.15
    term = done & (rng.random(rows) < 0.5)
    return {"obs": rng.normal(size=(rows, 3)).astype(np.float32), "action": rng.integers(0, 2, rows).astype(np.int32),
            "reward": rng.normal(size=rows).astype(np.float32), "terminated": term, "truncated": done & ~term,
            "q_taken": rng.normal(size=rows).astype(np.float32), "q_max": rng.normal(size=rows).astype(np.float32)}


@pytest.mark.parametrize("n_step", [1, 3])
def test_initial_priorities_match_the_replays_own_n_step_targets(n_step):
    """The actor's priority of row t is |G - Q(s_t, a_t)| for the very window the replay samples for row t."""
    rng = np.random.default_rng(n_step)
    s = random_stream(rng, 60)
    prio = initial_priorities(s["q_taken"], s["q_max"], s["reward"], s["terminated"], s["truncated"], n_step, 0.9)
    assert prio.shape == (60 - n_step,)
    replay = Replay(200, 1, (3,), "float32", n_step=n_step, alpha=1.0, check_memory=False)
    for t in range(60):
        replay.add(s["obs"][t:t + 1], s["action"][t:t + 1], s["reward"][t:t + 1], s["terminated"][t:t + 1],
                   s["truncated"][t:t + 1], np.array([0]))
    slots = np.arange(60 - n_step)
    batch = replay._gather(slots, np.ones(slots.size, np.float32))
    boot = np.array([np.flatnonzero((s["obs"] == row).all(axis=1))[0] for row in batch.next_obs])  # the bootstrap rows
    g = np.asarray(n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, s["q_max"][boot], 0.9))
    want = np.where(s["terminated"][slots] | s["truncated"][slots], 0.0, np.abs(g - s["q_taken"][slots]))
    np.testing.assert_allclose(prio, want, rtol=1e-5, atol=1e-5)
    assert np.count_nonzero(want) > 10  # most rows are not done rows


def test_initial_priorities_decide_what_is_sampled():
    """Rows inserted with an actor's priority are drawn in proportion to it (not at the max priority)."""
    replay = Replay(400, 2, (1,), "float32", n_step=1, alpha=1.0, check_memory=False)
    for t in range(150):
        replay.add(np.zeros((2, 1), np.float32), np.zeros(2, np.int32), np.zeros(2), np.zeros(2, bool),
                   np.zeros(2, bool), np.array([0, 1]), priority=np.array([1.0, 9.0], np.float32))
    _, keys = replay.sample(4000, beta=0.4, rng=np.random.default_rng(0))
    share = np.mean(keys.slot // replay.length == 1)
    assert 0.87 < share < 0.93  # 9 / (1 + 9)


def test_priority_stream_round_trip_and_bad_messages_are_dropped():
    ctx = zmq.Context()
    try:
        rx = PriorityReceiver("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
        tx = PrioritySender(rx.address, TRIAL, ctx=ctx)
        update = PriorityUpdate(np.arange(5), np.arange(5) * 2, np.linspace(0, 1, 5).astype(np.float32))
        deadline = time.monotonic() + 5
        while not tx.send(update, incarnation="abc", version=7) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tx.grant(3, incarnation="abc") and tx.save(9)
        tx._encode_send("priorities", {"slot": np.arange(3), "written": np.arange(2), "priority": np.ones(3)}, 1000)
        kind, got, msg = rx.recv(timeout_ms=2000)
        assert kind == "priorities" and msg.meta["incarnation"] == "abc" and msg.version == 7
        np.testing.assert_array_equal(got.slot, update.slot)
        np.testing.assert_array_equal(got.written, update.written)
        np.testing.assert_array_equal(got.priority, update.priority)
        assert rx.recv(timeout_ms=2000)[:2] == ("grant", 3)
        assert rx.recv(timeout_ms=2000)[:2] == ("save", 9)
        assert rx.recv(timeout_ms=300) is None  # the malformed one: dropped and counted, not raised
        assert rx.counters()["drop.shape"] == 1
    finally:
        for endpoint in ("tx", "rx"):
            if endpoint in locals():
                locals()[endpoint].close()
        ctx.term()


def test_priorities_land_only_on_the_shard_that_drew_the_batch():
    """Two shards: a batch's update applies to its own rows; the other shard, and rows overwritten since the
    draw, keep their priorities (what ``ReplayBufferWorker`` does with each update it receives)."""
    shards = [Replay(64, 2, (1,), "float32", n_step=1, alpha=1.0, check_memory=False) for _ in range(2)]
    for replay in shards:
        for _ in range(10):
            replay.add(np.zeros((2, 1), np.float32), np.zeros(2, np.int32), np.zeros(2), np.zeros(2, bool),
                       np.zeros(2, bool), np.array([0, 1]))
    _, keys = shards[0].sample(8, beta=0.4, rng=np.random.default_rng(1))
    before = [r.tree.total for r in shards]
    applied = shards[0].update_priorities(keys, np.full(8, 5.0))
    assert applied == 8 and shards[0].tree.total > before[0] and shards[1].tree.total == before[1]
    for _ in range(40):  # overwrite every row: a late update for the old rows is skipped
        shards[0].add(np.zeros((2, 1), np.float32), np.zeros(2, np.int32), np.zeros(2), np.zeros(2, bool),
                      np.zeros(2, bool), np.array([0, 1]))
    assert shards[0].update_priorities(SampleKeys(keys.slot, keys.written), np.full(8, 50.0)) == 0


def apex_cfg(**layout) -> Experiment:
    return Experiment(total_env_steps=20_000, env=EnvConfig(id="CartPole-v1", num_envs=2),
                      algo=DQNConfig(learning_starts=1000, batch_size=32, replay_ratio=4.0, num_steps=8,
                                     replay=ReplayConfig(capacity=4000, alpha=0.6)),
                      trainer=TrainerConfig(num_minibatches=1, update_epochs=1),
                      layout=LayoutConfig(**{"mode": "distributed", "num_actors": 5, "num_buffer_workers": 2, **layout}))


def test_shards_streams_and_the_replay_workers():
    cfg = apex_cfg()
    assert [shard_of(i, cfg) for i in range(5)] == [0, 1, 0, 1, 0]
    assert shard_actors(cfg, 0) == [0, 2, 4] and shard_actors(cfg, 1) == [1, 3]
    assert shard_streams(cfg, 0) == 6 and shard_streams(cfg, 1) == 4
    assert [stream_base(cfg, i) for i in (0, 2, 4, 1, 3)] == [0, 2, 4, 0, 2]  # disjoint blocks per shard
    assert problems(cfg) == []
    assert [worker_class(cfg, r).__name__ for r in (ACTOR, BUFFER, TRAINER)] == [
        "ApexActorWorker", "ReplayBufferWorker", "TrainerWorker"]
    streams = {(s.kind, s.src, s.dst) for s in build_layout(cfg).streams}
    assert (PRIORITIES, TRAINER, BUFFER) in streams and ("samples", BUFFER, TRAINER) in streams
    ppo = dataclasses.replace(cfg, algo=PPOConfig())
    assert worker_class(ppo, ACTOR).__name__ == "ActorWorker"
    assert all(s.kind != PRIORITIES for s in build_layout(ppo).streams)


def test_replay_ratio_allowances_hold_the_ratio_both_ways():
    cfg = apex_cfg(num_actors=2)  # learning_starts 1000, batch 32, ratio 4, tolerance 0.1
    assert trainer_allowance(cfg, 1000) == 0  # nothing before learning_starts
    assert trainer_allowance(cfg, 1800) == pytest.approx(4 * 800 * 1.1 / 32)
    # its share of learning_starts, plus enough to refill its (restarted, empty) shard with a batch alone
    assert actor_allowance(cfg, 0) - 1000 / 2 >= 32 + (1 + 1) * 2
    assert actor_allowance(cfg, 100) - actor_allowance(cfg, 0) == pytest.approx(100 * 32 / 4 * 1.1 / 2)
    # an actor of a resumed run (or a restarted one) counts its rows from zero: only the updates since it started
    assert actor_allowance(cfg, 135, since=35) == pytest.approx(actor_allowance(cfg, 100))
    # with both throttles at their limits the other side can always move on: no deadlock
    for version in (0, 1, 10, 1000):
        inserted = 2 * actor_allowance(cfg, version)
        assert trainer_allowance(cfg, int(inserted)) >= version + 1
    # the same with the trainer waiting for K batches per compiled call: the actors' slack covers K updates
    chunked = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, updates_per_call=64))
    for version in (0, 64, 640):
        assert trainer_allowance(chunked, int(2 * actor_allowance(chunked, version))) >= version + 64


def test_apex_config_refusals_one_clear_message_each():
    assert any("set layout.num_buffer_workers>=1" in p for p in problems(apex_cfg(num_buffer_workers=0)))
    assert any("layout.inference=remote is not built" in p for p in problems(apex_cfg(inference="remote")))
    found = problems(apex_cfg(num_actors=1, num_buffer_workers=2))
    assert any("some would stay empty" in p for p in found), found
    cfg = apex_cfg()
    tight = dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, replay=ReplayConfig(capacity=20)))
    assert any("raise it to at least" in p for p in problems(tight))
    single = dataclasses.replace(cfg, layout=LayoutConfig(), algo=dataclasses.replace(cfg.algo, throttle="none"))
    assert any("apply to distributed (Ape-X) layouts" in p for p in problems(single))
    ppo = Experiment(checkpoint=CheckpointConfig(replay=True))
    assert any("checkpoint.replay=true: this algorithm keeps no replay" in p for p in problems(ppo))


def test_resume_of_a_replay_trial_needs_the_replay_in_its_checkpoints(tmp_path):
    cfg = dataclasses.replace(apex_cfg(), log=LogConfig(run_root=str(tmp_path)))
    found = resume_problems(cfg)
    assert len(found) == 1 and "checkpoint.replay=false" in found[0]
    keep = dataclasses.replace(cfg, checkpoint=CheckpointConfig(replay=True))
    assert "holds no checkpoint" in resume_problems(keep)[0] or "does not exist" in resume_problems(keep)[0]


def test_row_chunker_sends_every_row_once_in_order_with_priorities():
    spec = EnvSpec("probe", (2,), "float32", "discrete", num_actions=2, num_envs=3, batch_size=2)
    # the seam's fields as DQN fills them (algos/dqn.py: n_step 2, gamma 0.9)
    algo = types.SimpleNamespace(extras_spec=Q_EXTRAS, priority_lookahead=2, initial_priorities=lambda r: initial_priorities(
        r["q_taken"], r["q_max"], r["reward"], r["terminated"], r["truncated"], n_step=2, gamma=0.9))
    chunker, rng, sent = RowChunker(spec, num_steps=4, algo=algo), np.random.default_rng(0), []
    rows = {env: [] for env in range(3)}
    for step in range(40):  # async: two of the three envs per recv, unevenly
        ids = np.array([0, 1]) if step % 3 else np.array([0, 2])
        obs = rng.normal(size=(2, 2)).astype(np.float32)
        for i, env in enumerate(ids):
            rows[int(env)].append(obs[i])
        ts = TimeStep(obs, np.ones(2, np.float32), np.zeros(2, bool), np.zeros(2, bool), ids.astype(np.int32),
                      np.full(2, np.nan, np.float32), np.zeros(2, np.int32))
        chunker.add(ts, np.zeros(2, np.int32), {"q_taken": np.zeros(2, np.float32), "q_max": np.ones(2, np.float32)})
        while chunker.ready(3):
            sent.append(chunker.pop())
    for env in range(3):
        got = [c["obs"][:, list(c["env_id"]).index(env)] for c in sent if env in c["env_id"]]
        got = np.concatenate(got) if got else np.zeros((0, 2))
        assert len(got) % 4 == 0 and len(got) <= len(rows[env]) - 2  # whole chunks; the last n rows held back
        np.testing.assert_array_equal(got, np.asarray(rows[env][: len(got)]))
    assert all(len(set(c["env_id"].tolist())) == len(c["env_id"]) for c in sent)  # distinct envs per message
    # reward 1 everywhere, q_max 1, q_taken 0: |1 + 0.9 + 0.81| for every row
    np.testing.assert_allclose(np.concatenate([c["priority"].ravel() for c in sent]), 2.71, rtol=1e-6)


def test_replay_state_round_trip_and_cut_streams():
    rng = np.random.default_rng(3)
    a = Replay(60, 2, (3,), "float32", n_step=2, alpha=0.6, check_memory=False)
    for t in range(45):
        a.add(rng.normal(size=(2, 3)).astype(np.float32), rng.integers(0, 2, 2), rng.normal(size=2),
              rng.random(2) < 0.1, np.zeros(2, bool), np.array([0, 1]), priority=rng.random(2).astype(np.float32))
    b = Replay(60, 2, (3,), "float32", n_step=2, alpha=0.6, check_memory=False)
    b.load_state({k: np.array(v) for k, v in a.state().items()})
    assert (b.size, b.inserted, b.max_priority) == (a.size, a.inserted, a.max_priority)
    got, want = b.sample(16, 0.5, np.random.default_rng(0))[0], a.sample(16, 0.5, np.random.default_rng(0))[0]
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    last = np.arange(2) * a.length + (a.count - 1) % a.length
    live = ~(a.terminated[last] | a.truncated[last])
    assert a.cut_streams(np.arange(2)) == live.sum() and a.truncated[last].all() or a.terminated[last].any()
    with pytest.raises(ValueError, match="does not fit this replay"):
        Replay(60, 3, (3,), "float32", n_step=2, check_memory=False).load_state(a.state())


def _fake_checkpoint(run: Path, step: int, cfg: Experiment | None = None) -> None:
    """A finished orbax step as ``srljax.storage.steps.steps`` and ``read_meta`` see it (a folder named by the step)."""
    from srljax.config import to_dict

    meta = run / "checkpoints" / str(step) / "meta"
    meta.mkdir(parents=True)
    (meta / "metadata").write_text(json.dumps({"version": step, "env_steps": step * 10,
                                               **({"config": to_dict(cfg)} if cfg is not None else {})}))


def test_shard_snapshots_are_atomic_keyed_by_step_and_a_step_counts_once_every_shard_wrote(tmp_path):
    """``replay/<step>/shard-<s>.npz``: written under a temporary name and renamed; a step is complete (what
    --resume restores) only with its orbax step and every shard's file; older steps go only once a newer one is
    complete; newer orbax steps without their replay are set aside; another shard count is refused."""
    from srljax.replay import snapshots as snap

    replay = Replay(40, 2, (3,), "float32", n_step=2, alpha=0.6, check_memory=False)
    rng = np.random.default_rng(0)
    for _ in range(12):
        replay.add(rng.normal(size=(2, 3)).astype(np.float32), rng.integers(0, 2, 2), rng.normal(size=2),
                   np.zeros(2, bool), np.zeros(2, bool), np.array([0, 1]), priority=rng.random(2).astype(np.float32))
    state = replay.state()
    for step in (10, 20):
        _fake_checkpoint(tmp_path, step)
    for shard in (0, 1):
        snap.write_shard(tmp_path, 10, shard, 2, state)
    snap.write_shard(tmp_path, 20, 0, 2, state)  # shard 1 had not written step 20 when the run stopped
    assert sorted(p.name for p in (tmp_path / "replay" / "20").iterdir()) == ["shard-0.npz"]  # no temporary left
    assert snap.complete_steps(tmp_path, 2) == [10] and snap.prune(tmp_path, 2) == []
    got = snap.read_shard(tmp_path, 10, 1, 2)
    assert set(got) == set(state) and all(np.array_equal(got[k], state[k]) for k in state)
    with pytest.raises(ValueError, match="written by a graph of 2 replay buffer worker"):
        snap.read_shard(tmp_path, 10, 1, 1)
    assert "written by 2 replay buffer worker(s)" in snap.resume_problem(tmp_path, 3)
    assert snap.resume_problem(tmp_path, 2) is None
    # --resume: the trainer sets orbax step 20 aside, so it and the shards restore step 10
    assert snap.set_aside_incomplete(tmp_path, 2) == [20]
    assert (tmp_path / "checkpoints-without-replay" / "20" / "meta").is_dir() and not (tmp_path / "checkpoints" / "20").exists()
    snap.drop_newer(tmp_path, 10, 0)  # shard 0's file of the stopped timeline's step 20
    assert snap.replay_steps(tmp_path) == {10: {0, 1}}
    # the resumed run checkpoints step 30: step 10's files stay until every shard wrote step 30
    _fake_checkpoint(tmp_path, 30)
    snap.write_shard(tmp_path, 30, 1, 2, state)
    assert snap.prune(tmp_path, 2) == [] and snap.complete_steps(tmp_path, 2) == [10]
    snap.write_shard(tmp_path, 30, 0, 2, state)
    assert snap.prune(tmp_path, 2) == [10] and snap.replay_steps(tmp_path) == {30: {0, 1}}


def test_resume_of_an_apex_trial_needs_a_step_with_every_shards_replay(tmp_path):
    """``run_dir.resume_problems`` (every launcher's check before anything starts) for a distributed replay trial."""
    from srljax.replay import snapshots as snap

    cfg = dataclasses.replace(apex_cfg(num_actors=2), name="apexr", trial="t", log=LogConfig(run_root=str(tmp_path)),
                              checkpoint=CheckpointConfig(replay=True))
    run = Path(cfg.run_dir)
    _fake_checkpoint(run, 40, cfg)
    found = resume_problems(cfg)
    assert len(found) == 1 and "no checkpoint step holds the replay of all 2 replay buffer worker(s)" in found[0], found
    state = Replay(40, 2, (3,), "float32", n_step=2, check_memory=False).state()
    snap.write_shard(run, 40, 0, 2, state)
    assert "step 40: shards [0]" in resume_problems(cfg)[0]
    snap.write_shard(run, 40, 1, 2, state)
    assert resume_problems(cfg) == []
    more = dataclasses.replace(cfg, layout=dataclasses.replace(cfg.layout, num_buffer_workers=1))
    assert "layout.num_buffer_workers: 2 -> 1" in resume_problems(more)[0]  # the config check names it first


def test_replay_loop_checkpoint_holds_the_replay_and_restores_it(tmp_path):
    """The single-process loop's checkpoint (``_ReplayLoop._run_state``, one orbax step) restores the replay
    exactly, then ends each env's episode in progress (the envs are new)."""
    import envs
    from srljax.learning.learner import Learner
    from srljax.loops.replay import _ReplayLoop, _restore, make_replay

    cfg = Experiment(name="dqnckpt", trial="t", total_env_steps=600, env=EnvConfig(id="CartPole-v1", num_envs=2),
                     algo=DQNConfig(learning_starts=200, batch_size=8, replay=ReplayConfig(capacity=100, alpha=0.6)),
                     trainer=TrainerConfig(num_minibatches=1, update_epochs=1),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled"), checkpoint=CheckpointConfig(replay=True))
    env = envs.make(cfg.env, seed=0)
    try:
        learner, replay = Learner(cfg, env.spec), make_replay(cfg, env.spec)
        rng = np.random.default_rng(0)
        for _ in range(30):
            replay.add(rng.normal(size=(2, 4)).astype(np.float32), rng.integers(0, 2, 2), np.ones(2),
                       np.zeros(2, bool), np.zeros(2, bool), np.array([0, 1]), priority=rng.random(2))
        loop = _ReplayLoop(cfg, env, learner, replay)
        loop.env_steps = 60
        learner.version = 3
        learner.close()  # the final checkpoint, through the loop's run_state
        loop.logger.close()
        again, fresh = Learner(cfg, env.spec), make_replay(cfg, env.spec)
        meta = _restore(cfg, again, fresh)
        again.close(final_checkpoint=False)
    finally:
        env.close()
    assert meta["env_steps"] == 60 and again.version == 3 and fresh.inserted == replay.inserted == 60
    for name in ("obs", "action", "reward", "written", "initial"):
        np.testing.assert_array_equal(getattr(fresh, name), getattr(replay, name))
    last = np.arange(2) * fresh.length + (fresh.count - 1) % fresh.length
    assert fresh.truncated[last].all() and not replay.truncated.any()  # cut at the resume, nothing else changed
    assert fresh.size == replay.size - 2 * (cfg.algo.n_step - 1)  # the rows whose window reached the cut row


@pytest.mark.slow
def test_single_process_resume_restores_the_replay(tmp_path):
    from srljax.loops.replay import train_replay

    cfg = Experiment(name="dqnresume", trial="t", total_env_steps=600, env=EnvConfig(id="CartPole-v1", num_envs=4),
                     algo=DQNConfig(learning_starts=200, batch_size=32, replay_ratio=1.0,
                                    replay=ReplayConfig(capacity=1000, alpha=0.6)),
                     trainer=TrainerConfig(num_minibatches=1, update_epochs=1),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=5),
                     checkpoint=CheckpointConfig(replay=True))
    first = train_replay(cfg)
    size = first.metrics[-1]["replay_size"]
    resumed = train_replay(dataclasses.replace(cfg, total_env_steps=640), resume=True)
    # 40 new env steps (10 recvs of 4 envs) on top of the restored rows; an empty replay would hold < 40
    assert resumed.metrics[-1]["replay_size"] >= size + 20, (size, resumed.metrics[-1])
    lines = [json.loads(x) for x in (tmp_path / "dqnresume" / "t" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["env_steps"] == 640


@pytest.mark.slow
def test_cartpole_apex_distributed_learns_and_exits_0(tmp_path):
    """``python -m launch.local configs/cartpole_apex_distributed.py``: 2 actors, 1 replay buffer worker, 1 trainer
    and the eval worker; the greedy evaluations reach 475 (issue 11's mark) and the trial exits 0."""
    done = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_apex_distributed.py", "-f", "t",
                           f"log.run_root={tmp_path}", "log.wandb=disabled"], cwd=REPO, timeout=3000,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "cartpole_apex_distributed" / "t"
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    # the policy's score: the eval worker's greedy (epsilon 0) episodes on fixed seeds, by params version
    evals = read_evals(run)
    assert len(evals) >= 10 and all(x["deterministic"] and len(x["returns"]) == 10 for x in evals), evals
    assert max(x["mean"] for x in evals) >= 475, [(x["version"], x["mean"]) for x in evals]
    assert evals[-1]["version"] == lines[-1]["update"]  # the final evaluation is of the trained policy
    assert 12.8 / 1.25 < lines[-1]["samples_per_insert"] < 12.8 * 1.25  # the ratio held near its target
    assert lines[-1]["epsilon/actor_0"] == pytest.approx(0.4)


def test_trainer_updates_in_chunks_in_threads_every_line_once_priorities_to_both_shards(tmp_path):
    """``algo.updates_per_call=4`` in the Ape-X trainer: K batches from two shards trained in one call, every
    update's line once and in order, each batch's priorities back to the shard that drew it, the ratio held."""
    from launch.threads import run_threads

    cfg = apex_cfg(num_actors=2)
    cfg = dataclasses.replace(cfg, name="apexk", trial="t", total_env_steps=3000,
                              algo=dataclasses.replace(cfg.algo, updates_per_call=4),
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=1),
                              checkpoint=CheckpointConfig(final=False))
    assert cfg.num_updates % 4 == 0
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    updates = [m["update"] for m in result.metrics]
    assert updates == list(range(1, cfg.num_updates + 1)), updates[-8:]
    assert len({m["loss"] for m in result.metrics[:4]}) == 4  # each line its own update's metrics
    run = tmp_path / "apexk" / "t"
    for shard in range(2):
        last = json.loads((run / "workers" / f"buffer-{shard}.jsonl").read_text().splitlines()[-1])
        assert last["priorities_applied"] > 0, last
    assert 4.0 / 1.1 - 0.5 <= result.metrics[-1]["samples_per_insert"] <= 4.0 * 1.1 + 0.5


@pytest.mark.slow
def test_two_shards_in_threads_route_priorities_and_resume_with_the_replay(tmp_path):
    """Two replay shards route their own priorities, write their replay with every checkpoint
    (``replay/<step>/shard-<s>.npz``, older steps pruned) and with the final one written while stopping; a
    resume restores trainer and shards from the same step, setting aside a newer orbax step without replay."""
    import shutil

    from launch.threads import run_threads
    from srljax.storage.steps import read_meta

    cfg = dataclasses.replace(apex_cfg(num_actors=2), name="apex2", trial="t", total_env_steps=4000,
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=10),
                              checkpoint=CheckpointConfig(every_updates=100, replay=True))
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    run = tmp_path / "apex2" / "t"
    final = read_meta(run / "checkpoints")[0]
    assert final == cfg.num_updates  # 375: not a multiple of 100, so written while stopping
    assert sorted(p.name for p in (run / "replay").iterdir()) == [str(final)]  # steps 100..300 pruned
    for shard in range(2):
        last = json.loads((run / "workers" / f"buffer-{shard}.jsonl").read_text().splitlines()[-1])
        assert last["priorities_applied"] > 0 and last["replay_size"] > 0  # each shard got its own batches' updates
        assert last["replay_snapshot_step"] == final and (run / "replay" / str(final) / f"shard-{shard}.npz").exists()
    shard_lines = (run / "workers" / "buffer-0.jsonl").read_text().splitlines()
    inserted = [json.loads(x)["replay_inserted"] for x in shard_lines if "replay_inserted" in x][-1]
    # a newer orbax step whose shards never wrote their replay (a crash in between): --resume must not take it
    shutil.copytree(run / "checkpoints" / str(final), run / "checkpoints" / str(final + 5))
    resumed = run_threads(dataclasses.replace(cfg, total_env_steps=6000), resume=True)
    assert resumed.exit_code == 0, resumed.message
    assert (run / "checkpoints-without-replay" / str(final + 5)).is_dir()
    for shard in range(2):
        lines = (run / "workers" / f"buffer-{shard}.jsonl").read_text().splitlines()
        first = next(json.loads(x) for x in lines if '"replay_restored_step"' in x and json.loads(x)["replay_restored_step"] >= 0)
        assert first["replay_restored_step"] == final  # the trainer's step (it checks each shard's report too)
    after = [json.loads(x) for x in (run / "workers" / "buffer-0.jsonl").read_text().splitlines()[len(shard_lines):]]
    first = next(x for x in after if "replay_inserted" in x)
    assert first["replay_inserted"] >= inserted > 1000  # the shard went on from its snapshot, not from empty
    assert resumed.metrics[-1]["update"] == dataclasses.replace(cfg, total_env_steps=6000).num_updates


@pytest.mark.slow
def test_threads_restart_a_replay_shard_and_an_apex_actor(tmp_path, monkeypatch):
    """actor/1 and then buffer/0 (the only replay shard) each raise once; both come back, the restarted
    shard starts empty and is granted batches afresh, the actor's streams are cut, the trial ends done."""
    from launch.threads import run_threads
    from srljax.system.acting.apex_actor import ApexActorWorker
    from srljax.system.staging.replay_buffer import ReplayBufferWorker
    from tests.test_system_restart import crash_once

    crashed: list[str] = []
    crash_once(monkeypatch, ApexActorWorker, 1, lambda w: w.stats.counters["segments"] >= 20, crashed)
    crash_once(monkeypatch, ReplayBufferWorker, 0, lambda w: w.stats.counters["batches"] >= 60, crashed)
    cfg = dataclasses.replace(apex_cfg(num_actors=2, num_buffer_workers=1, restart_backoff_seconds=0.2),
                              name="apexrestart", trial="t", total_env_steps=5000,
                              log=LogConfig(run_root=str(tmp_path), wandb="disabled", log_every=10))
    result = run_threads(cfg)
    assert result.exit_code == 0 and result.reason == "done", result.message
    assert sorted(crashed) == ["actor/1", "buffer/0"], crashed
    assert result.restarts["by_worker"] == {"actor/1": 1, "buffer/0": 1}, result.restarts
    shard = result.worker_metrics("buffer", 0)
    assert max(x.get("streams_cut", 0) for x in shard) >= 1 or "buffer/0" in crashed[:1]  # the actor's envs were cut
    assert shard[-1]["state"] == "stopped" and shard[-1]["batches"] > 0  # the newcomer served batches
    assert result.metrics[-1]["update"] == cfg.num_updates
