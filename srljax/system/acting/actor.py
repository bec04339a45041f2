"""ActorWorker: steps an envpool env ring, acts inline or through policy workers, pushes segments. Never
waits on a params version.

    worker = ActorWorker(cfg, index=0, names=names)   # run by a backend: worker.run()

The ring is one envpool instance in async mode (``layout.ring_size`` batches in flight, so envs step while
inference runs). Each batch is acted on inline (``srljax.learning.acting.Acting``, the single-process loop's
code, with the newest params the trainer published) or remotely (``PolicyClient`` to the policy workers; a
recurrent policy's carries live there, ``srljax/system/acting/carries.py``). Rows go into a ``SegmentBuilder``;
a full segment ``[T+1, env.num_envs]`` is pushed to the sample sinks round robin. It waits only where
waiting saves work: back-pressure (``MAX_QUEUED``), the lag throttle (its share of a batch per params
version, ``segments_ahead(cfg)``), with a starvation escape (``srljax/system/acting/escape.py``); a segment
already staler than ``trainer.max_policy_lag`` is dropped here (several policies: each policy's part against
that policy's newest params). With ``layout.deterministic`` it acts in lockstep, segment k with version ``v0 + k``.
Several policies may mix the two (``PolicyConfig.inference``): each batch's remote policies' agents' rows go to the
policy workers and, as the reply comes back, the actor acts its inline policies on the same batch with the params
it follows and merges the two into one action per agent. The rules and why: ``docs/architecture.md``, "Data flow" and
"Liveness".
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Any

import jax
import numpy as np
import zmq

import algos
import envs
from srljax.comm import InferenceClient, NameResolver, SampleSender
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import (
    ACTOR,
    BUFFER,
    INFERENCE,
    POLICY,
    SAMPLES,
    TRAINER,
    actor_envs_per_recv,
    columns_per_version,
    segments_ahead,
)
from srljax.learning.acting import Acting
from srljax.learning.rollout import SegmentBuilder
from srljax.system.acting.carries import RowTags
from srljax.system.acting.escape import StarvationEscape
from srljax.system.acting.packing import ReplyPacking
from srljax.system.acting.policy_client import PolicyClient
from srljax.system.acting.policy_streams import connect_policy_senders, make_follower
from srljax.system.shell.common import episode_meta
from srljax.system.shell.membership import member_follower, member_of_actor
from srljax.system.shell.worker import Worker
from srljax.system.training.params import ParamsCodec
from srljax.types import TimeStep

SEND_HWM = 2  # segments queued in this socket
MAX_QUEUED = 2  # segments waiting here for room in the sink before the actor stops stepping
PUSH_WAIT_MS = 20  # while blocked: how long one poll waits for room or for newer params


class ActorWorker(Worker):
    role = ACTOR
    placement = ACTOR

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close``, ``metrics`` and ``waiting`` run after a partial setup too)
        self.remote = False
        self.env: Any = None
        self.algo: Any = None
        self.builder: SegmentBuilder | None = None
        self.sender: Any = None  # a SampleSender, or a PolicySender (several policies)
        self.outgoing: deque[tuple[Any, dict[str, Any]]] = deque()  # (segment, meta) waiting for room in a sink
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.wins: list[float] = []  # outcomes of ended episodes, where the env reports them (a JAX env's: SMAX)
        self.ahead_columns = 0
        self.share = 0.0
        self.first_version = -1
        self.newest_seen = -1
        self.pushed_columns = 0
        self.bonus: float = 0
        self.escape: StarvationEscape | None = None
        self.blocked = ""
        self.inference: PolicyClient | None = None  # remote inference
        self.stepping = 0
        self.acting: Acting | None = None  # inline inference
        self.mixed = False  # several policies, some inline (acted here) and some remote (policy workers)
        self.remote_agents: list[int] = []  # mixed: the agents the policy workers act, in their reply's order
        self.follower: Any = None  # a ParamsFollower or a MultiFollower (several policies)
        self.league: Any = None  # a LeagueSide (league_actor.py) or PSRO's PSROSide (psro_actor.py): the env's opponents
        self.lockstep = False
        self.lockstep_first = -1
        self.segments_done = 0
        self.reacting: TimeStep | None = None

    def setup(self) -> None:
        cfg = self.cfg
        self.remote = self.plan.remote
        env_cfg = dataclasses.replace(cfg.env, batch_size=actor_envs_per_recv(cfg))
        # distinct seeds per actor: envpool seeds env i with seed + i
        self.env = envs.make(env_cfg, seed=cfg.seed + self.index * cfg.env.num_envs)
        self.spec = self.env.spec
        self.algo = algos.make(cfg, self.spec)
        self.builder = SegmentBuilder(self.spec, cfg.algo.num_steps, self.algo.extras_spec, self.algo.return_gamma)
        if self.plan.policies:  # each policy's part of a segment to its own trainer (srljax/learning/policies.py)
            self.sender, sinks = connect_policy_senders(self, SEND_HWM)
        else:
            self.sender = SampleSender(None, self.trial, ctx=self.ctx, hwm=SEND_HWM, **self.samples_options(sender=True))
            sink = BUFFER if self.peers_of(BUFFER, SAMPLES) else TRAINER  # buffers if the layout has any
            members = [member_of_actor(cfg, self.index)] if self.plan.members else None  # a population: its member's
            sinks = self.connect_peers(self.sender, sink, SAMPLES, members)  # follows a restarted buffer to its new address
        if not sinks:
            raise RuntimeError("the configure message named no sample sink (trainer or buffer) to push to")
        self.outgoing = deque()  # (segment, meta)
        self.returns = []
        self.lengths = []
        self.wins = []
        self.ahead_columns = segments_ahead(cfg) * cfg.env.num_envs
        self.share = columns_per_version(cfg)
        self.first_version = -1  # the first params version this actor saw; grants count from there
        self.newest_seen = -1
        self.pushed_columns = 0
        self.bonus = 0  # columns granted by escapes (``srljax/system/acting/escape.py``) beyond the throttle's grants
        self.escape = StarvationEscape()
        self.blocked = ""  # why the last poll did not step ("" when it did)
        codec = ParamsCodec(self.algo)
        inline, remote = self.plan.served("inline"), self.plan.served("remote")  # several policies' inference
        self.mixed = bool(inline and remote)
        if self.remote:
            client = InferenceClient(None, self.trial, ctx=self.ctx)
            servers = sorted(i for i, streams in self.peers.get(POLICY, {}).items() if INFERENCE in streams)
            recurrent = bool(jax.tree.leaves(self.algo.initial_actor_state(1)))
            if recurrent and servers:  # the carries of this actor's envs live in one policy worker
                servers = [servers[self.index % len(servers)]]
            self.connect_peers(client, POLICY, INFERENCE, servers)
            tags = RowTags(self.spec.num_envs, actor=self.index) if recurrent else None
            if remote:  # several policies: the policy workers serve the remote ones, on their agents' rows
                from algos.multi_policy import make_multi_policy, policy_rows, served_agents, served_spec

                agents = served_agents(cfg, remote)
                served = make_multi_policy(cfg, self.spec, remote, rows=True)
                self.remote_agents = list(agents)
                self.inference = PolicyClient(client, served_spec(cfg, self.spec, remote), served.extras_spec, self.stats,
                                              rows=lambda obs: policy_rows(self.spec, agents, obs))
            else:
                self.inference = PolicyClient(client, self.spec, self.algo.extras_spec, self.stats, tags=tags)
            self.stepping = cfg.layout.ring_size  # batches inside envpool
        if not self.remote or self.mixed:
            algo = self.algo
            if self.mixed:  # the inline policies only: their agents' columns of the action
                from algos.multi_policy import make_multi_policy

                algo = make_multi_policy(cfg, self.spec, inline)
                codec = ParamsCodec(algo)
            key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1000 + self.index)
            self.acting = Acting(algo, self.spec.num_envs, key, packing=ReplyPacking(self.spec, algo.extras_spec))
            self.acting.warm_up(codec.zeros(), self.spec)
            self.follower = (member_follower(self, codec, member_of_actor(cfg, self.index)) if self.plan.members
                             else make_follower(self, codec, inline if self.mixed else None))  # one stream per policy
        self.league = None
        if self.plan.league:  # a league member's actor: its opponents and their results (league_actor.py)
            from srljax.system.acting.league_actor import LeagueSide

            self.league = LeagueSide(self, member_of_actor(cfg, self.index))
        elif self.plan.psro:  # PSRO: opponents drawn from the population manager's meta-strategy (psro_actor.py)
            from srljax.system.acting.psro_actor import PSROSide

            self.league = PSROSide(self)
        self.lockstep = cfg.layout.deterministic  # inline, sync ring (config checks)
        self.lockstep_first = -1  # v0: the first params version seen (a resumed trainer's, or 0)
        self.segments_done = 0
        self.reacting = None  # lockstep: a row acted again once the next version is here
        self.env.async_reset()
        self.log(f"{self.spec.num_envs} envs {self.spec.id}, {self.spec.batch_size} per recv, "
                 f"{self._inference_words()} inference, {len(sinks)} sample sink(s), "
                 f"{self.share:g} columns per params version plus {self.ahead_columns} ahead")

    def _inference_words(self) -> str:
        if self.plan.inference:
            return ", ".join(f"{name} {how}" for name, how in self.plan.inference.items())
        return "remote" if self.remote else "inline"

    def peers_changed(self, role: str, index: int) -> None:
        if role == POLICY and self.remote:  # the lost policy worker will never answer what it held
            self.inference.resend_all()

    @property
    def newest_version(self) -> int:
        if self.mixed:  # the slower of the two (the lag throttle's: each trainer takes its share per version)
            return min(self.inference.newest_version, self.follower.version)
        return self.inference.newest_version if self.remote else self.follower.version

    def policy_versions(self) -> dict[str, int]:
        """Several policies: the newest params version of each training policy, as this actor knows it (an inline
        policy's from its params stream, a remote one's from the policy workers' replies)."""
        inline = self.follower.versions() if hasattr(self.follower, "versions") else {}  # a MultiFollower
        return {name: inline[name] if name in inline else self.inference.newest_version for name in self.plan.policies}

    def poll(self) -> None:
        if self.league is not None:
            self.league.poll(self.follower)
            if not self.league.ready():
                self.blocked = self.league.WAITS
                time.sleep(0.02)
                return
        self._push(timeout_ms=0)
        if len(self.outgoing) >= MAX_QUEUED:
            full = not self._throttled()
            self.blocked = (f"sink full: {len(self.outgoing)} segments wait to be pushed" if full else
                            f"lag throttle: pushed {self.pushed_columns} columns by params version "
                            f"{self.newest_version}, waits for a newer one")
            self._wait(push=full)
        elif self.remote:
            self._poll_remote()
        else:
            self._poll_inline()

    def _granted(self) -> float:
        """Columns this actor may have pushed by now: its share per version seen, plus the allowance ahead."""
        newest = self.newest_version
        if newest >= 0 and (self.first_version < 0 or newest < self.newest_seen):
            # the first params, or a restarted trainer went back to its checkpoint: grants count from here
            self.first_version, self.pushed_columns, self.bonus = newest, 0, 0
        self.newest_seen = newest
        self.escape.saw(newest)
        seen = newest - self.first_version if self.first_version >= 0 else 0
        return seen * self.share + self.ahead_columns + self.bonus

    def _throttled(self) -> bool:
        if not self.outgoing:
            return False
        columns = self.outgoing[0][0].reward.shape[1]
        if self.pushed_columns + columns <= self._granted():
            return False
        if self.newest_version >= 0 and self.escape.due():  # the trainer may be starved: one more segment
            self.bonus += columns
            self.stats.add("throttle_escapes")
            return False
        return True

    def _wait(self, push: bool) -> None:
        """Blocked: wait a little for room in the sink or for newer params (both unblock the next poll)."""
        with self.stats.time("wait/push" if push else "wait/lag_limit"):
            if push:
                self._push(timeout_ms=PUSH_WAIT_MS)
            elif not self.remote:
                self.follower.poll(timeout_ms=PUSH_WAIT_MS)
            else:
                if self.mixed:
                    self.follower.poll(timeout_ms=0)
                if not self.inference.in_flight:  # nothing coming back that would tell us the version
                    self.inference.probe()
                for reply in self.inference.replies(timeout_ms=PUSH_WAIT_MS):
                    self._apply(*reply)

    # -- inline ----------------------------------------------------------------------------------
    def _poll_inline(self) -> None:
        self.follower.poll(timeout_ms=0 if self.follower.params is not None else 50)
        if self.follower.params is None:
            self.blocked = "params: none received yet"
            return
        if self.lockstep and not self._lockstep_ready():
            return
        if self.reacting is not None:  # lockstep: the new segment's first row, acted again with its version
            ts, self.reacting = self.reacting, None
            with self.stats.time("compute/act"):
                action, extras = self.acting.act(self.follower.params, ts)
            self.builder.restate_first(ts.env_id, action, extras, self.follower.version)
            self.env.send(action, ts.env_id)
            return
        with self.stats.time("wait/env"):
            ts = self.env.recv()
        if self._empty(ts):
            return
        self._outcomes(ts)
        if self.lockstep:  # envpool returns a batch's rows in the order its threads finish
            ts = TimeStep(*(x[np.argsort(ts.env_id, kind="stable")] for x in ts))
        self.blocked = ""
        with self.stats.time("compute/act"):
            action, extras = self.acting.act(self.follower.params, ts)
        done = self.segments_done
        self._record(ts, action, extras, self.follower.version)
        if self.lockstep and self.segments_done > done and self.acting.stateless:
            self.reacting = ts  # its action waits for the version this segment trains (a recurrent state cannot
            return  # be acted twice: recurrent policies keep the first row one version behind)
        self.env.send(action, ts.env_id)

    def _lockstep_ready(self) -> bool:
        """Deterministic layouts: whether the params held are version ``v0 + segments done``; else wait a little."""
        version = self.follower.version
        if self.lockstep_first < 0 or version < self.lockstep_first + self.segments_done - 1:
            # the first params, or a restarted trainer went back to its checkpoint: count from here
            self.lockstep_first, self.segments_done = version, 0
        want = self.lockstep_first + self.segments_done
        if version >= want:
            return True
        self.blocked = f"deterministic: waits for params version {want} (holds {version})"
        with self.stats.time("wait/lag_limit"):
            self.follower.poll(timeout_ms=PUSH_WAIT_MS)
        return False

    # -- remote ----------------------------------------------------------------------------------
    def _poll_remote(self) -> None:
        if self.mixed:  # the inline policies' params: needed before a reply can be merged
            self.follower.poll(timeout_ms=0 if self.follower.params is not None else 50)
            if self.follower.params is None:
                self.blocked = "params: none received yet for the inline policies"
                return
        for reply in self.inference.replies(timeout_ms=0):
            self._apply(*reply)
        if self.stepping > 0:
            with self.stats.time("wait/env"):
                ts = self.env.recv()
            if not self._empty(ts):
                self._outcomes(ts)
                self.blocked = ""
                self.stepping -= 1
                self.inference.request(ts)
        else:
            self.blocked = f"inference: {len(self.inference.in_flight)} requests in flight"
            with self.stats.time("wait/inference"):
                replies = self.inference.replies(timeout_ms=50)
            for reply in replies:
                self._apply(*reply)
        self.inference.resend_overdue()
        self.stats.gauge("queue/requests_in_flight", len(self.inference.in_flight))

    def _empty(self, ts: TimeStep) -> bool:
        """An env that answered ``recv`` with no rows (a user env can): step it on, there is nothing to act on."""
        if len(ts.env_id):
            return False
        self.env.send(np.zeros((0, *self.spec.action_shape), self.spec.action_dtype), ts.env_id)
        self.blocked = "env: recv returns no rows"
        self.stats.add("empty_recvs")
        return True

    def _apply(self, ts: TimeStep, action: np.ndarray, extras: dict[str, np.ndarray], version: int) -> None:
        if self.mixed:  # the remote policies' agents came back; the inline ones are acted here, on the same rows
            with self.stats.time("compute/act"):
                own, own_extras = self.acting.act(self.follower.params, ts)
            own = np.array(own)
            own[..., self.remote_agents] = action
            action, extras, version = own, {**own_extras, **extras}, min(version, self.follower.version)
            self.stats.add("inline_agent_rows", len(ts.env_id) * (self.spec.num_agents - len(self.remote_agents)))
        self.env.send(action, ts.env_id)
        self.stepping += 1
        self._record(ts, action, extras, version)

    def _outcomes(self, ts: TimeStep) -> None:
        """The ended episodes' outcomes where the env reports them (``JaxVecEnv.episode_won``: the step just
        received's, in env order), read at the receive: a remote reply is recorded after the next step is sent."""
        if getattr(self.env, "reports_outcomes", False):
            w = np.asarray(self.env.episode_won)[ts.env_id]
            self.wins += w[~np.isnan(w)].tolist()

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
            self.outgoing.append((segment, episode_meta(self.returns, self.lengths, self.wins)))
            self.segments_done += 1
            self.returns, self.lengths, self.wins = [], [], []
            self._push(timeout_ms=0)

    def _push(self, timeout_ms: int) -> None:
        """Send queued segments until the sink is full or the lag throttle holds them back."""
        while self.outgoing:
            newest = self.newest_version
            segment, meta = self.outgoing[0]
            version = int(segment.policy_version.min())
            stale = self._stale_parts(segment) if self.plan.policies else set()
            if (newest - version > self.cfg.trainer.max_policy_lag if not self.plan.policies
                    else stale == set(self.plan.policies)):
                self.outgoing.popleft()  # the trainer would drop it; its episodes still count
                self.stats.add("dropped_stale_columns", segment.reward.shape[1])
                wins = meta.get("episode_wins", [])
                if self.outgoing:
                    self.outgoing[0][1]["episode_returns"][:0] = meta["episode_returns"]
                    self.outgoing[0][1]["episode_lengths"][:0] = meta["episode_lengths"]
                    if wins:
                        self.outgoing[0][1].setdefault("episode_wins", [])[:0] = wins
                else:
                    self.returns[:0], self.lengths[:0], self.wins[:0] = (meta["episode_returns"],
                                                                         meta["episode_lengths"], wins)
                continue
            if self._throttled():
                return
            skip = {"skip": frozenset(stale)} if stale else {}  # several policies: stale parts stay here
            if not self.sender.send(segment, timeout_ms=timeout_ms, version=version, meta={**meta, ACTOR: self.index},
                                    **skip):
                return
            for name in stale:
                self.stats.add(f"dropped_stale_columns/{name}", segment.reward.shape[1])
            self.outgoing.popleft()
            self.pushed_columns += segment.reward.shape[1]
            self.stats.add("segments")
            self.stats.count_value("lag/pushed", max(0, newest - version))

    def _stale_parts(self, segment: Any) -> set[str]:
        """Several policies: the training policies whose part of ``segment`` is staler than
        ``trainer.max_policy_lag`` against that policy's newest params (its trainer would drop it)."""
        from algos.multi_policy import VERSION

        lag = self.cfg.trainer.max_policy_lag
        return {name for name, newest in self.policy_versions().items()
                if newest - int(np.min(segment.extras[f"{name}/{VERSION}"])) > lag}

    def progress(self) -> int:
        return int(self.stats.counters["env_steps"])

    def waiting(self) -> str:
        blocked = self.blocked
        if blocked or self.builder is None:
            return blocked
        low, high = self.builder.rows_filled
        return f"stepping: env columns at rows {low}..{high} of {self.cfg.algo.num_steps + 1}"

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queue/segments_waiting": len(self.outgoing)}
        endpoints = {"sender": self.sender, "client": None if self.inference is None else self.inference.client,
                     "params": None if self.follower is None else self.follower.sub}
        for name, endpoint in endpoints.items():
            if endpoint is not None:
                out.update({f"{name}/{k}": v for k, v in endpoint.counters().items()})
        return out

    def close(self) -> None:
        for thing in (self.league, self.env, self.sender, self.inference, self.follower):
            if thing is not None:
                thing.close()
