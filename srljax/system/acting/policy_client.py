"""The actor's side of remote inference: request ids, requests in flight, retries, version probes.

    policy = PolicyClient(client, spec, algo.extras_spec, stats)     # client: a connected InferenceClient
    policy = PolicyClient(client, spec, algo.extras_spec, stats, tags=RowTags(spec.num_envs, actor=i))  # recurrent
    policy.request(ts)                                  # one env batch; id = a counter
    for ts, action, extras, version in policy.replies(timeout_ms=50):
        env.send(action, ts.env_id)                     # replies come in any order, matched by id
    policy.probe()                                      # zero rows: only asks for the params version
    policy.newest_version                               # newest version replies carry (followed down after a restart)

Replies carry the action and extras packed into one byte row per env (``ReplyPacking``). One that
does not fit the batch it answers is counted and its request stays in flight; a request
unanswered for ``REQUEST_RETRY_S`` is sent again (a reply dropped at a full socket must not stall
the env ring) and the late duplicate is counted and ignored. When a policy worker is restarted
(``resend_all``, from ``ActorWorker.peers_changed``) every request in flight is sent again at once.

A recurrent policy's carries live in the policy worker (``srljax/system/acting/carries.py``): with ``tags``
every request also says, per row, the env id, whether the row starts an episode and its sequence
number (so a resend does not step a carry twice), and the actor's index.

``rows``: what of a batch's observations a request carries (several policies: the remote policies' agents' rows,
``algos/multi_policy.py``); ``spec`` then describes those rows.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from srljax.comm import InferenceClient
from srljax.system.acting.carries import RowTags
from srljax.system.acting.packing import ReplyPacking
from srljax.system.training.params import FOLLOW_DOWN_POLLS, FOLLOW_DOWN_S
from srljax.telemetry.stats import WorkerStats
from srljax.types import EnvSpec, TimeStep

REQUEST_RETRY_S = 10.0
PROBE_RETRY_S = 0.1  # a probe without answer by then is sent again
PROBE_EVERY_S = 0.01  # while waiting for newer params: a lag of 10 ms costs nothing


class PolicyClient:
    def __init__(self, client: InferenceClient, spec: EnvSpec, extras_spec: dict[str, Any], stats: WorkerStats,
                 tags: RowTags | None = None, rows: Any = None):
        self.client, self.spec, self.stats, self.tags, self.rows = client, spec, stats, tags, rows
        self.trees: dict[int, dict[str, np.ndarray]] = {}  # id -> the request as sent (resends send it again)
        self.packing = ReplyPacking(spec, extras_spec)
        self.in_flight: dict[int, tuple[TimeStep, float, float]] = {}  # id -> (batch, sent at, retry at)
        self.next_id = 0
        self.newest_version = -1
        self._below: tuple[float, int] | None = None  # (since when, replies) versions below the newest keep coming
        self.probe_id: int | None = None
        self.probe_at = 0.0

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def request(self, ts: TimeStep) -> None:
        rid = self._new_id()
        self.in_flight[rid] = (ts, 0.0, 0.0)
        obs = ts.obs if self.rows is None else np.ascontiguousarray(self.rows(ts.obs))
        self.trees[rid] = {"obs": obs, **(self.tags.tag(ts) if self.tags is not None else {})}
        self._send(rid)

    def probe(self) -> None:
        """Ask for the version only (a zero-row request), at most every ``PROBE_EVERY_S``."""
        wait = PROBE_RETRY_S if self.probe_id is not None else PROBE_EVERY_S
        if time.monotonic() - self.probe_at < wait:
            return
        self.probe_id, self.probe_at = self._new_id(), time.monotonic()
        empty = np.zeros((0, *self.spec.obs_shape), self.spec.obs_dtype)
        self.client.send(self.probe_id, {"obs": empty}, timeout_ms=0)
        self.stats.add("version_probes")

    def _send(self, rid: int) -> None:
        ts = self.in_flight[rid][0]
        with self.stats.time("wait/request_send"):
            ok = self.client.send(rid, self.trees[rid], timeout_ms=100)
        now = time.monotonic()
        # unsent (no policy worker took it within 100 ms): try again soon, not after the full retry time
        self.in_flight[rid] = (ts, now, now + (REQUEST_RETRY_S if ok else 0.1))
        self.stats.add("requests" if ok else "request_send_timeouts")

    def resend_overdue(self) -> None:
        now = time.monotonic()
        for rid, (_, _, retry_at) in list(self.in_flight.items()):
            if now > retry_at:
                self.stats.add("requests_resent")
                self._send(rid)

    def resend_all(self) -> None:
        """The policy worker was restarted: whatever it held will never be answered, so ask again now."""
        self.stats.add("requests_resent", len(self.in_flight))
        for rid in list(self.in_flight):
            self._send(rid)
        self.probe_id = None

    def replies(self, timeout_ms: int) -> list[tuple[TimeStep, np.ndarray, dict[str, np.ndarray], int]]:
        """Wait up to ``timeout_ms`` for a reply, then take all queued: ``(batch, action, extras, version)``."""
        out = []
        reply = self.client.recv(timeout_ms=timeout_ms)
        while reply is not None:
            if reply.request_id == self.probe_id:
                self.probe_id = None
                self.see_version(reply.version)
            elif (entry := self.in_flight.get(reply.request_id)) is None:
                self.stats.add("replies_unknown")  # a duplicate after a resend, or a late probe
            elif (unpacked := self._unpack(reply.tree, len(entry[0].env_id))) is None:
                self.stats.add("replies_invalid")  # stays in flight: the resend asks again
            else:
                ts, sent, _ = self.in_flight.pop(reply.request_id)
                del self.trees[reply.request_id]
                latency_ms = (time.monotonic() - sent) * 1000
                self.stats.sample("latency/inference_ms", latency_ms)
                self.stats.observe("latency/inference_ms", latency_ms)
                self.see_version(reply.version)
                self.stats.gauge("policy_version", self.newest_version)
                out.append((ts, *unpacked, reply.version))
            reply = self.client.recv(timeout_ms=0)
        return out

    def see_version(self, version: int, now: float | None = None) -> None:
        """The newest version any reply carried, followed back down as ``ParamsFollower`` does: when replies keep
        carrying versions below it (``FOLLOW_DOWN_POLLS`` replies over ``FOLLOW_DOWN_S``), the trainer restarted
        from an older checkpoint (or from scratch) and its policy workers followed it, so this actor does too;
        its lag throttle and stale drops then count from the restarted trainer's versions."""
        now = time.monotonic() if now is None else now
        if version >= self.newest_version:
            self.newest_version, self._below = version, None
            return
        since, replies = self._below or (now, 0)
        self._below = (since, replies + 1)
        if replies + 1 >= FOLLOW_DOWN_POLLS and now - since >= FOLLOW_DOWN_S:
            self.newest_version, self._below = version, None
            self.stats.add("params_version_reset")

    def _unpack(self, tree: Any, n: int) -> tuple[np.ndarray, dict[str, np.ndarray]] | None:
        rows = tree.get("rows") if isinstance(tree, dict) else None
        if not isinstance(rows, np.ndarray) or len(rows) != n:
            return None
        try:
            return self.packing.unpack(rows)
        except ValueError:
            return None

    def close(self) -> None:
        self.client.close()
