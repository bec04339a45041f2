"""ReplayBufferWorker: one shard of Ape-X's prioritized replay; actors insert rows, the trainer pulls batches.

    worker = ReplayBufferWorker(cfg, index=0, names=names)   # run by a backend for algo=dqn, distributed

The BUFFER role's worker for a replay algorithm (``srljax.layout.REPLAY_WORKERS``). Shard s holds
``algo.replay.capacity / layout.num_buffer_workers`` transitions in a ``srljax.replay.buffer.Replay`` with one
stream per env of each actor that feeds it (actor i feeds shard i % S, ``srljax.replay.apex``).

* **In** (samples, PULL): an actor's chunk ``[T, k]`` of rows (obs, action, reward, flags) of k of its
  envs, each row with the initial priority the actor computed from its own Q-values
  (``algos.dqn.initial_priorities``). Rows go in as they come; a full replay overwrites the oldest,
  so actors are never blocked by it. A chunk from a new incarnation of an actor (it was restarted)
  first ends that actor's episodes in progress (``Replay.cut_streams``).
* **Out** (samples, PUSH to the trainer): sampled batches, only as many as the trainer granted
  (credit, ``grant`` on the priorities stream: at most the trainer's prefetch is ever in flight),
  and every ``REPORT_S`` a report (an empty tree) whose meta carries the env steps inserted since
  the last one, the completed episodes, the actors' epsilons, the shard's size and incarnation.
* **Back** (priorities, PULL): ``|TD error|`` for the rows of a batch this incarnation drew, and
  ``save`` (the trainer wrote checkpoint ``step``): with ``checkpoint.replay`` the shard writes its
  contents to ``RUN_DIR/replay/<step>/shard-<s>.npz`` (``srljax.replay.snapshots``: temporary file,
  fsync, rename; older steps' files go once a newer step is complete). When stopped it waits up to
  ``FINAL_SAVE_WAIT_S`` for the trainer's ``save`` of its final checkpoint. ``--resume`` loads the
  files of the newest complete step, the one the trainer restores; a restarted shard starts empty.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import numpy as np
import zmq

from srljax.comm import NameResolver, PriorityReceiver, SampleReceiver, SampleSender
from srljax.comm.priorities import KIND_GRANT, KIND_SAVE
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import ACTOR, BUFFER, PRIORITIES, SAMPLES, TRAINER
from srljax.replay import snapshots as replay_snapshots
from srljax.replay.apex import num_shards, shard_actors, shard_capacity, shard_streams, stream_base
from srljax.replay.buffer import SampleKeys, config_replay, replay_extras
from srljax.system.shell.bounds import FLOOR, HEADROOM
from srljax.system.shell.common import bind_address, check_array, episode_meta, episodes_from_meta, wins_from_meta
from srljax.system.shell.worker import Worker

REPORT_S = 0.25  # how often inserts and episodes go to the trainer when no batch is asked for
DRAIN_MAX = 64
WAIT_MS = 20  # the longest one turn of the loop waits for rows or credit
FINAL_SAVE_WAIT_S = 20.0  # at stop: how long to wait for the trainer's final checkpoint step (its own stop writes it)


class ReplayBufferWorker(Worker):
    role = BUFFER
    serves = (SAMPLES, PRIORITIES)

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close``, ``metrics`` and ``waiting`` run after a partial setup too)
        self.replay: Any = None  # a srljax.replay.buffer.Replay (``config_replay``)
        self.rng: np.random.Generator | None = None
        self.shard_incarnation = ""
        self.receiver: SampleReceiver | None = None
        self.back: PriorityReceiver | None = None
        self.sender: SampleSender | None = None
        self.poller: zmq.Poller | None = None
        self.actors: list[int] = []
        self.actor_incarnation: dict[int, str] = {}
        self.epsilons: dict[str, float] = {}
        self.unreported_steps = 0
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.wins: list[float] = []
        self.actor_returns: dict[str, list[float]] = {}
        self.granted = self.served = 0
        self.next_report = 0.0
        self.batches_sent = self.priorities_applied = 0
        self.snapshot_step = -1
        self.restored_step = -1

    def setup(self) -> None:
        cfg, spec, a = self.cfg, self.spec, self.cfg.algo
        if spec is None:
            raise RuntimeError("the configure message carried no env spec")
        self.replay = config_replay(cfg, spec, shard_capacity(cfg), shard_streams(cfg, self.index))
        self.rng = np.random.default_rng([cfg.seed, 7919, self.index])
        self.shard_incarnation = uuid.uuid4().hex[:8]  # in every batch: priorities for another one are dropped
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx, hwm=4,
                                       **self.samples_options(sender=False))
        self.register(SAMPLES, self.receiver.address)
        limit = FLOOR + HEADROOM * 24 * max(a.batch_size, 1)  # three [N] arrays of 8 bytes
        self.back = PriorityReceiver(bind_address(cfg), self.trial, ctx=self.ctx, max_bytes=limit)
        self.register(PRIORITIES, self.back.address)
        self.sender = SampleSender(None, self.trial, ctx=self.ctx, hwm=4, **self.samples_options(sender=True))
        self.poller = zmq.Poller()
        self.poller.register(self.receiver.sock, zmq.POLLIN)
        self.poller.register(self.back.sock, zmq.POLLIN)
        self.connect_peers(self.sender, TRAINER, SAMPLES)
        self.actors = shard_actors(cfg, self.index)
        self.actor_incarnation = {}
        self.epsilons = {}
        self.unreported_steps, self.returns, self.lengths, self.wins = 0, [], [], []
        self.actor_returns = {}  # per actor: epsilons differ, so do their returns
        self.granted = self.served = 0
        self.next_report = 0.0
        self.batches_sent = self.priorities_applied = 0
        self.snapshot_step = -1  # the checkpoint step of the newest snapshot written or restored
        self.restored_step = -1  # --resume: the checkpoint step this shard's replay came from
        if self.resume and not self.restarted and cfg.checkpoint.replay:
            self._load_snapshot()
        self.log(f"replay shard {self.index}: {self.replay.capacity:,} transitions in {self.replay.num_streams} streams "
                 f"(actors {self.actors}); samples at {self.receiver.address}, priorities at {self.back.address}")

    # -- loop -------------------------------------------------------------------------------------
    def poll(self) -> None:
        self._take_back()
        with self.stats.time("wait/samples"):
            if self.served >= self.granted:  # no batch asked for: wake on rows or on the trainer's credit,
                self.poller.poll(WAIT_MS)  # whichever comes first, not after a blocking recv on rows alone
                self._take_back()
            msg = self.receiver.recv(timeout_ms=0)
            taken = 0
            while msg is not None:
                self._insert(msg)
                taken += 1
                msg = self.receiver.recv(timeout_ms=0) if taken < DRAIN_MAX else None
        if self.served < self.granted and self.replay.size >= self.cfg.algo.batch_size:
            self._send_batch()
        elif time.monotonic() >= self.next_report:
            self._send(None, {})
        self.stats.gauge("replay/size", self.replay.size)

    def _take_back(self) -> None:
        for _ in range(DRAIN_MAX):
            got = self.back.recv(timeout_ms=0)
            if got is None:
                return
            kind, value, msg = got
            if kind == KIND_SAVE:
                self.save_snapshot(int(value))
                continue
            if msg.meta.get("incarnation") != self.shard_incarnation:
                self.stats.add("priorities_other_incarnation")
                continue
            if kind == KIND_GRANT:
                self.granted = max(self.granted, int(value))
                continue
            try:
                self.priorities_applied += self.replay.update_priorities(SampleKeys(value.slot, value.written), value.priority)
            except (ValueError, IndexError):
                self.stats.add("priorities_invalid")
            self.stats.add("priority_updates")

    def _insert(self, msg: Any) -> None:
        """Rows ``[T, k]`` of k envs of one actor, with their initial priorities."""
        try:
            actor = int(msg.meta.get(ACTOR, -1))
            if actor not in self.actors:
                raise ValueError(f"actor {actor} does not feed shard {self.index}")
            rows = self._checked_rows(msg.tree)
        except (ValueError, TypeError):
            self.stats.add("samples_invalid")
            return
        base = stream_base(self.cfg, actor)
        streams = base + rows["env_id"].astype(np.int64)
        incarnation = str(msg.meta.get("incarnation", ""))
        if self.actor_incarnation.get(actor, incarnation) != incarnation:  # a restarted actor: its envs are new
            self.stats.add("streams_cut", self.replay.cut_streams(base + np.arange(self.cfg.env.num_envs)))
        self.actor_incarnation[actor] = incarnation
        try:
            for t in range(rows["reward"].shape[0]):
                keep = self._continues(rows["obs"][t], streams)
                self.replay.add(rows["obs"][t][keep], rows["action"][t][keep], rows["reward"][t][keep],
                                rows["terminated"][t][keep], rows["truncated"][t][keep], streams[keep],
                                priority=rows["priority"][t][keep],
                                extras={k: rows[k][t][keep] for k in self.replay.extras})
        except ValueError:  # a stack that cannot be deduplicated: counted, the rest of the chunk dropped
            self.stats.add("samples_invalid")
            return
        steps = rows["reward"].size
        self.unreported_steps += steps
        self.stats.add("env_steps", steps)
        returns, lengths = episodes_from_meta(msg.meta, max_count=steps)
        self.returns += returns.tolist()
        self.lengths += lengths.tolist()
        self.wins += wins_from_meta(msg.meta, max_count=steps).tolist()  # SMAX's outcomes, for the trainer's win_rate
        self.actor_returns.setdefault(str(actor), []).extend(returns.tolist())
        if isinstance(msg.meta.get("epsilon"), float):
            self.epsilons[str(actor)] = msg.meta["epsilon"]

    def _continues(self, obs: np.ndarray, streams: np.ndarray) -> np.ndarray:
        """Rows to insert: all, except (frame dedup) a stream's first rows until a fresh stack starts one,
        since a stack that continues rows this shard never saw cannot be rebuilt (a restarted shard)."""
        keep = np.ones(streams.shape[0], bool)
        if self.replay.dedup:
            fresh = np.all(obs == obs[:, -1:], axis=tuple(range(1, obs.ndim)))
            keep = (self.replay.count[streams] > 0) | fresh
        return keep

    def _checked_rows(self, tree: Any) -> dict[str, np.ndarray]:
        spec = self.spec
        extras = replay_extras(self.cfg.algo, spec)
        if not isinstance(tree, dict) or set(tree) != {"obs", "action", "reward", "terminated", "truncated",
                                                       "priority", "env_id", *extras}:
            raise ValueError("not a chunk of replay rows")
        reward = tree["reward"]
        if not isinstance(reward, np.ndarray) or reward.ndim != 2 or 0 in reward.shape:
            raise ValueError("reward must be [T, k]")
        t, k = reward.shape
        env_id = check_array("env_id", tree["env_id"], (k,), "int32")
        if env_id.min() < 0 or env_id.max() >= self.cfg.env.num_envs or np.unique(env_id).size != k:
            raise ValueError("env ids must be distinct and < env.num_envs")
        return {"obs": check_array("obs", tree["obs"], (t, k, *spec.obs_shape), spec.obs_dtype),
                "action": check_array("action", tree["action"], (t, k, *spec.action_shape), spec.action_dtype),
                "reward": check_array("reward", reward, (t, k), "float32"),
                "terminated": check_array("terminated", tree["terminated"], (t, k), "bool"),
                "truncated": check_array("truncated", tree["truncated"], (t, k), "bool"),
                "priority": check_array("priority", tree["priority"], (t, k), "float32"), "env_id": env_id,
                **{name: check_array(name, tree[name], (t, k, *shape), dtype) for name, (shape, dtype) in extras.items()}}

    def _send_batch(self) -> None:
        a = self.cfg.algo
        progress = self.replay.inserted * num_shards(self.cfg) / self.cfg.total_env_steps  # of the run, roughly
        beta = a.replay.beta0 + (1.0 - a.replay.beta0) * min(1.0, progress)
        with self.stats.time("compute/sample"):
            batch, keys = self.replay.sample(a.batch_size, beta, self.rng)
        tree = {**batch._asdict(), "slot": keys.slot, "written": keys.written}
        if self._send(tree, {"beta": beta}):
            self.served += 1
            self.batches_sent += 1
            self.stats.add("batches")

    def _send(self, tree: dict[str, Any] | None, extra: dict[str, Any]) -> bool:
        """A batch (``tree``) or a report (None), with what was inserted since the last message that went out."""
        meta = {"shard": self.index, "incarnation": self.shard_incarnation, PRIORITIES: self.back.address,
                "served": self.served, "restored_step": self.restored_step,
                "env_steps": self.unreported_steps, "replay_size": self.replay.size, "epsilons": dict(self.epsilons),
                **episode_meta(self.returns, self.lengths, self.wins), "actor_returns": self.actor_returns, **extra}
        if not self.sender.send(tree if tree is not None else {}, timeout_ms=0, meta=meta):
            return False
        self.unreported_steps, self.returns, self.lengths, self.wins, self.actor_returns = 0, [], [], [], {}
        self.next_report = time.monotonic() + REPORT_S
        return True

    # -- snapshots ----------------------------------------------------------------------------------
    def save_snapshot(self, step: int) -> None:
        """Write the replay for the trainer's checkpoint ``step`` (``checkpoint.replay``), then delete the files
        of steps older than the newest complete one (``srljax.replay.snapshots``)."""
        if not self.cfg.checkpoint.replay or step <= self.snapshot_step:
            return  # already written (the final checkpoint can be the last periodic one)
        run_dir, shards = self.cfg.run_dir, num_shards(self.cfg)
        with self.stats.time("compute/snapshot"):
            path = replay_snapshots.write_shard(run_dir, step, self.index, shards, self.replay.state())
            replay_snapshots.prune(run_dir, shards)
        self.snapshot_step = step
        self.stats.add("snapshots")
        self.stats.gauge("snapshot_step", step)
        self.log(f"replay snapshot for checkpoint {step}: {self.replay.size:,} transitions -> {path}")

    def _load_snapshot(self) -> None:
        """``--resume``: the replay of the newest complete checkpoint step, the one the trainer restored (it was
        configured first and set newer steps without their replay aside)."""
        run_dir, shards = self.cfg.run_dir, num_shards(self.cfg)
        complete = replay_snapshots.complete_steps(run_dir, shards)
        if not complete:  # launchers refuse this resume (run_dir.resume_problems); a direct caller gets told
            raise RuntimeError(f"--resume: {replay_snapshots.resume_problem(run_dir, shards)}")
        step = complete[-1]
        self.replay.load_state(replay_snapshots.read_shard(run_dir, step, self.index, shards))
        self.replay.cut_streams(np.arange(self.replay.num_streams))  # the actors' envs are new
        replay_snapshots.drop_newer(run_dir, step, self.index)
        self.snapshot_step = self.restored_step = step
        self.log(f"--resume: {self.replay.size:,} transitions restored from the snapshot of checkpoint {step}")

    def _wait_final_save(self) -> None:
        """At stop: the trainer writes its final checkpoint while stopping and then says ``save``; wait for it."""
        deadline = time.monotonic() + FINAL_SAVE_WAIT_S
        while time.monotonic() < deadline:
            got = self.back.recv(timeout_ms=100)
            if got is not None and got[0] == KIND_SAVE:
                self.save_snapshot(int(got[1]))
                return
        self.log(f"no final checkpoint from the trainer within {FINAL_SAVE_WAIT_S:g} s; the newest replay snapshot "
                 f"is of checkpoint {self.snapshot_step}")

    # -- reporting ----------------------------------------------------------------------------------
    def waiting(self) -> str:
        replay = self.replay
        if replay is None:
            return "setup"
        return (f"holds {replay.size} sampleable transitions; {self.granted - self.served} batches asked for"
                + ("" if replay.size >= self.cfg.algo.batch_size else " (filling)"))

    def progress(self) -> int:
        return int(self.stats.counters["env_steps"] + self.stats.counters["batches"])

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.replay is not None:
            out |= {"replay_size": self.replay.size, "replay_inserted": self.replay.inserted,
                    "priorities_applied": self.priorities_applied, "replay_snapshot_step": self.snapshot_step,
                    "replay_restored_step": self.restored_step}
        for name, endpoint in (("receiver", self.receiver), ("sender", self.sender), ("back", self.back)):
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        return out

    def close(self) -> None:
        if self.back is not None and self.state != "error" and self.cfg.checkpoint.replay and self.cfg.checkpoint.final:
            self._wait_final_save()
        for thing in (self.receiver, self.sender, self.back):
            if thing is not None:
                thing.close()
