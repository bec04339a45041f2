"""ActorWorker: steps an envpool env ring, gets actions inline or from policy workers, pushes segments.

    worker = ActorWorker(cfg, index=0, names=names)   # run by a backend: worker.run()

The ring is one envpool instance in async mode: ``env.num_envs`` envs, ``recv`` returns
``env.num_envs / layout.ring_size`` of them, so ``ring_size`` batches are in flight and envs step
while inference runs. Each recv'd batch is acted on

* inline: the jitted ``algo.act`` in this process (params from the trainer's PUB), as in
  ``srljax.train``; or
* remote: an ``InferenceClient`` request (id = a counter) to the policy workers, up to
  ``ring_size`` in flight; replies come back in any order and are matched by id.

Rows go into a ``SegmentBuilder`` (per-env columns, exact under async envs); a full segment
``[T+1, env.num_envs]`` tagged with its oldest policy version is pushed to the sample sink with
the true returns of the games that ended since the last push in ``meta``.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Any

import jax
import numpy as np

import algos
import envs
from srljax.comm import InferenceClient, SampleSender
from srljax.layout import actor_envs_per_recv, build_layout
from srljax.rollout import SegmentBuilder
from srljax.system.common import ParamsCodec, ParamsFollower, episode_meta, jit_act
from srljax.system.worker import Worker
from srljax.types import TimeStep, Trajectory

SEND_HWM = 2  # segments queued here: backpressure from a busy trainer reaches the envs soon
PUSH_WAIT_MS = 50  # then return to the loop (control commands) and retry
REQUEST_RETRY_S = 10.0  # re-send a request this old: a reply dropped at a full socket must not stall the ring


class ActorWorker(Worker):
    role = "actor"

    def setup(self) -> None:
        cfg, layout = self.cfg, build_layout(self.cfg)
        self.remote = cfg.layout.inference == "remote"
        env_cfg = dataclasses.replace(cfg.env, batch_size=actor_envs_per_recv(cfg))
        # distinct seeds per actor: envpool seeds env i with seed + i
        self.env = envs.make(env_cfg, seed=cfg.seed + self.index * cfg.env.num_envs)
        self.spec = self.env.spec
        self.algo = algos.make(cfg, self.spec)
        self.builder = SegmentBuilder(self.spec, cfg.algo.num_steps, self.algo.extras_spec)
        self.sender = SampleSender(None, self.trial, ctx=self.ctx, hwm=SEND_HWM)
        sink = layout.sample_sink()
        for i in range(layout.count(sink)):
            self.sender.connect(self.lookup(sink, i, "samples"))
        self.outgoing: deque[tuple[Trajectory, dict[str, Any]]] = deque()
        self.returns: list[float] = []
        self.lengths: list[int] = []
        if self.remote:
            if jax.tree.leaves(self.algo.initial_actor_state(1)):
                raise ValueError("remote inference supports feed-forward policies only; use layout.inference=inline")
            self.client = InferenceClient(None, self.trial, ctx=self.ctx)
            for i in range(layout.count("policy")):
                self.client.connect(self.lookup("policy", i, "inference"))
            self.in_flight: dict[int, tuple[TimeStep, float, float]] = {}  # id -> (batch, sent at, retry at)
            self.next_request = 0
            self.stepping = cfg.layout.ring_size  # batches inside envpool
        else:
            self.follower = ParamsFollower(cfg, self.names, ParamsCodec(self.algo), self.stats, self.ctx)
            self.act = jit_act(self.algo)
            self.actor_state = self.algo.initial_actor_state(self.spec.num_envs)
            self.key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1000 + self.index)
        self.env.async_reset()
        self.log(f"{self.spec.num_envs} envs {self.spec.id}, {self.spec.batch_size} per recv, "
                 f"{'remote' if self.remote else 'inline'} inference")

    def poll(self) -> None:
        if self.outgoing and not self._push():
            return  # the sink is full: stepping on would only pile up segments here
        if self.remote:
            self._poll_remote()
        else:
            self._poll_inline()

    # -- inline ----------------------------------------------------------------------------------
    def _poll_inline(self) -> None:
        self.follower.poll(timeout_ms=0 if self.follower.params is not None else 50)
        if self.follower.params is None:
            return
        with self.stats.time("wait/env"):
            ts = self.env.recv()
        ids = ts.env_id
        with self.stats.time("compute/act"):
            rows_state = jax.tree.map(lambda x: x[ids], self.actor_state)
            action, extras, rows_state, self.key = self.act(self.follower.params, ts.obs, rows_state, self.key)
            action, extras = jax.device_get((action, extras))
        self.env.send(action, ids)
        self.actor_state = jax.tree.map(lambda x, y: x.at[ids].set(y), self.actor_state, rows_state)
        self._record(ts, action, extras, self.follower.version)

    # -- remote ----------------------------------------------------------------------------------
    def _poll_remote(self) -> None:
        self._take_replies(timeout_ms=0)
        if self.stepping > 0:
            with self.stats.time("wait/env"):
                ts = self.env.recv()
            self.stepping -= 1
            rid, self.next_request = self.next_request, self.next_request + 1
            self.in_flight[rid] = (ts, 0.0, 0.0)
            self._send_request(rid)
        else:
            with self.stats.time("wait/inference"):
                self._take_replies(timeout_ms=50)
        now = time.monotonic()
        for rid, (_, _, retry_at) in list(self.in_flight.items()):
            if now > retry_at:
                self.stats.add("requests_resent")
                self._send_request(rid)
        self.stats.gauge("queue/requests_in_flight", len(self.in_flight))

    def _send_request(self, rid: int) -> None:
        ts = self.in_flight[rid][0]
        with self.stats.time("wait/request_send"):
            ok = self.client.send(rid, {"obs": ts.obs}, timeout_ms=100)
        now = time.monotonic()
        # unsent (no policy worker took it within 100 ms): try again soon, not after the full retry time
        self.in_flight[rid] = (ts, now, now + (REQUEST_RETRY_S if ok else 0.1))
        self.stats.add("requests" if ok else "request_send_timeouts")

    def _take_replies(self, timeout_ms: int) -> None:
        reply = self.client.recv(timeout_ms=timeout_ms)
        while reply is not None:
            entry = self.in_flight.get(reply.request_id)
            action = extras = None
            if entry is not None and isinstance(reply.tree, dict):
                action, extras = reply.tree.get("action"), reply.tree.get("extras")
            n = 0 if entry is None else len(entry[0].env_id)
            if entry is None:
                self.stats.add("replies_unknown")  # a duplicate after a resend
            elif not self._reply_fits(action, extras, n):
                self.stats.add("replies_invalid")  # leave it in flight: the resend asks again
            else:
                ts, sent, _ = self.in_flight.pop(reply.request_id)
                self.stats.sample("latency/inference_ms", (time.monotonic() - sent) * 1000)
                self.env.send(action, ts.env_id)
                self.stepping += 1
                self._record(ts, action, extras, reply.version)
            reply = self.client.recv(timeout_ms=0)

    def _reply_fits(self, action: Any, extras: Any, n: int) -> bool:
        if not isinstance(action, np.ndarray) or action.shape != (n, *self.spec.action_shape):
            return False
        if action.dtype != np.dtype(self.spec.action_dtype) or not isinstance(extras, dict):
            return False
        return all(isinstance(extras.get(k), np.ndarray) and extras[k].shape == (n, *shape)
                   and extras[k].dtype == np.dtype(dtype) for k, (shape, dtype) in self.algo.extras_spec.items())

    # -- segments --------------------------------------------------------------------------------
    def _record(self, ts: TimeStep, action: np.ndarray, extras: dict[str, np.ndarray], version: int) -> None:
        self.builder.add(ts, action, extras, version)
        ended = ~np.isnan(ts.episode_return)
        self.returns += ts.episode_return[ended].tolist()
        self.lengths += ts.episode_length[ended].tolist()
        self.stats.add("env_steps", len(ts.env_id))
        self.stats.add("episodes", int(ended.sum()))
        if self.builder.ready(self.spec.num_envs):
            segment = self.builder.pop(self.spec.num_envs)  # fresh arrays: safe to send zero-copy
            self.outgoing.append((segment, episode_meta(self.returns, self.lengths)))
            self.returns, self.lengths = [], []
            self._push()

    def _push(self) -> bool:
        """Send queued segments; False if the sink stayed full for ``PUSH_WAIT_MS``."""
        while self.outgoing:
            segment, meta = self.outgoing[0]
            with self.stats.time("wait/push"):
                ok = self.sender.send(segment, timeout_ms=PUSH_WAIT_MS, version=int(segment.policy_version.min()),
                                      meta={**meta, "actor": self.index})
            if not ok:
                return False
            self.outgoing.popleft()
            self.stats.add("segments")
        return True

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queue/segments_waiting": len(getattr(self, "outgoing", ()))}
        for name in ("sender", "client"):
            endpoint = getattr(self, name, None)
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        follower = getattr(self, "follower", None)
        if follower is not None:
            out.update({f"params/{k}": v for k, v in follower.sub.counters().items()})
        return out

    def close(self) -> None:
        for name in ("env", "sender", "client", "follower"):
            thing = getattr(self, name, None)
            if thing is not None:
                thing.close()
