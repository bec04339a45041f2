"""ApexActorWorker: an Ape-X actor; acts with its own exploration, computes initial priorities, feeds one shard.

    worker = ApexActorWorker(cfg, index=2, names=names)   # run by a backend for algo=dqn, distributed

The actor role for a replay algorithm (``srljax.layout.REPLAY_WORKERS``): it steps its envpool ring like
``ActorWorker`` and acts inline (``srljax.learning.acting.Acting``) with the newest params, every row with actor
i of N's exploration values (``Algorithm.exploration``: DQN's Ape-X epsilon; SAC's and TD3's random start)
held in its actor state. Rows are kept per env (``RowChunker``); once whole windows are there they get
initial priorities from what acting computed (``Algorithm.initial_priorities``) and go as one chunk to shard
``i % S``, always the same one (``srljax.replay.apex``). It waits only for a full shard (``MAX_QUEUED``) and,
with ``algo.throttle`` ``both`` or ``inserts``, beyond its share of inserts (``actor_allowance``), with an
escape when no params come for a while. A full replay never blocks it: the shard overwrites its oldest rows.
``docs/architecture.md``, "Ape-X".
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import jax
import numpy as np
import zmq

import algos
import envs
from srljax.comm import NameResolver, SampleSender
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import ACTOR, BUFFER, PARAMS, SAMPLES, TRAINER, actor_envs_per_recv
from srljax.learning.acting import Acting
from srljax.replay.apex import actor_allowance, shard_of
from srljax.replay.buffer import replay_extras
from srljax.system.acting.actor import ActorWorker
from srljax.system.acting.escape import StarvationEscape
from srljax.system.shell.common import episode_meta
from srljax.system.training.params import ParamsCodec, ParamsFollower
from srljax.types import EnvSpec, TimeStep

SEND_HWM = 2
MAX_QUEUED = 2
WAIT_MS = 20


class RowChunker:
    """Per-env rows until ``T + n`` are held; then the first ``T`` leave with their initial priorities.

        chunker = RowChunker(spec, num_steps=50, algo=algo)   # algo.priority_lookahead rows ahead (DQN: n_step)
        chunker.add(ts, action, extras)          # extras: act's, by name (DQN: q_taken, q_max [B])
        if chunker.ready():
            chunk = chunker.pop()                # {obs [T, k, *O], ..., priority [T, k], env_id [k]}
    """

    def __init__(self, spec: EnvSpec, num_steps: int, algo: Any, stored: tuple[str, ...] = ()):
        self.num_steps, self.n_step, self.priorities = num_steps, algo.priority_lookahead, algo.initial_priorities
        self.stored = stored  # act's extras the replay keeps with each row (R2D2: the carry), sent in the chunk
        rows, n = num_steps + self.n_step, spec.num_envs
        self.store = {"obs": np.zeros((rows, n, *spec.obs_shape), spec.obs_dtype),
                      "action": np.zeros((rows, n, *spec.action_shape), spec.action_dtype),
                      "reward": np.zeros((rows, n), np.float32), "terminated": np.zeros((rows, n), bool),
                      "truncated": np.zeros((rows, n), bool),
                      **{k: np.zeros((rows, n, *shape), dtype) for k, (shape, dtype) in algo.extras_spec.items()}}
        self.pos = np.zeros(n, np.int64)
        self.ready_chunks: dict[int, deque[dict[str, np.ndarray]]] = {}  # env -> its chunks (T rows each), in order

    def add(self, ts: TimeStep, action: np.ndarray, extras: dict[str, np.ndarray]) -> None:
        ids = np.asarray(ts.env_id)
        rows = self.pos[ids]
        values = {"obs": ts.obs, "action": action, "reward": ts.reward, "terminated": ts.terminated,
                  "truncated": ts.truncated, **extras}
        for name, store in self.store.items():
            store[rows, ids] = values[name]
        self.pos[ids] += 1
        for env in ids[self.pos[ids] == self.num_steps + self.n_step]:
            self._finish(int(env))

    def _finish(self, env: int) -> None:
        t, s = self.num_steps, {k: v[:, env] for k, v in self.store.items()}
        chunk = {k: s[k][:t].copy() for k in ("obs", "action", "reward", "terminated", "truncated", *self.stored)}
        chunk["priority"] = (np.ones(t, np.float32) if self.priorities is None
                             else np.asarray(self.priorities(s), np.float32))
        self.ready_chunks.setdefault(env, deque()).append(chunk)
        for store in self.store.values():  # the last n rows start the next chunk
            store[: self.n_step, env] = store[t:, env]
        self.pos[env] = self.n_step

    def ready(self, envs: int) -> bool:
        """Every env has a chunk, or one env is a whole chunk ahead (async envs): send what there is."""
        return len(self.ready_chunks) >= envs or any(len(q) > 1 for q in self.ready_chunks.values())

    def pop(self) -> dict[str, np.ndarray]:
        """The oldest chunk of every env that has one, as one ``[T, k]`` message tree (``env_id`` [k] int32)."""
        ids = sorted(self.ready_chunks)
        chunks = [self.ready_chunks[env].popleft() for env in ids]
        for env in ids:
            if not self.ready_chunks[env]:
                del self.ready_chunks[env]
        out = {k: np.stack([c[k] for c in chunks], axis=1) for k in chunks[0]}
        out["env_id"] = np.asarray(ids, np.int32)
        return out


class ApexActorWorker(ActorWorker):
    role = ActorWorker.role
    placement = ActorWorker.placement

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes beyond ``ActorWorker``'s attributes (None until then)
        self.explore: dict[str, Any] = {}
        self.epsilon: float | None = None
        self.env_steps = 0
        self.shard = -1
        self.chunker: RowChunker | None = None
        self.rows_sent = 0
        self.start_version = -1
        self.throttle = False

    def setup(self) -> None:
        cfg = self.cfg
        self.remote = False  # apex_problems refuses remote inference
        env_cfg = dataclasses.replace(cfg.env, batch_size=actor_envs_per_recv(cfg))
        self.env = envs.make(env_cfg, seed=cfg.seed + self.index * cfg.env.num_envs)
        self.spec = self.env.spec
        self.algo = algos.make(cfg, self.spec)
        self.explore = self.algo.exploration(0, self.index, cfg.layout.num_actors)
        self.epsilon = self.explore.get("epsilon")  # reported to the replay buffer and trainer when there is one
        self.env_steps = 0  # this actor's, the clock of its exploration values
        self.shard = shard_of(self.index, cfg)
        self.sender = SampleSender(None, self.trial, ctx=self.ctx, hwm=SEND_HWM, **self.samples_options(sender=True))
        if not self.connect_peers(self.sender, BUFFER, SAMPLES, [self.shard]):  # follows a restarted shard
            raise RuntimeError(f"the configure message named no replay buffer worker {self.shard} to push to")
        key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1000 + self.index)
        self.acting = Acting(self.algo, self.spec.num_envs, key)
        for key, value in self.explore.items():
            self.acting.actor_state[key][:] = value
        codec = ParamsCodec(self.algo)
        self.acting.warm_up(codec.zeros(), self.spec)
        self.follower = ParamsFollower(self.trial, self.peers_of(TRAINER, PARAMS), codec, self.stats, self.ctx)
        self.follow_peers(self.follower.sub, TRAINER, PARAMS)
        self.chunker = RowChunker(self.spec, cfg.algo.num_steps, self.algo, tuple(replay_extras(cfg.algo, self.spec)))
        self.outgoing = deque()  # (chunk, meta)
        self.returns = []
        self.lengths = []
        self.wins = []  # outcomes of ended episodes where the env reports them (a JAX env's: SMAX)
        self.rows_sent = 0
        self.start_version = -1  # the first params version seen: the throttle counts updates since then
        self.throttle = cfg.algo.throttle in ("both", "inserts")
        self.bonus = 0.0  # rows granted by ``_escape`` beyond the allowance
        self.escape = StarvationEscape()
        self.blocked = ""
        for key, value in self.explore.items():
            self.stats.gauge(key, value)
        self.env.async_reset()
        explore = ", ".join(f"{k} {v:.4g}" for k, v in self.explore.items())
        self.log(f"{self.spec.num_envs} envs {self.spec.id}, {explore or 'no exploration values'}, feeds replay buffer "
                 f"worker {self.shard}; chunks of {cfg.algo.num_steps} rows + {self.chunker.n_step} for the priorities' "
                 "look-ahead")

    def poll(self) -> None:
        if len(self.outgoing) >= MAX_QUEUED:
            with self.stats.time("wait/push"):
                self._push(WAIT_MS)
            if len(self.outgoing) >= MAX_QUEUED:
                self.blocked = f"replay buffer worker {self.shard} full: {len(self.outgoing)} chunks wait"
                return
        else:
            self._push(0)
        self.follower.poll(timeout_ms=0 if self.follower.params is not None else 50)
        if self.follower.params is None:
            self.blocked = "params: none received yet"
            return
        self.escape.saw(self.follower.version)
        if self.start_version < 0:
            self.start_version = self.follower.version
        self._follow_exploration()
        allowed = actor_allowance(self.cfg, self.follower.version, self.index, since=self.start_version)
        if self.throttle and self.rows_sent > allowed + self.bonus:
            if not self._escape():
                self.blocked = (f"replay ratio: inserted {self.rows_sent} env steps by params version "
                                f"{self.follower.version}, waits for a newer one")
                with self.stats.time("wait/replay_ratio"):
                    self.follower.poll(timeout_ms=WAIT_MS)
                return
        with self.stats.time("wait/env"):
            ts = self.env.recv()
        if self._empty(ts):
            return
        self._outcomes(ts)
        self.blocked = ""
        with self.stats.time("compute/act"):
            action, extras = self.acting.act(self.follower.params, ts)
        self.env.send(action, ts.env_id)
        self._record_rows(ts, action, extras)

    def _follow_exploration(self) -> None:
        """The exploration values for the trial's env steps so far (see the module docstring), into every env's actor
        state when they change."""
        n = self.cfg.layout.num_actors
        steps = self.env_steps * n + (self.cfg.algo.learning_starts if self.start_version > 0 else 0)
        explore = self.algo.exploration(steps, self.index, n)
        if explore == self.explore:
            return
        self.explore = explore
        self.epsilon = explore.get("epsilon")
        for key, value in explore.items():
            self.acting.actor_state[key][:] = value
            self.stats.gauge(key, value)

    def _escape(self) -> bool:
        """The trainer has published nothing new for a while (``srljax/system/acting/escape.py``): it may be starved (a
        restarted shard that lost the rows it would sample), so this actor may insert one more chunk."""
        if not self.escape.due():
            return False
        self.bonus += self.cfg.algo.num_steps * self.spec.num_envs
        self.stats.add("throttle_escapes")
        return True

    def _record_rows(self, ts: TimeStep, action: np.ndarray, extras: dict[str, np.ndarray]) -> None:
        ended = ~np.isnan(ts.episode_return)
        self.returns += ts.episode_return[ended].tolist()
        self.lengths += ts.episode_length[ended].tolist()
        self.stats.add("env_steps", len(ts.env_id))
        self.env_steps += len(ts.env_id)
        self.stats.add("episodes", int(ended.sum()))
        self.chunker.add(ts, action, extras)
        while self.chunker.ready(self.spec.num_envs):
            self._queue_chunk()

    def _queue_chunk(self) -> None:
        if not self.chunker.ready_chunks:
            return
        meta = {**episode_meta(self.returns, self.lengths, self.wins), **({} if self.epsilon is None else {"epsilon": float(self.epsilon)}),
                "incarnation": self.incarnation}
        self.outgoing.append((self.chunker.pop(), meta))
        self.returns, self.lengths, self.wins = [], [], []
        self._push(0)

    def _push(self, timeout_ms: int) -> None:
        while self.outgoing:
            tree, meta = self.outgoing[0]
            if not self.sender.send(tree, timeout_ms=timeout_ms, version=self.follower.version,
                                    meta={**meta, ACTOR: self.index}):
                return
            self.outgoing.popleft()
            self.rows_sent += tree["reward"].size
            self.stats.add("segments")

    def waiting(self) -> str:
        return self.blocked

    def metrics(self) -> dict[str, Any]:
        return {**super().metrics(), "epsilon": self.epsilon, "rows_sent": self.rows_sent}
