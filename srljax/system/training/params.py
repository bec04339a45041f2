"""Policy params between the trainer and whoever acts: a checked wire form and a follower that keeps the newest.

    codec = ParamsCodec(algo)
    publisher.publish(version, codec.to_wire(learner.policy_params()))    # trainer
    follower = ParamsFollower(trial, [publisher_address], codec, stats)   # actor / policy worker
    if follower.poll(timeout_ms=0):                                       # True when a newer version arrived
        act(follower.params, ...)
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

from srljax.comm import ParamsSubscriber
from srljax.system.shell.bounds import params_limit, params_message_limit
from srljax.system.shell.common import check_array

CHECK_PARAMS_S = 0.005  # at most this often a poll looks at the socket
FOLLOW_DOWN_S = 3.0  # a publisher that keeps sending versions below ours this long is followed back down
FOLLOW_DOWN_POLLS = 3


class ParamsCodec:
    """Policy params <-> a flat list of arrays on the wire, checked against the algorithm's own structure.

        codec = ParamsCodec(algo)
        publisher.publish(version, codec.to_wire(learner.policy_params()))    # trainer
        params = codec.from_wire(got.tree)                                    # actor / policy worker

    The params pytree holds flax dataclasses (normaliser stats) the codec does not carry, so
    only the leaves travel; the receiver rebuilds the tree from ``jax.eval_shape`` of its own
    ``algo.init`` (no compute, no allocation) and refuses leaves of the wrong shape or dtype.
    """

    def __init__(self, algo: Any):
        shapes = jax.eval_shape(lambda key: algo.policy_params(algo.init(key)), jax.random.PRNGKey(0))
        leaves, self.treedef = jax.tree.flatten(shapes)
        self.specs = [(tuple(x.shape), np.dtype(x.dtype)) for x in leaves]

    def zeros(self) -> Any:
        """Params of the right structure, all zeros: enough to compile ``act`` before real params arrive."""
        return jax.tree.unflatten(self.treedef, [np.zeros(shape, dtype) for shape, dtype in self.specs])

    def to_wire(self, params: Any) -> list[np.ndarray]:
        return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(params))]

    def from_wire(self, tree: Any) -> Any:
        """The params pytree (numpy leaves), or ValueError if ``tree`` does not match."""
        if not isinstance(tree, list) or len(tree) != len(self.specs):
            raise ValueError(f"params must be a list of {len(self.specs)} arrays")
        for i, (x, (shape, dtype)) in enumerate(zip(tree, self.specs)):
            check_array(f"params leaf {i}", x, shape, dtype.name)
        return jax.tree.unflatten(self.treedef, tree)


class ParamsFollower:
    """A SUB to the params publisher(s) of a policy, keeping the newest valid params on this device.

        follower = ParamsFollower(trial, worker.peers_of(TRAINER, PARAMS), ParamsCodec(algo), stats)
        if follower.poll(timeout_ms=0):      # True when a newer version arrived
            params, version = follower.params, follower.version

    One bad message must not freeze it (a follower ignores versions at or below its own): a
    version above the trial's last update (``ctx.rules.max_params_version``) is refused and
    counted (the subscriber's ``drop.version``), and if the publisher keeps sending versions below
    the one held for ``FOLLOW_DOWN_S`` (the trainer republishes every second), the held one was
    not the trainer's (or the trainer restarted): the follower takes the publisher's again
    (``params_version_reset``). Frames larger than the biggest params leaf are refused unread.
    """

    def __init__(self, trial: str, addresses: list[str], codec: ParamsCodec, stats: Any, ctx: Any = None):
        if not addresses:
            raise RuntimeError("no params publisher: the configure message named no trainer params address")
        self.sub = ParamsSubscriber(None, trial, ctx=ctx, max_bytes=params_limit(codec.specs),
                                    max_message_bytes=params_message_limit(codec.specs))
        for address in addresses:
            self.sub.connect(address)
        self.codec, self.stats = codec, stats
        rules = getattr(ctx, "rules", None)
        self.max_version = getattr(rules, "max_params_version", None)
        self.params: Any = None
        self.version = -1
        self._next_check = 0.0
        self._below: tuple[float, int] | None = None  # (since when, polls) versions below ours keep arriving

    def poll(self, timeout_ms: int = 0) -> bool:
        now = time.monotonic()
        if self.params is not None and timeout_ms == 0 and now < self._next_check:
            return False  # callers poll per env batch; a syscall each time is not worth it
        self._next_check = now + CHECK_PARAMS_S
        got = self.sub.poll_newest(timeout_ms=timeout_ms, max_version=self.max_version)
        if got is None:
            return False
        if got.version < self.version and not self._follow_down(now):
            return False
        if got.version == self.version:
            self._below = None
            return False
        try:
            params = self.codec.from_wire(got.tree)
        except ValueError:
            self.stats.add("params_invalid")
            return False
        self.params, self.version = jax.device_put(params), got.version
        self._below = None
        self.stats.gauge("policy_version", got.version)
        return True

    def _follow_down(self, now: float) -> bool:
        since, polls = self._below or (now, 0)
        self._below = (since, polls + 1)
        if polls + 1 >= FOLLOW_DOWN_POLLS and now - since >= FOLLOW_DOWN_S:
            self.stats.add("params_version_reset")
            return True
        return False

    def close(self) -> None:
        self.sub.close()
