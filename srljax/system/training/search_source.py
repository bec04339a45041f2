"""The trainer's sample source for MuZero in the worker graph: window batches with their targets from the buffers.

    source = SearchSource(worker)   # chosen by ``parts.trainer_parts`` for a search algorithm (algo=muzero, distributed)

The buffer workers (``srljax/system/staging/search_buffer.py``) keep the replay, reanalyse and compute the targets;
each of their messages is one update's ``algos.muzero.UnrollBatch`` (checked here against the shapes the algorithm
trains on) or a report (an empty tree). Both carry the env steps inserted since the buffer's last message and its
finished episodes (the env-step count and episode window of the lines), a batch also how many windows were
reanalysed, in how many seconds, and its targets' params versions: the lines get ``reanalyse/share``,
``reanalyse/seconds_per_sample`` and ``target_lag`` (this update's version minus the mean version of the targets
it trained on). Batches queue here at most ``QUEUE`` deep; the buffers pace them to the env steps inserted.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import numpy as np

from srljax.comm import Message
from srljax.layout import BUFFER
from srljax.system.shell.bounds import FLOOR, HEADROOM, check_message_cap
from srljax.system.shell.common import check_array, episodes_from_meta
from srljax.system.shell.worker import Worker
from srljax.system.training.sources import SampleCounts

if TYPE_CHECKING:
    from srljax.learning.learner import Learner

QUEUE = 4  # batches held here; more are dropped (counted): the buffers pace them, so this is a bad sender


class SearchSource(SampleCounts):
    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.batches: deque[tuple[Any, dict[str, Any]]] = deque()
        self.fields: dict[str, tuple[tuple[int, ...], str]] = {}
        self.placed_meta: dict[str, Any] = {}
        self.window: list[dict[str, Any]] = []  # the trained batches' meta since the last line

    def _fields(self) -> dict[str, tuple[tuple[int, ...], str]]:
        if not self.fields:
            from srljax.replay.search import batch_fields

            w = self.worker
            self.fields = batch_fields(w.learner.algo, w.spec, w.cfg.algo)
        return self.fields

    def example_batch(self) -> Any:
        from algos.muzero import UnrollBatch

        return UnrollBatch(**{name: np.zeros(shape, dtype) for name, (shape, dtype) in self._fields().items()})

    def samples_limit(self) -> int:
        size = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in self._fields().values())
        return FLOOR + HEADROOM * size

    def samples_message_limit(self) -> int:
        limit = self.samples_limit()
        check_message_cap(self.worker.cfg, {"MuZero window batches": (limit - FLOOR) // HEADROOM})
        return limit

    def start(self, meta: dict[str, Any]) -> None:
        self.start_counts(meta)

    def announce(self) -> None:
        cfg, algo = self.worker.cfg, self.worker.learner.algo
        self.worker.log(f"MuZero: batches of {algo.windows} windows from {cfg.layout.num_buffer_workers} buffer "
                        f"worker(s), one per {cfg.env_steps_per_update:,} env steps, reanalyse ratio "
                        f"{cfg.algo.reanalyse_ratio:g}, {cfg.num_updates:,} updates")

    def take(self, msg: Message) -> None:
        w, meta = self.worker, msg.meta
        steps = meta.get("env_steps", 0)
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0 or not isinstance(meta.get(BUFFER), int):
            w.stats.add("samples_invalid")
            return
        self.env_steps += steps
        w.stats.add("env_steps", steps)
        self.episodes.add(*episodes_from_meta(meta, max_count=max(steps, 1)))
        if not msg.tree:
            return  # a report
        try:
            batch = self._checked(msg.tree)
            stats = {k: float(meta[k]) for k in ("reanalysed", "windows", "target_version", "reanalyse_s")}
        except (ValueError, KeyError, TypeError):
            w.stats.add("samples_invalid")
            return
        if len(self.batches) >= QUEUE:
            w.stats.add("batches_dropped_full")
            return
        w.stats.add("samples")
        self.batches.append((batch, stats))

    def _checked(self, tree: Any) -> Any:
        from algos.muzero import UnrollBatch

        fields = self._fields()
        if not isinstance(tree, dict) or set(tree) != set(fields):
            raise ValueError("not a MuZero window batch")
        return UnrollBatch(**{name: check_array(name, tree[name], shape, dtype) for name, (shape, dtype) in fields.items()})

    def next_batch(self, learner: Learner) -> Any:
        if not self.batches:
            return None
        batch, self.placed_meta = self.batches.popleft()
        return learner.put(batch)

    def dispatch(self, learner: Learner, placed: Any) -> Any:
        self.window.append({**self.placed_meta, "lag": learner.version - self.placed_meta["target_version"]})
        return learner.step(placed)

    def ended(self, outputs: Any, first: int) -> dict[str, Any]:
        return outputs

    def line(self, version: int) -> tuple[int, dict[str, Any]]:
        seen, self.window = self.window, []
        if not seen:
            return self.env_steps, {}
        reanalysed = sum(m["reanalysed"] for m in seen)
        return self.env_steps, {
            "reanalyse/share": reanalysed / max(sum(m["windows"] for m in seen), 1.0),
            "reanalyse/seconds_per_sample": sum(m["reanalyse_s"] for m in seen) / max(reanalysed, 1.0),
            "target_lag": float(np.mean([m["lag"] for m in seen]))}

    def waiting(self) -> str:
        return f"batches: holds {len(self.batches)} (the buffer workers send one per batch of env steps inserted)"
