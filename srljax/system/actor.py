"""ActorWorker: steps an envpool env ring, gets actions inline or from policy workers, pushes segments.

    worker = ActorWorker(cfg, index=0, names=names)   # run by a backend: worker.run()

The ring is one envpool instance in async mode: ``env.num_envs`` envs, ``recv`` returns
``env.num_envs / layout.ring_size`` of them, so ``ring_size`` batches are in flight and envs step
while inference runs. Each recv'd batch is acted on

* inline: the jitted ``algo.act`` in this process (params from the trainer's PUB), as in
  ``srljax.train``; or
* remote: a request to the policy workers (``PolicyClient``), up to ``ring_size`` in flight.

Rows go into a ``SegmentBuilder`` (per-env columns, exact under async envs); a full segment
``[T+1, env.num_envs]`` tagged with its oldest policy version is pushed to the sample sink with
the true returns of the games that ended since the last push in ``meta``.

Policy lag is bounded at the source: an actor pushes one segment per params version it has
seen, then stops stepping until a newer version arrives (it has the next segment ready by then:
collection overlaps the update, one segment ahead, as in Cleanba). The trainer uses one segment
per actor per update, so production matches consumption and lag stays at 0-1. Socket high-water
marks alone cannot do this: small segments (CartPole) pile up by the hundred in kernel socket
buffers, where they go stale. A segment that is already staler than ``trainer.max_policy_lag``
against the newest version the actor knows is dropped here (and counted) rather than sent, so
the trainer never drops one it needs: it can never be waiting for a segment that an actor holds
back until the next version.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import jax
import numpy as np

import algos
import envs
from srljax.comm import InferenceClient, SampleSender
from srljax.layout import actor_envs_per_recv, build_layout
from srljax.rollout import SegmentBuilder
from srljax.system.common import episode_meta, jit_act, warm_up
from srljax.system.params import ParamsCodec, ParamsFollower
from srljax.system.policy_client import PolicyClient
from srljax.system.worker import Worker
from srljax.types import TimeStep, Trajectory

SEND_HWM = 2  # segments queued in this socket
PUSH_WAIT_MS = 50  # then return to the loop (control commands) and retry
SEGMENTS_PER_VERSION = 1  # segments pushed per params version seen, before waiting for a newer one


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
        self.pushed_version, self.pushed_at_version = -1, 0
        if self.remote:
            if jax.tree.leaves(self.algo.initial_actor_state(1)):
                raise ValueError("remote inference supports feed-forward policies only; use layout.inference=inline")
            client = InferenceClient(None, self.trial, ctx=self.ctx)
            for i in range(layout.count("policy")):
                client.connect(self.lookup("policy", i, "inference"))
            self.policy = PolicyClient(client, self.spec, self.algo.extras_spec, self.stats)
            self.stepping = cfg.layout.ring_size  # batches inside envpool
        else:
            codec = ParamsCodec(self.algo)
            self.act = jit_act(self.algo)
            warm_up(self.act, self.algo, codec, self.spec, [self.spec.batch_size])
            self.follower = ParamsFollower(cfg, self.names, codec, self.stats, self.ctx)
            self.actor_state = self.algo.initial_actor_state(self.spec.num_envs)
            self.key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1000 + self.index)
        self.env.async_reset()
        self.log(f"{self.spec.num_envs} envs {self.spec.id}, {self.spec.batch_size} per recv, "
                 f"{'remote' if self.remote else 'inline'} inference")

    @property
    def newest_version(self) -> int:
        return self.policy.newest_version if self.remote else self.follower.version

    def poll(self) -> None:
        if self.outgoing and not self._push():
            self._wait_for_newer_params()  # or for room in the sink; stepping on would pile up segments
        elif self.remote:
            self._poll_remote()
        else:
            self._poll_inline()

    def _wait_for_newer_params(self) -> None:
        with self.stats.time("wait/lag_limit"):
            if not self.remote:
                self.follower.poll(timeout_ms=20)
                return
            if not self.policy.in_flight:  # nothing coming back that would tell us the version
                self.policy.probe()
            for ts, action, extras, version in self.policy.replies(timeout_ms=20):
                self._apply(ts, action, extras, version)

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
        for reply in self.policy.replies(timeout_ms=0):
            self._apply(*reply)
        if self.stepping > 0:
            with self.stats.time("wait/env"):
                ts = self.env.recv()
            self.stepping -= 1
            self.policy.request(ts)
        else:
            with self.stats.time("wait/inference"):
                replies = self.policy.replies(timeout_ms=50)
            for reply in replies:
                self._apply(*reply)
        self.policy.resend_overdue()
        self.stats.gauge("queue/requests_in_flight", len(self.policy.in_flight))

    def _apply(self, ts: TimeStep, action: np.ndarray, extras: dict[str, np.ndarray], version: int) -> None:
        self.env.send(action, ts.env_id)
        self.stepping += 1
        self._record(ts, action, extras, version)

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
        """Send queued segments; False if the lag limit holds them back or the sink stayed full."""
        while self.outgoing:
            if self.newest_version > self.pushed_version:
                self.pushed_version, self.pushed_at_version = self.newest_version, 0
            if self.pushed_at_version >= SEGMENTS_PER_VERSION:
                return False
            segment, meta = self.outgoing[0]
            if self.newest_version - int(segment.policy_version.min()) > self.cfg.trainer.max_policy_lag:
                self.outgoing.popleft()  # the trainer would drop it; its episodes still count
                self.stats.add("dropped_stale_columns", segment.reward.shape[1])
                if self.outgoing:
                    self.outgoing[0][1]["episode_returns"][:0] = meta["episode_returns"]
                    self.outgoing[0][1]["episode_lengths"][:0] = meta["episode_lengths"]
                else:
                    self.returns[:0], self.lengths[:0] = meta["episode_returns"], meta["episode_lengths"]
                continue
            with self.stats.time("wait/push"):
                ok = self.sender.send(segment, timeout_ms=PUSH_WAIT_MS, version=int(segment.policy_version.min()),
                                      meta={**meta, "actor": self.index})
            if not ok:
                return False
            self.outgoing.popleft()
            self.pushed_at_version += 1
            self.stats.add("segments")
        return True

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queue/segments_waiting": len(getattr(self, "outgoing", ()))}
        endpoints = {"sender": getattr(self, "sender", None), "client": getattr(getattr(self, "policy", None), "client", None),
                     "params": getattr(getattr(self, "follower", None), "sub", None)}
        for name, endpoint in endpoints.items():
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        return out

    def close(self) -> None:
        for name in ("env", "sender", "policy", "follower"):
            thing = getattr(self, name, None)
            if thing is not None:
                thing.close()
