"""Prioritized experience replay (Schaul et al. 2016), numpy only, for the single-process loop and a buffer worker.

    replay = Replay(capacity=10_000, num_streams=env.spec.num_envs, obs_shape=(4,), obs_dtype="float32",
                    action_shape=(), action_dtype="int32", n_step=3, alpha=0.6)
    replay.add(ts.obs, action, ts.reward, ts.terminated, ts.truncated, stream=ts.env_id)   # rows as they arrive
    batch, keys = replay.sample(32, beta=0.4, rng=rng)          # a ReplayBatch with importance weights
    replay.update_priorities(keys, np.abs(td_error))            # after the update; stale keys are skipped

Rows are stored once, in one ring per stream (one env of one actor): sampling row t reads its n-step window
from the stream's next rows, so observations are not duplicated and a window never reaches another env's
rows. A sum-tree (``srljax.replay.sum_tree``) holds ``(priority + eps) ** alpha`` per sampleable row; a key
records when its row was written, so a late priority never lands on new data. ``dedup_frames`` keeps only
each Atari row's newest frame and restacks exactly what the env returned; ``sequence_length`` samples R2D2's
sequences with their stored ``extras``. ``memory_problem`` checks ``replay_bytes`` against MemAvailable when
the replay is built. ``docs/architecture.md``, "Replay: DQN".
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from envs.atari import atari_options
from srljax.replay.sum_tree import SumTree
from srljax.types import ReplayBatch, SequenceBatch

MEMORY_HEADROOM = 0.9
"""the replay may take this share of MemAvailable; the rest is for the process, JAX and the envs."""
GB = 1e9


ROW_ARRAYS = ("obs", "stack_start", "action", "reward", "terminated", "truncated", "written", "initial")
"""the per-slot arrays a checkpoint of the replay holds (``Replay.state``)."""


def map_arrays(fn: Any, tree: Any) -> Any:
    """``fn`` on every array of ``tree`` (an array or a dict of arrays: a ``SequenceBatch``'s ``state``)."""
    return {k: fn(v) for k, v in tree.items()} if isinstance(tree, dict) else fn(tree)


class SampleKeys(NamedTuple):
    """Where a sampled batch came from, for ``update_priorities``: slot [N] and its write count [N]."""

    slot: np.ndarray
    written: np.ndarray


class ReplayMemoryError(ValueError):
    """The configured replay does not fit in this machine's memory; the message names size and fix."""


def replay_bytes(capacity: int, num_streams: int, obs_shape: tuple[int, ...], obs_dtype: str,
                 action_shape: tuple[int, ...] = (), action_dtype: str = "int32", dedup_frames: bool = False,
                 extra_row_bytes: int = 0) -> int:
    """Bytes a ``Replay`` of these sizes allocates once full (storage, flags, stored extras and sum-tree)."""
    rows = (capacity // max(num_streams, 1)) * max(num_streams, 1)
    stored = obs_shape[1:] if dedup_frames else obs_shape
    per_row = math.prod(stored) * np.dtype(obs_dtype).itemsize
    per_row += math.prod(action_shape) * np.dtype(action_dtype).itemsize + 4 + 3 + 8 + 4  # reward, 3 flags, written, initial
    per_row += extra_row_bytes
    tree = 2 * (1 << max(1, math.ceil(math.log2(max(rows, 2))))) * 8
    return rows * per_row + tree


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, or None where there is none (the check is then skipped)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_problem(capacity: int, num_streams: int, obs_shape: tuple[int, ...], obs_dtype: str,
                   action_shape: tuple[int, ...] = (), action_dtype: str = "int32", dedup_frames: bool = False,
                   available: int | None = None, key: str = "algo.replay", extra_row_bytes: int = 0) -> str | None:
    """None if the replay fits in ``MEMORY_HEADROOM`` of ``available`` (default: MemAvailable), else the message."""
    available = available_memory_bytes() if available is None else available
    need = replay_bytes(capacity, num_streams, obs_shape, obs_dtype, action_shape, action_dtype, dedup_frames,
                        extra_row_bytes)
    if available is None or need <= MEMORY_HEADROOM * available:
        return None
    shape = "x".join(map(str, obs_shape))
    fixes = []
    if not dedup_frames and len(obs_shape) == 3:
        deduped = replay_bytes(capacity, num_streams, obs_shape, obs_dtype, action_shape, action_dtype, True,
                               extra_row_bytes)
        fixes.append(f"set {key}.dedup_frames=true (stores single {'x'.join(map(str, obs_shape[1:]))} frames "
                     f"and restacks them when sampled: {deduped / GB:.1f} GB)")
    per_row = max(need / max(capacity, 1), 1.0)
    fixes.append(f"lower {key}.capacity to at most {int(MEMORY_HEADROOM * available / per_row):,}")
    return (f"{key}.capacity={capacity:,} transitions of {shape} {obs_dtype} observations"
            f"{' (frames deduplicated)' if dedup_frames else ''} need {need / GB:.1f} GB, more than "
            f"{MEMORY_HEADROOM:.0%} of the {available / GB:.1f} GB this machine has available (MemAvailable): "
            + " or ".join(fixes))


def config_memory_problems(cfg: Any) -> list[str]:
    """Before launch: the replay's memory for an envpool Atari config, whose frames are known from the
    config alone (other envs are checked when the replay is built, with the env's real spec)."""
    e, replay = cfg.env, cfg.algo.replay
    if e.factory or not e.id.endswith("-v5"):
        return []
    from envs.envpool_env import is_atari  # envpool loads slowly; only Atari-looking ids pay for it

    if not is_atari(e.id):
        return []
    o = atari_options(e)
    problem = memory_problem(replay.capacity, e.num_envs, (o["stack_num"], o["img_height"], o["img_width"]), "uint8",
                             dedup_frames=replay.dedup_frames, extra_row_bytes=extras_bytes(replay_extras(cfg.algo)))
    return [problem] if problem else []


def frame_stack(cfg: Any) -> int:
    """Rows of a deduplicated observation (``algo.replay.dedup_frames``: the Atari frame stack), else 1."""
    return atari_options(cfg.env)["stack_num"] if cfg.algo.replay.dedup_frames else 1


def sequence_rows(algo: Any) -> int:
    """Rows per sampled sequence of a sequence replay (R2D2's ``sequence_rows()``); 0: transitions (DQN, SAC, TD3)."""
    rows = getattr(algo, "sequence_rows", None)
    return int(rows()) if callable(rows) else 0


def replay_window(algo: Any) -> int:
    """Rows after a stored row that must be written before it can be sampled: the n-step window, or the rest of
    the sequence it starts."""
    return sequence_rows(algo) - 1 if sequence_rows(algo) else algo.n_step


def replay_extras(algo: Any, spec: Any = None) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{name: (per-row shape, dtype)}``: act's extras the replay stores with each row (R2D2: the LSTM carry; QMIX:
    the agents' GRU state, whose shape needs ``spec``, the env's)."""
    extras = getattr(algo, "replay_extras", None)
    return dict(extras(spec)) if callable(extras) else {}


def extras_bytes(extras: dict[str, tuple[tuple[int, ...], str]]) -> int:
    """Bytes per row of stored extras ``{name: (shape, dtype)}``."""
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in extras.values())


def batch_fields(cfg: Any, spec: Any) -> dict[str, Any]:
    """What one sampled batch of ``cfg.algo`` holds: ``{field: (shape, dtype)}`` of a ``ReplayBatch`` or, for a
    sequence replay, a ``SequenceBatch`` (its ``state`` as ``{name: (shape, dtype)}``); what a trainer checks a
    shard's batch against and compiles for."""
    a, n = cfg.algo, cfg.algo.batch_size
    obs, action = (spec.obs_shape, spec.obs_dtype), (spec.action_shape, spec.action_dtype)
    rows = sequence_rows(a)
    if rows:
        lead = (n, rows)
        return {"obs": ((*lead, *obs[0]), obs[1]), "action": ((*lead, *action[0]), action[1]),
                "reward": (lead, "float32"), "terminated": (lead, "bool"), "truncated": (lead, "bool"),
                "state": {k: ((n, *shape), dtype) for k, (shape, dtype) in replay_extras(a, spec).items()},
                "weight": ((n,), "float32")}
    k = a.n_step
    return {"obs": ((n, *obs[0]), obs[1]), "action": ((n, *action[0]), action[1]), "reward": ((n, k), "float32"),
            "terminated": ((n, k), "bool"), "truncated": ((n, k), "bool"), "next_obs": ((n, *obs[0]), obs[1]),
            "weight": ((n,), "float32")}


def batch_of(cfg: Any, fields: dict[str, Any]) -> ReplayBatch | SequenceBatch:
    """The batch type of ``cfg.algo`` from its fields (``batch_fields``' keys, arrays as values)."""
    return SequenceBatch(**fields) if sequence_rows(cfg.algo) else ReplayBatch(**fields)


def window_problems(cfg: Any) -> list[str]:
    """Whether each env's share of ``algo.replay.capacity`` holds an n-step window (plus the frame stack), and the
    capacity one batch."""
    r, e, n_step = cfg.algo.replay, cfg.env, replay_window(cfg.algo)
    per_env, stack = r.capacity // max(e.num_envs, 1), frame_stack(cfg)
    if per_env <= n_step + stack:
        window = "a sequence" if n_step != cfg.algo.n_step else "an n-step window"
        return [f"algo.replay.capacity={r.capacity:,} leaves {per_env} rows for each of env.num_envs={e.num_envs} "
                f"envs, fewer than {window} needs (> {n_step} + frame stack {stack} = {n_step + stack}); raise "
                "the capacity"]
    if r.capacity < cfg.algo.batch_size:
        return [f"algo.replay.capacity={r.capacity:,} is smaller than one batch of algo.batch_size={cfg.algo.batch_size}"]
    return []


def config_replay(cfg: Any, spec: Any, capacity: int, num_streams: int, check_memory: bool = True) -> Replay:
    """The replay ``cfg.algo`` asks for (``algo.replay``, n-step window or sequences, stored extras), ``capacity``
    transitions in ``num_streams`` streams of observations as ``spec`` (an ``EnvSpec``) describes."""
    a, r = cfg.algo, cfg.algo.replay
    return Replay(capacity, num_streams, spec.obs_shape, spec.obs_dtype, spec.action_shape, spec.action_dtype,
                  n_step=a.n_step, alpha=r.alpha, priority_eps=r.priority_eps, dedup_frames=r.dedup_frames,
                  check_memory=check_memory, sequence_length=sequence_rows(a), extras=replay_extras(a, spec))


class Replay:
    """A fixed-capacity prioritized replay of env rows kept per stream; see the module docstring."""

    def __init__(self, capacity: int, num_streams: int, obs_shape: tuple[int, ...], obs_dtype: str,
                 action_shape: tuple[int, ...] = (), action_dtype: str = "int32", *, n_step: int = 1,
                 alpha: float = 0.6, priority_eps: float = 1e-6, dedup_frames: bool = False,
                 check_memory: bool = True, sequence_length: int = 0,
                 extras: dict[str, tuple[tuple[int, ...], str]] | None = None):
        obs_shape, action_shape = tuple(obs_shape), tuple(action_shape)
        self.sequence_length = sequence_length
        if sequence_length > 0:  # a start row needs its sequence's other rows written: that is its window
            n_step = sequence_length - 1
        self.stack = obs_shape[0] if dedup_frames and len(obs_shape) == 3 else 1
        length = capacity // max(num_streams, 1)
        problems = []
        if num_streams < 1 or n_step < 1 or alpha < 0 or priority_eps <= 0:
            problems.append(f"num_streams={num_streams} and n_step={n_step} must be >= 1, alpha={alpha} >= 0, "
                            f"priority_eps={priority_eps} > 0")
        elif length <= n_step + self.stack:
            problems.append(f"capacity={capacity:,} gives each of {num_streams} streams {length} rows; it needs "
                            f"more than n_step + frame stack = {n_step + self.stack}: raise the capacity")
        if dedup_frames and (len(obs_shape) != 3 or obs_shape[0] < 2):
            problems.append(f"dedup_frames needs stacked frames [stack, height, width] as observations; these are "
                            f"{obs_shape} {obs_dtype}: set dedup_frames=false")
        if problems:
            raise ValueError("; ".join(problems))
        if check_memory and (problem := memory_problem(capacity, num_streams, obs_shape, obs_dtype, action_shape,
                                                       action_dtype, dedup_frames, key="replay",
                                                       extra_row_bytes=extras_bytes(extras or {}))):
            raise ReplayMemoryError(problem)
        self.num_streams, self.length, self.n_step = num_streams, length, n_step
        self.obs_shape, self.action_shape = obs_shape, action_shape
        self.alpha, self.priority_eps, self.dedup = alpha, priority_eps, dedup_frames
        rows = num_streams * length
        self.capacity = rows
        # np.zeros: pages are committed as rows are written, so a large replay costs memory only as it fills
        self.obs = np.zeros((rows, *(obs_shape[1:] if dedup_frames else obs_shape)), obs_dtype)
        self.stack_start = np.zeros(rows, bool)
        self.action = np.zeros((rows, *action_shape), action_dtype)
        self.reward = np.zeros(rows, np.float32)
        self.terminated = np.zeros(rows, bool)
        self.truncated = np.zeros(rows, bool)
        self.written = np.full(rows, -1, np.int64)  # the stream's row count when this slot was written
        self.initial = np.full(rows, np.nan, np.float32)  # a priority given at insert (Ape-X actors), NaN: none
        self.extras = {name: np.zeros((rows, *shape), dtype) for name, (shape, dtype) in (extras or {}).items()}
        self.row_arrays = ROW_ARRAYS + tuple(f"extras/{name}" for name in self.extras)
        self.count = np.zeros(num_streams, np.int64)  # rows written per stream, ever
        self.last_obs = np.zeros((num_streams, *obs_shape), obs_dtype) if dedup_frames else None
        self.tree = SumTree(rows)
        self.size = 0  # sampleable rows
        self.max_priority = 1.0
        self.inserted = 0

    def add(self, obs: np.ndarray, action: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
            truncated: np.ndarray, stream: np.ndarray, priority: np.ndarray | None = None,
            extras: dict[str, np.ndarray] | None = None) -> None:
        """Append one row to each of the streams ``stream`` ([B] distinct ints): a ``TimeStep``'s rows and the
        actions taken there. ``priority`` [B]: each row's initial priority (an Ape-X actor's ``|TD error|``),
        used once its window is written; without it a row starts at the largest priority seen. ``extras``:
        ``{name: [B, ...]}`` for every extra this replay stores (R2D2's carry)."""
        stream = np.asarray(stream, np.int64)
        obs = np.asarray(obs)
        b = stream.shape[0]
        if obs.shape != (b, *self.obs_shape) or np.shape(action) != (b, *self.action_shape):
            raise ValueError(f"Replay.add: obs {obs.shape} and action {np.shape(action)} must be "
                             f"{(b, *self.obs_shape)} and {(b, *self.action_shape)} for {b} rows")
        if b and (stream.min() < 0 or stream.max() >= self.num_streams or np.unique(stream).size != b):
            raise ValueError(f"Replay.add: stream ids {stream.tolist()} must be distinct and in "
                             f"[0, {self.num_streams})")
        if set(extras or {}) != set(self.extras):
            raise ValueError(f"Replay.add: extras {sorted(extras or {})} must be the stored ones {sorted(self.extras)}")
        count = self.count[stream]
        slot = stream * self.length + count % self.length
        for name, store in self.extras.items():
            store[slot] = extras[name]
        if self.dedup:
            self.obs[slot], self.stack_start[slot] = obs[:, -1], self._stack_starts(obs, stream)
        else:
            self.obs[slot] = obs
        self.action[slot] = action
        self.reward[slot] = reward
        self.terminated[slot] = terminated
        self.truncated[slot] = truncated
        self.written[slot] = count
        self.initial[slot] = np.nan if priority is None else np.abs(np.asarray(priority, np.float32))
        # the new row's window is not written yet; the row n back now has its whole window
        slots, weights = [slot], [np.zeros(b)]
        ready = count >= self.n_step
        ready_slot = stream[ready] * self.length + (count[ready] - self.n_step) % self.length
        done = self.terminated[ready_slot] | self.truncated[ready_slot]
        slots.append(ready_slot)
        given = self.initial[ready_slot]
        start = np.where(np.isnan(given), self.max_priority, given.astype(np.float64) + self.priority_eps)
        weights.append(np.where(done, 0.0, start**self.alpha))
        if self.dedup:  # the rows right after the overwritten one lose the frames their stacks reach back to
            wrapped = count >= self.length
            lost = stream[wrapped, None] * self.length + (count[wrapped, None] + np.arange(1, self.stack)) % self.length
            slots.append(lost.reshape(-1))
            weights.append(np.zeros(lost.size))
        self._set_weights(np.concatenate(slots), np.concatenate(weights))
        self.count[stream] += 1
        self.inserted += b

    def cut_streams(self, streams: np.ndarray) -> int:
        """The envs behind ``streams`` were recreated (an actor restart, a resumed run): end each stream's
        episode in progress at its last stored row, as a time limit does, so no n-step window runs from
        the old episode into the new env's rows. Returns how many streams were cut."""
        streams = np.asarray(streams, np.int64)
        streams = streams[self.count[streams] > 0]
        last = streams * self.length + (self.count[streams] - 1) % self.length
        live = last[~(self.terminated[last] | self.truncated[last])]
        self.truncated[live] = True
        if self.dedup:
            self.last_obs[streams] = 0  # the next stack starts afresh (a reset repeats one frame)
        return int(live.size)

    # -- run state: a checkpoint of the contents -----------------------------------------------------
    def state(self) -> dict[str, np.ndarray]:
        """The contents as numpy arrays, only the rows written so far (``[E, filled, ...]``): for a
        checkpoint. ``load_state`` of a replay built with the same sizes restores it exactly."""
        filled = int(min(self.count.max(initial=0), self.length))
        per_stream = {name: self._rows(name).reshape(self.num_streams, self.length, *self._rows(name).shape[1:])
                      for name in self.row_arrays}
        out = {f"rows/{name}": np.ascontiguousarray(v[:, :filled]) for name, v in per_stream.items()}
        out |= {"count": self.count.copy(), "tree": self.tree.get(np.arange(self.capacity)).reshape(
            self.num_streams, self.length)[:, :filled].copy(),
                "scalars": np.array([self.max_priority, self.inserted], np.float64)}
        if self.dedup:
            out["last_obs"] = self.last_obs.copy()
        return out

    def state_like(self, filled: int) -> dict[str, np.ndarray]:
        """Arrays shaped like a ``state()`` of ``filled`` rows per stream (what a checkpoint restore needs)."""
        e = self.num_streams
        out = {f"rows/{name}": np.empty((e, filled, *self._rows(name).shape[1:]), self._rows(name).dtype)
               for name in self.row_arrays}
        out |= {"count": np.empty(e, np.int64), "tree": np.empty((e, filled), np.float64),
                "scalars": np.empty(2, np.float64)}
        if self.dedup:
            out["last_obs"] = np.empty_like(self.last_obs)
        return out

    def filled_rows(self) -> int:
        """Rows per stream ``state()`` holds (its arrays' second axis)."""
        return int(min(self.count.max(initial=0), self.length))

    def load_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore ``state()``'s contents into this (empty, same-sized) replay."""
        filled = state["count"].shape == self.count.shape and int(state["tree"].shape[1])
        if filled is False or filled > self.length:
            raise ValueError(f"replay state of {state['count'].shape[0]} streams x {state['tree'].shape[1]} rows does "
                             f"not fit this replay of {self.num_streams} streams x {self.length} rows: restore it with "
                             "the config it was saved with")
        for name in self.row_arrays:
            store = self._rows(name)
            store.reshape(self.num_streams, self.length, *store.shape[1:])[:, :filled] = state[f"rows/{name}"]
        self.count[...] = state["count"]
        slots = (np.arange(self.num_streams)[:, None] * self.length + np.arange(filled)).reshape(-1)
        self._set_weights(slots, np.asarray(state["tree"], np.float64).reshape(-1))
        self.max_priority, self.inserted = float(state["scalars"][0]), int(state["scalars"][1])
        if self.dedup:
            self.last_obs[...] = state["last_obs"]

    def _rows(self, name: str) -> np.ndarray:
        """The per-slot array ``name`` of ``row_arrays`` (``extras/<name>``: a stored extra)."""
        return self.extras[name.removeprefix("extras/")] if name.startswith("extras/") else getattr(self, name)

    def sample(self, batch_size: int, beta: float, rng: np.random.Generator,
               batches: int = 0) -> tuple[ReplayBatch | SequenceBatch, SampleKeys]:
        """``batch_size`` transitions drawn in proportion to their priorities (stratified over the total),
        with importance weights for exponent ``beta``; raises if nothing is sampleable yet.

        ``batches=K`` draws K batches at once, stacked ``[K, batch_size, ...]`` (keys too): the K x
        ``batch_size`` strata are shuffled before they are dealt into batches, so each batch spans the
        whole replay, and each batch's weights are divided by its own largest, as K calls would. A sequence
        replay (``sequence_length``) returns a ``SequenceBatch`` instead."""
        if self.size == 0:
            raise ValueError(f"Replay.sample: no sampleable transition yet ({self.inserted} rows inserted; a row "
                             f"needs its {self.n_step}-step window written)")
        k = max(batches, 1)
        n = k * batch_size
        total = self.tree.total
        u = (np.arange(n) + rng.random(n)) * (total / n)
        if batches:
            u = rng.permutation(u)
        slot = self.tree.find(np.minimum(u, np.nextafter(total, 0.0)))
        prob = self.tree.get(slot) / total
        weight = ((self.size * prob) ** -beta).reshape(k, batch_size)
        weight = (weight / weight.max(axis=1, keepdims=True)).astype(np.float32).reshape(-1)
        gather = self._gather_sequences if self.sequence_length else self._gather
        batch, keys = gather(slot, weight), SampleKeys(slot, self.written[slot])
        if not batches:
            return batch, keys
        return (type(batch)(*(map_arrays(lambda x: x.reshape(k, batch_size, *x.shape[1:]), x) for x in batch)),
                SampleKeys(*(x.reshape(k, batch_size) for x in keys)))  # views, no copy

    def _gather(self, slot: np.ndarray, weight: np.ndarray) -> ReplayBatch:
        """The transitions starting at rows ``slot`` [N] with their n-step windows and bootstrap rows."""
        base, pos = (slot // self.length) * self.length, slot % self.length
        window = base[:, None] + (pos[:, None] + 1 + np.arange(self.n_step)) % self.length  # [N, n]
        terminated, truncated = self.terminated[window], self.truncated[window]
        done = terminated | truncated
        first_done = np.where(done.any(axis=1), done.argmax(axis=1), self.n_step - 1)
        bootstrap = base + (pos + 1 + first_done) % self.length
        both = self._obs(np.concatenate([slot, bootstrap]))  # one gather for obs and next_obs
        return ReplayBatch(obs=both[: slot.size], action=self.action[slot], reward=self.reward[window],
                           terminated=terminated, truncated=truncated, next_obs=both[slot.size:], weight=weight)

    def _gather_sequences(self, slot: np.ndarray, weight: np.ndarray) -> SequenceBatch:
        """The sequences of ``sequence_length`` rows starting at rows ``slot`` [N], with the start rows' extras."""
        base, pos = (slot // self.length) * self.length, slot % self.length
        rows = base[:, None] + (pos[:, None] + np.arange(self.sequence_length)) % self.length  # [N, L]
        obs = self._obs(rows.reshape(-1))
        return SequenceBatch(obs=obs.reshape(*rows.shape, *obs.shape[1:]), action=self.action[rows],
                             reward=self.reward[rows], terminated=self.terminated[rows],
                             truncated=self.truncated[rows],
                             state={name: store[slot] for name, store in self.extras.items()}, weight=weight)

    def update_priorities(self, keys: SampleKeys, priorities: np.ndarray) -> int:
        """Set new priorities (e.g. ``|td error|``, [N]) for a sampled batch; returns how many were applied
        (rows overwritten or no longer sampleable since they were drawn are skipped)."""
        priorities = np.abs(np.asarray(priorities, np.float64))
        if priorities.shape != keys.slot.shape or not np.all(np.isfinite(priorities)):
            raise ValueError(f"Replay.update_priorities: priorities {priorities.shape} must be finite, one per "
                             f"sample {keys.slot.shape}")
        keep = (self.written[keys.slot] == keys.written) & (self.tree.get(keys.slot) > 0)
        boosted = priorities + self.priority_eps
        self.tree.set(keys.slot[keep], boosted[keep] ** self.alpha)  # sampleable before and after: size unchanged
        if keep.any():
            self.max_priority = max(self.max_priority, float(boosted[keep].max()))
        return int(keep.sum())

    def _set_weights(self, slots: np.ndarray, weights: np.ndarray) -> None:
        self.size += int(np.count_nonzero(weights)) - int(np.count_nonzero(self.tree.get(slots)))
        self.tree.set(slots, weights)

    def _stack_starts(self, obs: np.ndarray, stream: np.ndarray) -> np.ndarray:
        """[B] bool: the stack repeats one frame (a fresh start); otherwise it must continue the stream's last row."""
        fresh = np.all(obs == obs[:, -1:], axis=tuple(range(1, obs.ndim)))
        seen = self.count[stream] > 0
        continues = seen & np.all(obs[:, :-1] == self.last_obs[stream, 1:], axis=tuple(range(1, obs.ndim)))
        if np.any(~fresh & ~continues):
            raise ValueError("replay dedup_frames: an observation stack neither repeats one frame nor continues its "
                             "env's previous stack, so it cannot be rebuilt from single frames: set dedup_frames=false")
        self.last_obs[stream] = obs
        return fresh

    def _obs(self, slot: np.ndarray) -> np.ndarray:
        """Observations of rows ``slot`` [N]; deduplicated frames are restacked back to each stack's start."""
        if not self.dedup:
            return np.take(self.obs, slot, axis=0)  # np.take: about 2x faster than fancy indexing here
        rows = np.empty((slot.shape[0], self.stack), np.int64)
        cur = rows[:, -1] = slot
        for j in range(2, self.stack + 1):
            previous = (cur // self.length) * self.length + (cur % self.length - 1) % self.length
            cur = rows[:, -j] = np.where(self.stack_start[cur], cur, previous)
        return np.take(self.obs, rows.reshape(-1), axis=0).reshape(slot.shape[0], self.stack, *self.obs.shape[1:])
