"""The trainer's sample source for Ape-X: sampled batches pulled from every replay shard, priorities sent back.

    source = ReplaySource(worker)   # chosen by ``parts.trainer_parts`` for a replay algorithm (algo=dqn, distributed)

The source of a replay algorithm's trainer: batches from the replay buffer workers instead of segments. A shard
samples only the batches this trainer granted it (``PREFETCH`` in flight, ``QUEUE`` held), so batches carry
fresh priorities and no queue grows; ``algo.updates_per_call`` trains K batches in one compiled call; the
shards' reports make its ``env_steps`` and episode window; ``algo.throttle`` holds updates to the replay ratio
(``srljax.replay.apex.trainer_allowance``); each update's ``|TD error|`` goes back to the shard that drew the
batch. After each checkpoint the shards save the replay for that step, and ``--resume`` restores the newest
step every shard wrote. ``docs/architecture.md``, "Ape-X".
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from srljax.comm import Message, PrioritySender, PriorityUpdate
from srljax.layout import BUFFER, PRIORITIES
from srljax.replay import snapshots as replay_snapshots
from srljax.replay.apex import num_shards, replay_ratio, samples_per_insert, trainer_allowance
from srljax.replay.buffer import batch_fields, batch_of
from srljax.system.shell.bounds import FLOOR, HEADROOM, check_message_cap, stream_limits, stream_message_limits
from srljax.system.shell.common import check_array, episodes_from_meta, wins_from_meta
from srljax.system.shell.worker import Worker
from srljax.system.training.sources import SampleCounts
from srljax.types import ReplayBatch, SequenceBatch

if TYPE_CHECKING:
    from srljax.learning.learner import Learner

PREFETCH = 2  # batches one shard may have in flight towards the trainer
QUEUE = 2  # batches held here, ready to be put on the devices
GRANT_EVERY_S = 1.0

Keys = tuple[int, str, np.ndarray, np.ndarray]  # shard, incarnation, slot, written: where a batch's priorities go


class ReplaySource(SampleCounts):
    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self.resumed_step = -1  # --resume: the checkpoint step restored, which every shard's replay must match
        self.with_replay = False  # --resume with the replay: the shards' restored steps must be the trainer's
        self.shards = 0
        # Shards are configured after the trainer (servers first), so their priorities addresses come
        # in their messages' meta; a restarted shard's new address comes the same way.
        self.back: list[PrioritySender] = []
        self.back_address: dict[int, str] = {}
        self.shard_incarnation: dict[int, str] = {}
        self.granted: list[int] = []
        self.received: list[int] = []
        self.next_grant: list[float] = []
        self.batches: deque[tuple[ReplayBatch, int, str, np.ndarray, np.ndarray]] = deque()
        self.placed_keys: list[Keys] = []
        self.running_keys: list[Keys] = []
        self.prefetch, self.queue = PREFETCH, QUEUE
        self.throttle = False
        self.prioritized = False
        self.replay_sizes: dict[int, int] = {}
        self.epsilons: dict[str, float] = {}
        self.actor_returns: dict[str, deque[float]] = {}  # each actor's recent episodes (log.window)

    def prepare(self) -> None:
        w = self.worker
        self.with_replay = w.resume and not w.restarted and w.cfg.checkpoint.replay
        if self.with_replay:  # before the Checkpointer exists: it restores the newest step left in checkpoints/
            moved = replay_snapshots.set_aside_incomplete(w.cfg.run_dir, num_shards(w.cfg))
            if moved:
                w.log(f"--resume: checkpoint step(s) {moved} have no complete replay snapshot; moved to "
                      f"{replay_snapshots.SET_ASIDE_DIR}/ (the newest step with the replay of every shard resumes)")

    def example_batch(self) -> ReplayBatch | SequenceBatch:
        w = self.worker
        zeros = lambda f: np.zeros(*f) if isinstance(f, tuple) else {k: np.zeros(*v) for k, v in f.items()}  # noqa: E731
        return batch_of(w.cfg, {name: zeros(f) for name, f in batch_fields(w.cfg, w.spec).items()})

    def samples_limit(self) -> int:
        w = self.worker
        fields = batch_fields(w.cfg, w.spec).values()
        leaves = [v for f in fields for v in (f.values() if isinstance(f, dict) else [f])]
        size = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in leaves)
        return max(stream_limits(w.cfg, w.spec, w.extras_spec)["samples"],
                   FLOOR + HEADROOM * (size + 16 * w.cfg.algo.batch_size))

    def samples_message_limit(self) -> int:
        """A replay batch holds all its leaves in one message: the frame bound covers it whole (``check_message_cap``
        refuses a ``layout.max_message_bytes`` below it)."""
        w = self.worker
        limit = self.samples_limit()
        check_message_cap(w.cfg, {"replay batches": (limit - FLOOR) // HEADROOM})
        return max(limit, stream_message_limits(w.cfg, w.spec, w.extras_spec)["samples"])

    def start(self, meta: dict[str, Any]) -> None:
        w, cfg = self.worker, self.worker.cfg
        self.start_counts(meta)
        if self.with_replay:
            self.resumed_step = w.learner.version
        self.shards = num_shards(cfg)
        self.back = [PrioritySender(None, w.trial, ctx=w.ctx) for _ in range(self.shards)]
        self.granted = [0] * self.shards
        self.received = [0] * self.shards
        self.next_grant = [0.0] * self.shards
        self.chunk = cfg.algo.updates_per_call  # updates per compiled call, on that many batches
        self.prefetch, self.queue = max(PREFETCH, 2 * self.chunk), max(QUEUE, 2 * self.chunk)
        self.throttle = cfg.algo.throttle in ("both", "updates")
        self.prioritized = cfg.algo.replay.alpha > 0

    def announce(self) -> None:
        cfg = self.worker.cfg
        self.worker.log(f"Ape-X: batches of {cfg.algo.batch_size} from {self.shards} replay buffer worker(s), replay "
                        f"ratio {replay_ratio(cfg):.4g} +- {cfg.algo.ratio_tolerance:.0%} (throttle: "
                        f"{cfg.algo.throttle}), {cfg.num_updates:,} updates")

    # -- in -----------------------------------------------------------------------------------------------
    def take(self, msg: Message) -> None:
        """A shard's batch or report: count its inserts and episodes; queue the batch."""
        w, meta = self.worker, msg.meta
        try:
            shard, incarnation = int(meta["shard"]), str(meta["incarnation"])
            steps = int(meta.get("env_steps", 0))
            if not 0 <= shard < self.shards or steps < 0:
                raise ValueError(shard)
        except (KeyError, TypeError, ValueError):
            w.stats.add("samples_invalid")
            return
        if self.shard_incarnation.get(shard) != incarnation:  # a new (or restarted) shard: credit starts afresh
            address = meta.get(PRIORITIES)
            if not isinstance(address, str) or not address:
                w.stats.add("samples_invalid")
                return
            restored = meta.get("restored_step")
            if self.resumed_step >= 0 and isinstance(restored, int) and restored >= 0 and restored != self.resumed_step:
                raise RuntimeError(f"--resume: replay buffer worker {shard} restored the replay of checkpoint {restored} "
                                   f"but this trainer restored checkpoint {self.resumed_step}; see "
                                   f"{w.cfg.run_dir}/replay and checkpoints")
            self._connect_shard(shard, address)
            self.shard_incarnation[shard] = incarnation
            self.granted[shard] = self.received[shard] = 0
        self.env_steps += steps
        w.stats.add("env_steps", steps)
        self.episodes.add(*episodes_from_meta(meta, max_count=steps))
        self.episodes.add_wins(wins_from_meta(meta, max_count=steps))
        if isinstance(meta.get("replay_size"), int):
            self.replay_sizes[shard] = meta["replay_size"]
        if isinstance(meta.get("actor_returns"), dict):
            for actor, returns in meta["actor_returns"].items():
                if isinstance(returns, list) and all(isinstance(r, (int, float)) for r in returns):
                    self.actor_returns.setdefault(str(actor), deque(maxlen=w.cfg.log.window)).extend(returns)
        if isinstance(meta.get("epsilons"), dict):
            self.epsilons.update({str(k): float(v) for k, v in meta["epsilons"].items() if isinstance(v, float)})
        served = meta.get("served")  # batches the shard sent before this message
        if isinstance(served, int) and not isinstance(served, bool) and served > self.received[shard]:
            # sent but never here (lost with a previous trainer, or dropped in flight): credit counts from the
            # shard's own count, or a restarted trainer's grants would stay below what the shard already served
            self.received[shard] = served
            w.stats.add("batches_lost_in_flight")
        if not msg.tree:
            return  # a report
        try:
            batch, slot, written = self._checked_batch(msg.tree)
        except ValueError:
            w.stats.add("samples_invalid")
            return
        self.received[shard] += 1
        w.stats.add("samples")
        self.batches.append((batch, shard, incarnation, slot, written))

    def _checked_batch(self, tree: Any) -> tuple[ReplayBatch | SequenceBatch, np.ndarray, np.ndarray]:
        cfg = self.worker.cfg
        fields, n = batch_fields(cfg, self.worker.spec), cfg.algo.batch_size
        if not isinstance(tree, dict) or set(tree) != {*fields, "slot", "written"}:
            raise ValueError("not a replay batch")
        checked = {}
        for name, f in fields.items():
            if isinstance(f, dict):  # a sequence's stored state
                if not isinstance(tree[name], dict) or set(tree[name]) != set(f):
                    raise ValueError(f"{name} must hold {sorted(f)}")
                checked[name] = {k: check_array(f"{name}/{k}", tree[name][k], *v) for k, v in f.items()}
            else:
                checked[name] = check_array(name, tree[name], *f)
        return (batch_of(cfg, checked), check_array("slot", tree["slot"], (n,), "int64"),
                check_array("written", tree["written"], (n,), "int64"))

    def _connect_shard(self, shard: int, address: str) -> None:
        """Send priorities and credit for ``shard`` to ``address`` (its priorities socket), leaving the old one."""
        old = self.back_address.get(shard)
        if old == address:
            return
        if old:
            self.back[shard].disconnect(old)
        rules = getattr(self.worker.ctx, "rules", None)
        if rules is not None:  # the address came over the authenticated samples stream: pin the buffer role's key
            rules.peer_roles[address] = BUFFER
        self.back[shard].connect(address)
        self.back_address[shard] = address
        self.worker.log(f"replay buffer worker {shard}: priorities to {address}")

    def after_receive(self) -> None:
        """Ask each known shard incarnation for up to ``PREFETCH`` batches in flight, while the queue has room."""
        now = time.monotonic()
        for shard, incarnation in self.shard_incarnation.items():
            want = self.received[shard] + self.prefetch if len(self.batches) < self.queue else self.granted[shard]
            if want > self.granted[shard] or (now >= self.next_grant[shard] and self.granted[shard] > self.received[shard]):
                self.granted[shard] = max(want, self.granted[shard])
                self.back[shard].grant(self.granted[shard], incarnation=incarnation)
                self.next_grant[shard] = now + GRANT_EVERY_S

    # -- batches -------------------------------------------------------------------------------------------
    def next_batch(self, learner: Learner) -> Any:
        k = self.chunk
        if len(self.batches) < k:
            return None
        taken = [self.batches.popleft() for _ in range(k)]
        self.placed_keys = [tuple(keys) for _, *keys in taken]
        if k == 1:
            return learner.put(taken[0][0])  # the copy overlaps the running update
        return jax.tree.map(lambda *leaves: np.stack(leaves), *(b for b, *_ in taken))  # [k, N, ...]: Learner.steps

    def ahead(self) -> bool:
        """No update yet: fewer than ``algo.learning_starts`` env steps inserted, or (throttled) the updates
        would leave the replay ratio's tolerance."""
        w = self.worker
        if self.env_steps < w.cfg.algo.learning_starts:
            return True
        return self.throttle and w.learner.version + self.chunk > trainer_allowance(w.cfg, self.env_steps)

    def dispatch(self, learner: Learner, placed: Any) -> Any:
        running = learner.step(placed) if self.chunk == 1 else learner.steps(placed)
        self.running_keys = self.placed_keys
        return running

    def ended(self, outputs: Any, first: int) -> dict[str, Any]:
        """The updates' metrics; their priorities go back to the shards that drew the batches."""
        train_metrics, per_sample = outputs
        priorities = np.asarray(per_sample["priority"], np.float32).reshape(self.chunk, -1)
        for i, (shard, incarnation, slot, written) in enumerate(self.running_keys if self.prioritized else []):
            update = PriorityUpdate(slot, written, priorities[i])
            if not self.back[shard].send(update, incarnation=incarnation, version=first + i + 1):
                self.worker.stats.add("priorities_dropped")
        return train_metrics

    def saved(self) -> None:
        if self.worker.cfg.checkpoint.replay:
            for sender in self.back:
                sender.save(self.worker.learner.version)

    # -- out -------------------------------------------------------------------------------------------------
    def line(self, version: int) -> tuple[int, dict[str, Any]]:
        ratio = samples_per_insert(self.worker.cfg, version, self.env_steps)
        self.worker.stats.gauge("samples_per_insert", ratio)
        return self.env_steps, {
            "samples_per_insert": ratio, "replay_size": sum(self.replay_sizes.values()),
            **{f"epsilon/actor_{k}": v for k, v in sorted(self.epsilons.items(), key=lambda kv: int(kv[0]))},
            **{f"episode_return/actor_{k}": float(np.mean(v)) for k, v in sorted(self.actor_returns.items()) if v}}

    def waiting(self) -> str:
        w = self.worker
        if w.placed is not None and self.ahead():
            return (f"replay ratio: {w.learner.version} updates for {self.env_steps:,} env steps inserted "
                    f"(algo.learning_starts={w.cfg.algo.learning_starts:,}); waits for inserts")
        return f"batches: holds {len(self.batches)}, shards heard from: {sorted(self.shard_incarnation)}"

    def metrics(self) -> dict[str, Any]:
        return {f"priorities{shard}/{k}": v for shard, sender in enumerate(self.back) for k, v in sender.counters().items()}

    def close(self) -> None:
        if self.worker.cfg.checkpoint.final:
            self.saved()
        for sender in self.back:
            sender.close()
