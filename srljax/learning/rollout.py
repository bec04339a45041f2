"""Turn a stream of env batches (sync or async, any env order) into time-major segments.

Used by the single-process loop and by ActorWorker alike::

    builder = SegmentBuilder(spec, num_steps=128, extras_spec=algo.extras_spec)
    ts = env.recv()
    action, extras, _ = act(params, ts.obs, (), None, key)   # a feed-forward act (``srljax.learning.acting`` does this)
    env.send(action, ts.env_id)
    builder.add(ts, action, extras, version)
    if builder.ready(batch_envs):
        batch = builder.pop(batch_envs)   # Trajectory [T+1, batch_envs, ...]

Each environment fills its own column; a column of ``T + 1`` rows is a finished segment and its last row
starts the next one (the bootstrap row is shared), which is exact for envpool's async mode. With
``return_gamma`` the builder keeps each env's running discounted return as the extra ``ret_acc``.
``state()`` / ``load_state()`` save and restore what it holds for a run's checkpoint; ``cut_episodes()`` after a
restore truncates each env's episode in progress (``docs/architecture.md``, "Run state and resume").
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from srljax.types import RETURN_ACC, EnvSpec, TimeStep, Trajectory

FIELDS = ("obs", "action", "reward", "terminated", "truncated")


def zeros_trajectory(spec: EnvSpec, num_steps: int, extras_spec: Mapping[str, tuple[tuple[int, ...], str]],
                     columns: int) -> Trajectory:
    """An all-zero ``Trajectory [T+1, columns]`` of the spec's dtypes (storage, or an example to compile for)."""
    rows = num_steps + 1
    return Trajectory(
        obs=np.zeros((rows, columns, *spec.obs_shape), spec.obs_dtype),
        action=np.zeros((rows, columns, *spec.action_shape), spec.action_dtype),
        reward=np.zeros((rows, columns), np.float32),
        terminated=np.zeros((rows, columns), bool),
        truncated=np.zeros((rows, columns), bool),
        extras={k: np.zeros((rows, columns, *shape), dtype) for k, (shape, dtype) in extras_spec.items()},
        policy_version=np.zeros(columns, np.int32),
    )


