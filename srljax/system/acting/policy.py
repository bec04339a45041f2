"""PolicyWorker: batches inference requests from many actors and answers them with one jitted ``act``.

    worker = PolicyWorker(cfg, index=0, names=names)  # run by a backend: worker.run()

Each poll drains the ROUTER; requests accumulate until they hold every row the actors can have
in flight (``num_actors x env.num_envs``) or the oldest has waited ``batch_wait_s`` (default 0:
whatever is queued), then their
observations are concatenated, padded to a power-of-two bucket (a handful of compiled shapes
instead of one per batch size), acted on, and the rows are split back into one reply per request
(action and extras packed into one byte row per env, ``ReplyPacking``), stamped with the params
version used. New params (trainer PUB) are swapped in by version. A
request with zero rows is a version probe and is answered at once.

Feed-forward policies act from ``algo.initial_actor_state`` every call. A recurrent policy's carries
live here, one per ``(actor, env)`` row (``CarryStore``, ``srljax/system/acting/carries.py``): each actor
sends all its requests to one policy worker, tagged per row with env id, episode start and a
sequence number; the rows' carries are gathered before ``act`` (which resets them at episode
starts) and stored back after it.

Several policies: a policy worker serves only the remote ones (inference is chosen per policy, ``PolicyConfig.
inference``): it follows their params streams only, and its requests are their agents' rows ``[B, N_s, F_p]``
(``algos/multi_policy.py``, ``served_spec``), which the actor cuts from the env's and merges back with the
actions of the policies it acts inline. ``agent_rows`` counts the agents' rows served (env rows x N_s).
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import numpy as np
import zmq

import algos
from srljax.comm import InferenceServer, NameResolver, Request
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import INFERENCE, POLICY, actor_envs_per_recv
from srljax.learning.acting import jit_act, warm_up
from srljax.system.acting.carries import CarryStore, checked_tags
from srljax.system.acting.packing import ReplyPacking
from srljax.system.acting.policy_streams import make_follower
from srljax.system.shell.common import bind_address, checked_obs
from srljax.system.shell.worker import Worker
from srljax.system.training.params import ParamsCodec


def buckets(smallest: int, largest: int) -> list[int]:
    """``buckets(4, 20) == [4, 8, 16, 32]``: padded batch sizes, doubling from ``smallest`` past ``largest``."""
    out = [max(1, smallest)]
    while out[-1] < largest:
        out.append(out[-1] * 2)
    return out


class PolicyWorker(Worker):
    role = POLICY
    placement = POLICY
    serves = (INFERENCE,)
    batch_wait_s = 0.0
    """How long the oldest request may wait for more to batch with. 0: answer whatever is queued
    at once; batches still grow by themselves while ``act`` runs (requests queue meanwhile), and
    on small networks one ``act`` call (~0.2 ms on a laptop core) costs less than any wait."""

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close``, ``metrics`` and ``waiting`` run after a partial setup too);
        # ``setup`` also replaces ``self.key`` (the worker's key, which the control thread has read by then) with the
        # PRNG key of its ``act`` calls
        self.algo: Any = None
        self.packing: ReplyPacking | None = None
        self.act: Any = None  # the jitted ``act`` (``jit_act``)
        self.max_rows = 0
        self.buckets: list[int] = []
        self.server: InferenceServer | None = None
        self.follower: Any = None  # a ParamsFollower or a MultiFollower (several policies)
        self.recurrent = False
        self.carries: CarryStore | None = None
        self.pending: list[tuple[Request, np.ndarray]] = []
        self.pending_rows = 0
        self.oldest = 0.0
        self.served: tuple[str, ...] = ()  # several policies: the remote ones, which this worker serves
        self.rows_spec: Any = None  # what one request row is: the env's, or the served agents' rows

    def setup(self) -> None:
        cfg = self.cfg
        if self.spec is None:
            raise RuntimeError("the configure message carried no env spec")
        if self.plan.inference:  # several policies: only the remote ones, on their agents' rows
            from algos.multi_policy import make_multi_policy, served_spec

            self.served = self.plan.served("remote")
            self.algo = make_multi_policy(cfg, self.spec, self.served, rows=True)
            self.rows_spec = served_spec(cfg, self.spec, self.served)
        else:
            self.algo = algos.make(cfg, self.spec)
            self.rows_spec = self.spec
        self.packing = ReplyPacking(self.rows_spec, self.algo.extras_spec)
        self.act = jit_act(self.algo, self.packing)
        self.key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 2000 + self.index)
        self.max_rows = cfg.layout.num_actors * cfg.env.num_envs
        self.buckets = buckets(actor_envs_per_recv(cfg), self.max_rows)
        self.server = InferenceServer(bind_address(cfg), self.trial, ctx=self.ctx)
        self.register(INFERENCE, self.server.address)
        codec = ParamsCodec(self.algo)
        warm_up(self.act, self.algo, codec.zeros(), self.rows_spec, self.buckets)
        # follows a restarted trainer; one stream per (remote) policy
        self.follower = make_follower(self, codec, self.served if self.plan.inference else None)
        self.recurrent = bool(jax.tree.leaves(self.algo.initial_actor_state(1)))
        self.carries = CarryStore(self.algo.initial_actor_state, cfg.env.num_envs, cfg.layout.num_actors) if self.recurrent else None
        self.pending = []
        self.pending_rows = 0
        self.oldest = 0.0
        served = (f"; policies {', '.join(self.served)} (agents {list(self.rows_spec_agents())})"
                  if self.plan.inference else "")
        self.log(f"serving {self.server.address}; buckets {self.buckets}{served}")

    def rows_spec_agents(self) -> tuple[int, ...]:
        from algos.multi_policy import served_agents

        return served_agents(self.cfg, self.served)

    def poll(self) -> None:
        with self.stats.time("wait/params"):
            self.follower.poll(timeout_ms=0 if self.follower.params is not None else 50)
        if self.follower.params is None:
            return  # requests wait in the socket until the first params arrive
        if self.pending:  # zmq polls in whole milliseconds: round up, never spin
            wait_ms = max(0, math.ceil((self.oldest + self.batch_wait_s - time.monotonic()) * 1000))
        else:
            wait_ms = 20
        with self.stats.time("wait/requests"):
            requests = self.server.poll_requests(timeout_ms=wait_ms)
        for request in requests:
            obs = request.tree.get("obs") if isinstance(request.tree, dict) else None
            try:
                obs = checked_obs(obs, self.rows_spec, self.max_rows)
                if self.recurrent and len(obs):
                    checked_tags(request.tree, len(obs), self.spec.num_envs, self.cfg.layout.num_actors)
            except ValueError:
                self.stats.add("requests_invalid")
                continue
            if not len(obs):  # a version probe from an actor waiting for newer params
                self.server.reply(request, {}, version=self.follower.version)
                self.stats.add("version_probes")
                continue
            if not self.pending:
                self.oldest = time.monotonic()
            self.pending.append((request, obs))
            self.pending_rows += len(obs)
        self.stats.gauge("queue/pending_rows", self.pending_rows)
        if self.pending and (self.pending_rows >= self.max_rows or time.monotonic() - self.oldest >= self.batch_wait_s):
            self._flush()

    def _flush(self) -> None:
        while self.pending:
            take, rows = [], 0
            while self.pending and (not take or rows + len(self.pending[0][1]) <= self.buckets[-1]):
                take.append(self.pending.pop(0))
                rows += len(take[-1][1])
            self._answer(take, rows)
        self.pending_rows = 0

    def _answer(self, batch: list[tuple[Request, np.ndarray]], rows: int) -> None:
        size = next((b for b in self.buckets if b >= rows), rows)
        obs = np.concatenate([o for _, o in batch])
        if size > rows:
            obs = np.concatenate([obs, np.zeros((size - rows, *obs.shape[1:]), obs.dtype)])
        first = None if self.carries is None else np.zeros(size, bool)
        if self.carries is None:
            state = self.algo.initial_actor_state(size)
        else:
            tags = [checked_tags(r.tree, len(o), self.spec.num_envs, self.cfg.layout.num_actors) for r, o in batch]
            parts = [self.carries.gather(actor, ids, seq) for actor, ids, seq, _ in tags]
            pad = jax.tree.map(np.asarray, self.algo.initial_actor_state(size - rows))
            state = jax.tree.map(lambda *xs: np.concatenate(xs), *parts, pad)
            first[:rows] = np.concatenate([f for *_, f in tags])
        with self.stats.time("compute/act"):
            packed, state, self.key = self.act(self.follower.params, obs, state, first, self.key)
            packed = np.asarray(packed)
        if self.carries is not None:
            state, start = jax.device_get(state), 0
            for actor, ids, seq, _ in tags:
                self.carries.scatter(actor, ids, seq, jax.tree.map(lambda x: x[start:start + len(ids)], state))
                start += len(ids)
            self.stats.gauge("carries/resent_rows", self.carries.resent_rows)
        start = 0
        for request, o in batch:
            self.server.reply(request, {"rows": packed[start:start + len(o)]}, version=self.follower.version)
            start += len(o)
        self.stats.add("batches")
        self.stats.add("requests", len(batch))
        self.stats.add("rows", rows)
        self.stats.add("agent_rows", rows * self.rows_spec.num_agents)  # envs x the served agents        self.stats.sample("batch/rows", rows)
        self.stats.sample("batch/fill", rows / size)

    def progress(self) -> int:
        return int(self.stats.counters["rows"])

    def waiting(self) -> str:
        follower = self.follower
        if follower is not None and follower.params is None:
            return "params: none received yet"
        return f"requests: {self.pending_rows} rows pending"

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.server is not None:
            out.update({f"inference/{k}": v for k, v in self.server.counters().items()})
        if self.follower is not None:
            out.update({f"params/{k}": v for k, v in self.follower.sub.counters().items()})
        return out

    def close(self) -> None:
        for thing in (self.server, self.follower):
            if thing is not None:
                thing.close()
