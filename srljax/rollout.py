"""Turn a stream of env batches (sync or async, any env order) into time-major segments.

Used by the single-process loop and by ActorWorker alike::

    builder = SegmentBuilder(spec, num_steps=128, extras_spec=algo.extras_spec)
    ts = env.recv()
    action, extras, _ = act(params, ts.obs, (), None, key)   # a feed-forward act (``srljax.acting`` does this)
    env.send(action, ts.env_id)
    builder.add(ts, action, extras, version)
    if builder.ready(batch_envs):
        batch = builder.pop(batch_envs)   # Trajectory [T+1, batch_envs, ...]

Each environment fills its own column; when a column holds ``T + 1`` rows it becomes a finished
segment and its last row starts the next one (the bootstrap row is shared). This is exact for
envpool's async mode, where a ``recv`` returns whichever environments are ready.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from srljax.types import EnvSpec, TimeStep, Trajectory

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

    def __init__(self, spec: EnvSpec, num_steps: int, extras_spec: Mapping[str, tuple[tuple[int, ...], str]]):
        self.spec = spec
        self.num_steps = num_steps
        n = spec.num_envs
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
