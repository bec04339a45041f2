"""The workers' side of several policies: one params stream and one samples stream per policy.

    follower = make_follower(worker, codec)       # actor / policy worker: one params stream per policy
    follower = make_follower(worker, codec, names=("defender",))  # only the policies this worker acts
    sender, sinks = connect_policy_senders(worker, hwm)  # actor: each policy's samples to its trainer

The policy id (its name) keys every stream: trainer ``i`` of the layout trains the ``i``-th training policy
(``srljax.config.policies.trainer_policy``), publishes only its params and receives only its samples; a
follower subscribes to each policy's trainer by index and an actor's ``PolicySender`` pushes each policy's
part of a segment to that policy's trainer, the part's ``meta`` naming the policy (``POLICY_KEY``), which the
trainer checks. Frozen policies have no trainer: their params come from ``load_policy_state``
(``srljax/learning/policies.py``), once, at version 0. With inference chosen per policy an actor follows only its
inline policies' streams and a policy worker only the remote ones' (``names``).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from srljax.config import Experiment
from srljax.config.policies import policy_experiment
from srljax.learning.policies import POLICY_KEY, load_policy_state
from srljax.types import EnvSpec, Trajectory


class MultiFollower:
    """One ``ParamsFollower`` per training policy (its trainer's PUB), plus the frozen policies' fixed params,
    as the composite algorithm's params ``{name: {"net": params, "version": v}}``.

    ``version`` is the oldest version among the training policies (what an actor's lag throttle and staleness
    check compare with; each segment part still carries its own policy's versions). ``names``: only those
    policies (the ones this worker acts), in ``named`` order; None: every policy."""

    def __init__(self, worker: Any, codec: Any, names: tuple[str, ...] | None = None):
        from algos.multi_policy import VERSION, make_policy_algorithm, policy_spec
        from srljax.layout import PARAMS, TRAINER
        from srljax.system.training.params import ParamsCodec, ParamsFollower

        cfg, spec = worker.cfg, worker.spec
        self.followers: dict[str, Any] = {}
        self.fixed: dict[str, Any] = {}
        for i, name in enumerate(cfg.policies.training()):  # trainer i trains the i-th training policy
            if names is not None and name not in names:
                continue
            sub = make_policy_algorithm(policy_experiment(cfg, name), policy_spec(spec, cfg.policies.agents_of(name)))
            addresses = [worker.peers[TRAINER][i][PARAMS]] if PARAMS in worker.peers.get(TRAINER, {}).get(i, {}) else []
            follower = ParamsFollower(worker.trial, addresses, ParamsCodec(sub), worker.stats, worker.ctx)
            worker.follow_peers(follower.sub, TRAINER, PARAMS, [i])  # a restarted trainer publishes elsewhere
            self.followers[name] = follower
        for p in cfg.policies.named:
            if p.frozen and (names is None or p.name in names):
                sub = make_policy_algorithm(policy_experiment(cfg, p.name), policy_spec(spec, cfg.policies.agents_of(p.name)))
                state = load_policy_state(cfg, p.name, spec)
                self.fixed[p.name] = {"net": jax.device_get(sub.policy_params(state)), VERSION: np.int32(0)}
        self.version_key = VERSION
        self.order = tuple(n for n in cfg.policies.names() if names is None or n in names)
        self.params: Any = None
        self.sub = _Subscribers(list(f.sub for f in self.followers.values()))

    @property
    def version(self) -> int:
        return min((f.version for f in self.followers.values()), default=0)  # only frozen ones: their version 0

    def versions(self) -> dict[str, int]:
        """The newest params version of each followed training policy."""
        return {name: f.version for name, f in self.followers.items()}

    def poll(self, timeout_ms: int = 0) -> bool:
        changed = False
        for follower in self.followers.values():
            changed |= follower.poll(timeout_ms=timeout_ms if follower.params is None else 0)
        if any(f.params is None for f in self.followers.values()):
            return False
        if changed or self.params is None:
            self.params = {name: self.fixed[name] if name in self.fixed else
                           {"net": self.followers[name].params, self.version_key: np.int32(self.followers[name].version)}
                           for name in self.order}
            return True
        return False

    def close(self) -> None:
        for follower in self.followers.values():
            follower.close()


class _Subscribers:
    """The followers' subscribers as one, for the worker's metrics (``counters``)."""

    def __init__(self, subs: list[Any]):
        self.subs = subs

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for sub in self.subs:
            for k, v in sub.counters().items():
                out[k] = out.get(k, 0) + v
        return out


def make_follower(worker: Any, codec: Any, names: tuple[str, ...] | None = None) -> Any:
    """The params follower of an actor or policy worker: a ``ParamsFollower`` of the trainer (one shared policy)
    or a ``MultiFollower`` (several policies; ``names``: only those)."""
    from srljax.layout import PARAMS, TRAINER
    from srljax.system.training.params import ParamsFollower

    if worker.plan.policies:
        return MultiFollower(worker, codec, names)
    follower = ParamsFollower(worker.trial, worker.peers_of(TRAINER, PARAMS), codec, worker.stats, worker.ctx)
    worker.follow_peers(follower.sub, TRAINER, PARAMS)  # a restarted trainer publishes elsewhere
    return follower


class PolicySender:
    """``SampleSender``'s interface over one sender per training policy: ``send`` splits a composite segment
    ``[T+1, B]`` by policy (``split_trajectory``) and pushes each part to its policy's trainer, ``meta`` naming
    the policy. A part that does not fit waits; ``send`` returns True once every part of the segment is out,
    and a later ``send`` of the same segment sends only the parts still waiting. ``skip``: policies whose part
    is not sent (already staler than ``trainer.max_policy_lag`` against that policy's newest params)."""

    def __init__(self, cfg: Experiment, spec: EnvSpec, senders: dict[str, Any]):
        self.cfg, self.spec, self.senders = cfg, spec, senders
        self._waiting: tuple[Trajectory, dict[str, Trajectory]] | None = None  # (the segment, parts not sent yet)

    def send(self, segment: Trajectory, timeout_ms: int | None = None, *, version: int = -1,
             meta: dict[str, Any] | None = None, skip: frozenset[str] = frozenset()) -> bool:
        if self._waiting is None or self._waiting[0] is not segment:  # a new segment (the last one was sent or dropped)
            from algos.multi_policy import split_trajectory

            parts = split_trajectory(self.cfg, self.spec, segment)
            self._waiting = (segment, {name: parts[name] for name in self.senders if name not in skip})
        parts = self._waiting[1]
        for name in list(parts):
            part = parts[name]
            if self.senders[name].send(part, timeout_ms=timeout_ms, version=int(part.policy_version.min()),
                                       meta={**(meta or {}), POLICY_KEY: name}):
                del parts[name]
        if parts:
            return False
        self._waiting = None
        return True

    def counters(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, sender in self.senders.items():
            out |= {f"{name}/{k}": v for k, v in sender.counters().items()}
        return out

    def close(self) -> None:
        for sender in self.senders.values():
            sender.close()


def connect_policy_senders(worker: Any, hwm: int) -> tuple[PolicySender, list[str]]:
    """An actor's ``PolicySender``: one PUSH per training policy, connected to that policy's trainer (followed
    when it restarts). Returns it and the addresses connected."""
    from srljax.comm import SampleSender
    from srljax.layout import SAMPLES, TRAINER

    senders, sinks = {}, []
    for i, name in enumerate(worker.cfg.policies.training()):
        senders[name] = SampleSender(None, worker.trial, ctx=worker.ctx, hwm=hwm,
                                     **worker.samples_options(sender=True, fewest_columns=1))  # parts: any width
        sinks += worker.connect_peers(senders[name], TRAINER, SAMPLES, [i])
    return PolicySender(worker.cfg, worker.spec, senders), sinks


__all__ = ["MultiFollower", "PolicySender", "connect_policy_senders", "make_follower"]