class SegmentBuilder:
    """Per-env column storage of ``T + 1`` rows; finished columns queue up as segments."""

    def __init__(self, spec: EnvSpec, num_steps: int, extras_spec: Mapping[str, tuple[tuple[int, ...], str]],
                 return_gamma: float | None = None):
        self.spec = spec
        self.num_steps = num_steps
        n = spec.num_envs
        self._gamma = None if return_gamma is None else np.float32(return_gamma)
        if self._gamma is not None:
            extras_spec = {**extras_spec, RETURN_ACC: ((), "float32")}
        self.extras_spec = dict(extras_spec)
        self._acc = np.zeros(n, np.float32)  # each env's discounted return so far (return_gamma)
        self._after_done = np.ones(n, bool)  # the env's next row starts an episode
        store = zeros_trajectory(spec, num_steps, extras_spec, n)
        self._fields: dict[str, np.ndarray] = {k: getattr(store, k) for k in FIELDS}
        self._extras = dict(store.extras)
        self._pos = np.zeros(n, np.int64)
        self._oldest_version = np.full(n, np.iinfo(np.int32).max, np.int64)
        self._done: list[Trajectory] = []  # finished single-env segments [T+1, 1, ...] grouped per add
        self._done_envs = 0

    def add(self, ts: TimeStep, action: np.ndarray, extras: Mapping[str, np.ndarray], version: int) -> int:
        """Store one batch (``ts.env_id`` distinct); return how many columns just finished."""
        ids = np.asarray(ts.env_id)
        rows = self._pos[ids]
        self._fields["obs"][rows, ids] = ts.obs
        self._fields["action"][rows, ids] = action
        self._fields["reward"][rows, ids] = ts.reward
        self._fields["terminated"][rows, ids] = ts.terminated
        self._fields["truncated"][rows, ids] = ts.truncated
        if self._gamma is not None:
            acc = np.where(self._after_done[ids], np.float32(0), self._acc[ids] * self._gamma + ts.reward)
            self._acc[ids] = acc
            extras = {**extras, RETURN_ACC: acc}
        self._after_done[ids] = np.logical_or(ts.terminated, ts.truncated)
        for key, store in self._extras.items():
            store[rows, ids] = extras[key]
        self._oldest_version[ids] = np.minimum(self._oldest_version[ids], version)
        finished = ids[rows == self.num_steps]
        self._pos[ids] += 1
        if finished.size:
            self._finish(finished, version)
        return int(finished.size)

    def _finish(self, ids: np.ndarray, version: int) -> None:
        segment = Trajectory(
            obs=self._fields["obs"][:, ids].copy(),
            action=self._fields["action"][:, ids].copy(),
            reward=self._fields["reward"][:, ids].copy(),
            terminated=self._fields["terminated"][:, ids].copy(),
            truncated=self._fields["truncated"][:, ids].copy(),
            extras={k: v[:, ids].copy() for k, v in self._extras.items()},
            policy_version=self._oldest_version[ids].astype(np.int32),
        )
        self._done.append(segment)
        self._done_envs += ids.size
        # The bootstrap row of this segment is the first row of the next one.
        for store in [*self._fields.values(), *self._extras.values()]:
            store[0, ids] = store[self.num_steps, ids]
        self._pos[ids] = 1
        self._oldest_version[ids] = version

    def restate_first(self, ids: np.ndarray, action: np.ndarray, extras: Mapping[str, np.ndarray], version: int) -> None:
        """Replace the action and extras of row 0 of the segments ``ids`` are in (the previous segment's bootstrap
        row, acted before it was pushed) with those of ``version``: a lockstep actor acts that row again with
        the params the previous segment trained, so the new segment is acted with one version throughout."""
        ids = np.asarray(ids)
        if not np.all(self._pos[ids] == 1):
            raise ValueError("restate_first: these envs' segments have more than their first row")
        self._fields["action"][0, ids] = action
        for key, store in self._extras.items():
            store[0, ids] = extras[key]
        self._oldest_version[ids] = version

    # -- run state ---------------------------------------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """Everything the builder holds, as fixed-shape numpy arrays (finished columns padded to
        ``num_envs``, with their count): a checkpoint's shell state."""
        n = self.spec.num_envs
        done = zeros_trajectory(self.spec, self.num_steps, self.extras_spec, n)
        if self._done_envs:
            merged = concat_segments(self._done)
            done = _put_columns(done, merged)
        out = {f"rows/{k}": v.copy() for k, v in self._fields.items()}
        out |= {f"rows/extras/{k}": v.copy() for k, v in self._extras.items()}
        out |= {f"done/{k}": getattr(done, k) for k in FIELDS} | {f"done/extras/{k}": v for k, v in done.extras.items()}
        out |= {"done/policy_version": done.policy_version, "done/count": np.asarray(self._done_envs, np.int64),
                "pos": self._pos.copy(), "oldest_version": self._oldest_version.copy(), "acc": self._acc.copy(),
                "after_done": self._after_done.copy()}
        return out

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what ``state()`` returned (from a builder of the same spec and config)."""
        for k, store in self._fields.items():
            store[...] = state[f"rows/{k}"]
        for k, store in self._extras.items():
            store[...] = state[f"rows/extras/{k}"]
        self._pos[...] = state["pos"]
        self._oldest_version[...] = state["oldest_version"]
        self._acc[...] = state["acc"]
        self._after_done[...] = state["after_done"]
        count = int(state["done/count"])
        self._done, self._done_envs = [], count
        if count:
            self._done.append(Trajectory(
                **{k: np.array(state[f"done/{k}"][:, :count]) for k in FIELDS},
                extras={k: np.array(state[f"done/extras/{k}"][:, :count]) for k in self._extras},
                policy_version=np.array(state["done/policy_version"][:count])))

    def cut_episodes(self) -> np.ndarray:
        """The envs were recreated: end each env's episode in progress at its last stored row, as a
        time limit does (truncated: the learner bootstraps from that row's value and masks the step
        into the new env's reset row). Returns the env ids whose episode was cut."""
        ids = np.arange(self.spec.num_envs)
        last = self._pos - 1
        has_row = last >= 0
        live = has_row & ~self._fields["terminated"][np.maximum(last, 0), ids] & ~self._fields["truncated"][
            np.maximum(last, 0), ids]
        cut = ids[live]
        self._fields["truncated"][last[cut], cut] = True
        self._after_done[:] = True
        return cut

    @property
    def rows_filled(self) -> tuple[int, int]:
        """(fewest, most) rows any env column of the segment being built holds: a column far behind
        the others is an env that stopped reporting."""
        return int(self._pos.min()), int(self._pos.max())

    def ready(self, batch_envs: int) -> bool:
        return self._done_envs >= batch_envs

    @property
    def finished_envs(self) -> int:
        return self._done_envs

    def pop(self, batch_envs: int) -> Trajectory:
        """Concatenate finished segments on the batch axis into one ``[T+1, batch_envs]`` batch."""
        if not self.ready(batch_envs):
            raise ValueError(f"only {self._done_envs} finished env columns, {batch_envs} asked for")
        merged = concat_segments(self._done)
        head, tail = split_segments(merged, batch_envs)
        self._done = [tail] if tail.reward.shape[1] else []
        self._done_envs -= batch_envs
        return head


def concat_segments(segments: list[Trajectory]) -> Trajectory:
    """Join trajectories on the batch axis (axis 1; ``policy_version`` on axis 0)."""
    if len(segments) == 1:
        return segments[0]
    return Trajectory(
        obs=np.concatenate([s.obs for s in segments], axis=1),
        action=np.concatenate([s.action for s in segments], axis=1),
        reward=np.concatenate([s.reward for s in segments], axis=1),
        terminated=np.concatenate([s.terminated for s in segments], axis=1),
        truncated=np.concatenate([s.truncated for s in segments], axis=1),
        extras={k: np.concatenate([s.extras[k] for s in segments], axis=1) for k in segments[0].extras},
        policy_version=np.concatenate([s.policy_version for s in segments]),
    )


def _put_columns(store: Trajectory, traj: Trajectory) -> Trajectory:
    """``store`` with its first columns overwritten by ``traj``'s (same rows)."""
    b = traj.reward.shape[1]
    for k in FIELDS:
        getattr(store, k)[:, :b] = getattr(traj, k)
    for k, v in traj.extras.items():
        store.extras[k][:, :b] = v
    store.policy_version[:b] = traj.policy_version
    return store


def split_segments(traj: Trajectory, n: int) -> tuple[Trajectory, Trajectory]:
    """First ``n`` env columns, and the rest."""

    def cut(x: np.ndarray, axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
        return (x[:, :n], x[:, n:]) if axis == 1 else (x[:n], x[n:])

    parts = {
        name: cut(getattr(traj, name)) for name in ("obs", "action", "reward", "terminated", "truncated")
    }
    extras = {k: cut(v) for k, v in traj.extras.items()}
    versions = cut(traj.policy_version, axis=0)
    make = lambda i: Trajectory(  # noqa: E731
        **{k: v[i] for k, v in parts.items()}, extras={k: v[i] for k, v in extras.items()}, policy_version=versions[i]
    )
    return make(0), make(1)


ALIGN = 64  # bytes: XLA:CPU takes a host array this aligned without a copy (``jax.device_put`` aliases it)


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype | str, align: int = ALIGN) -> np.ndarray:
    """``np.empty`` whose data starts on an ``align``-byte boundary (numpy's own guarantee is 16)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + align, np.uint8)
    at = (-raw.ctypes.data) % align
    return raw[at:at + n].view(dtype).reshape(shape)


def _never() -> bool:
    return False


def _now() -> bool:
    return True


class JoinPool:
    """Reused output arrays for joining segments, so a steady stream of joins stops allocating (and faulting in)
    fresh memory for every batch.

        pool = JoinPool(keep=4)
        out, rest = pool.join(segments, columns)   # out: their first ``columns`` columns, contiguous; rest: views
        pool.hold(out, tracker)                    # reusable once ``tracker.done`` (zmq's MessageTracker), or
        pool.hold(out, lambda: update_ended())     # once a callable says so
        pool.free(out)                             # reusable now

    A buffer ``join`` hands out is never written again until ``hold``'s check says it is done, or ``free``: a
    buffer that zmq still sends from (``copy=False``), or that an update may still read (``jax.device_put`` of a
    host array on the CPU backend can alias it), stays as it is. A join that finds no free buffer of its shape
    allocates one; up to ``keep`` per shape are kept for reuse, the others are dropped once released.
    One segment that is exactly ``columns`` wide is returned as it is (no copy, nothing to release). The arrays
    are 64-byte aligned, so on the CPU backend ``jax.device_put`` of a joined batch is no copy at all: the device
    array is the pooled memory, which is why the trainer holds it until its update has ended.
    ``counts``: reused, allocated, passed (no copy needed).
    """

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self.slots: dict[tuple, list[list]] = {}  # shape key -> [[trajectory, done check]]
        self.counts = {"reused": 0, "allocated": 0, "passed": 0}

    @staticmethod
    def _key(seg: Trajectory, columns: int) -> tuple:
        leaves = [(k, getattr(seg, k)) for k in FIELDS] + sorted(seg.extras.items())
        return columns, tuple((k, x.dtype.str, x.shape[0], x.shape[2:]) for k, x in leaves), seg.policy_version.dtype.str

    def _take(self, seg: Trajectory, columns: int) -> Trajectory:
        key = self._key(seg, columns)
        slots = self.slots.setdefault(key, [])
        for slot in slots:
            if slot[1]():
                slot[1] = _never  # the caller's until hold / free
                self.counts["reused"] += 1
                return slot[0]
        self.counts["allocated"] += 1

        def empty(x: np.ndarray) -> np.ndarray:
            return aligned_empty((x.shape[0], columns, *x.shape[2:]), x.dtype)

        out = Trajectory(**{k: empty(getattr(seg, k)) for k in FIELDS},
                         extras={k: empty(v) for k, v in seg.extras.items()},
                         policy_version=np.empty(columns, seg.policy_version.dtype))
        if len(slots) < self.keep:
            slots.append([out, _never])
        return out

    def join(self, segments: list[Trajectory], columns: int) -> tuple[Trajectory, list[Trajectory]]:
        """The first ``columns`` columns of ``segments`` (in order) in one contiguous trajectory, and what is left
        (the untouched segments and a view of the one cut). Raises ValueError when they hold fewer columns."""
        have = sum(s.reward.shape[1] for s in segments)
        if not segments or columns <= 0 or have < columns:
            raise ValueError(f"cannot join {columns} columns from segments holding {have}")
        first = segments[0]
        if first.reward.shape[1] == columns and all(x.flags.c_contiguous for x in (*first[:5], *first.extras.values())):
            self.counts["passed"] += 1
            return first, list(segments[1:])
        out = self._take(first, columns)
        at, i = 0, 0
        rest: list[Trajectory] = []
        while at < columns:
            seg = segments[i]
            i += 1
            n = min(seg.reward.shape[1], columns - at)
            for k in FIELDS:
                getattr(out, k)[:, at:at + n] = getattr(seg, k)[:, :n]
            for k, v in seg.extras.items():
                out.extras[k][:, at:at + n] = v[:, :n]
            out.policy_version[at:at + n] = seg.policy_version[:n]
            at += n
            if n < seg.reward.shape[1]:
                rest.append(split_segments(seg, n)[1])
        return out, rest + list(segments[i:])

    def hold(self, out: Trajectory, done: object) -> None:
        """``out`` (from ``join``) is reusable once ``done`` says so: an object with ``.done`` (a
        ``zmq.MessageTracker``) or a callable returning True."""
        check = done if callable(done) else (lambda: done.done)
        for slots in self.slots.values():
            for slot in slots:
                if slot[0] is out:
                    slot[1] = check
                    return

    def free(self, out: Trajectory) -> None:
        """``out`` is reusable now."""
        self.hold(out, _now)

    def busy(self) -> int:
        """Pooled buffers not reusable yet."""
        return sum(not slot[1]() for slots in self.slots.values() for slot in slots)
