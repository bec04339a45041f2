"""ReplayTrainerWorker: Ape-X's learner; pulls sampled batches from every replay shard, sends priorities back.

    worker = ReplayTrainerWorker(cfg, index=0, names=names)   # run by a backend for algo=dqn, distributed

The trainer role for a replay algorithm (``srljax.layout.REPLAY_WORKERS``): ``TrainerWorker``'s setup,
publishing, checkpoints and resume, with batches from the replay buffer workers instead of segments. A shard
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
from typing import Any

import jax
import numpy as np

from srljax.comm import Message, PrioritySender, PriorityUpdate
from srljax.layout import BUFFER, PRIORITIES
from srljax.replay import snapshots as replay_snapshots
from srljax.replay.apex import num_shards, samples_per_insert, trainer_allowance
from srljax.replay.buffer import batch_fields, batch_of
from srljax.system.shell.bounds import FLOOR, HEADROOM
from srljax.system.shell.common import check_array, episodes_from_meta
from srljax.system.training.trainer import DRAIN_MAX, IDLE_POLL_MS, TrainerWorker
from srljax.telemetry.metrics import UpdateRecords
from srljax.types import ReplayBatch, SequenceBatch

PREFETCH = 2  # batches one shard may have in flight towards the trainer
QUEUE = 2  # batches held here, ready to be put on the devices
GRANT_EVERY_S = 1.0


class ReplayTrainerWorker(TrainerWorker):
    role = TrainerWorker.role
    placement = TrainerWorker.placement
    serves = TrainerWorker.serves

    def example_batch(self) -> ReplayBatch | SequenceBatch:
        zeros = lambda f: np.zeros(*f) if isinstance(f, tuple) else {k: np.zeros(*v) for k, v in f.items()}  # noqa: E731
        return batch_of(self.cfg, {name: zeros(f) for name, f in batch_fields(self.cfg, self.spec).items()})

    def samples_limit(self) -> int:
        fields = batch_fields(self.cfg, self.spec).values()
        leaves = [v for f in fields for v in (f.values() if isinstance(f, dict) else [f])]
        size = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in leaves)
        return max(super().samples_limit(), FLOOR + HEADROOM * (size + 16 * self.cfg.algo.batch_size))

    def setup(self) -> None:
        self.resumed_step = -1  # --resume: the checkpoint step restored, which every shard's replay must match
        with_replay = self.resume and not self.restarted and self.cfg.checkpoint.replay
        if with_replay:  # before the Checkpointer exists: it restores the newest step left in checkpoints/
            moved = replay_snapshots.set_aside_incomplete(self.cfg.run_dir, num_shards(self.cfg))
            if moved:
                self.log(f"--resume: checkpoint step(s) {moved} have no complete replay snapshot; moved to "
                         f"{replay_snapshots.SET_ASIDE_DIR}/ (the newest step with the replay of every shard resumes)")
        super().setup()
        cfg = self.cfg
        if with_replay:
            self.resumed_step = self.learner.version
        self.shards = num_shards(cfg)
        # Shards are configured after the trainer (servers first), so their priorities addresses come
        # in their messages' meta; a restarted shard's new address comes the same way.
        self.back = [PrioritySender(None, self.trial, ctx=self.ctx) for _ in range(self.shards)]
        self.back_address: dict[int, str] = {}
        self.shard_incarnation: dict[int, str] = {}
        self.granted = [0] * self.shards
        self.received = [0] * self.shards
        self.next_grant = [0.0] * self.shards
        self.batches: deque[tuple[ReplayBatch, int, str, np.ndarray, np.ndarray]] = deque()
        self.running_keys: list[tuple[int, str, np.ndarray, np.ndarray]] = []
        self.chunk = cfg.algo.updates_per_call  # updates per compiled call, on that many batches
        self.prefetch, self.queue = max(PREFETCH, 2 * self.chunk), max(QUEUE, 2 * self.chunk)
        self.throttle = cfg.algo.throttle in ("both", "updates")
        self.prioritized = cfg.algo.replay.alpha > 0
        self.replay_sizes: dict[int, int] = {}
        self.epsilons: dict[str, float] = {}
        self.actor_returns: dict[str, deque[float]] = {}  # each actor's recent episodes (log.window)
        self.records = UpdateRecords(env_steps=self.env_steps)
        self.log(f"Ape-X: batches of {cfg.algo.batch_size} from {self.shards} replay buffer worker(s), replay ratio "
                 f"{cfg.algo.replay_ratio:g} +- {cfg.algo.ratio_tolerance:.0%} (throttle: {cfg.algo.throttle}), "
                 f"{cfg.num_updates:,} updates")

    # -- loop -------------------------------------------------------------------------------------------
    def poll(self) -> None:
        if self.running is not None and self.update_end.ended():
            self._finish_update()
        if self.running is None and time.monotonic() >= self.next_publish:
            self._publish(fresh=self.wire_params is None)
        if self.learner.version >= self.cfg.num_updates and self.running is None:
            if not self.done_sent:
                self.done_sent = True
                self.tell_controller("done", {"env_steps": self.env_steps, "updates": self.learner.version})
            time.sleep(0.05)
            return
        with self.stats.time("wait/samples_or_update"):
            woken = dict(self.poller.poll(IDLE_POLL_MS))
        if self.receiver.sock in woken:
            for _ in range(DRAIN_MAX):
                msg = self.receiver.recv(timeout_ms=0)
                if msg is None:
                    break
                self._take(msg)
        self._grant()
        k = self.chunk
        if (self.placed is None and len(self.batches) >= k
                and self.learner.version + k * (self.running is not None) + k - 1 < self.cfg.num_updates):
            taken = [self.batches.popleft() for _ in range(k)]
            self.placed_keys = [tuple(keys) for _, *keys in taken]
            if k == 1:
                self.placed = self.learner.put(taken[0][0])  # the copy overlaps the running update
            else:  # stacked [k, N, ...]: Learner.steps places them
                self.placed = jax.tree.map(lambda *leaves: np.stack(leaves), *(b for b, *_ in taken))
        if self.running is None and self.placed is not None and self._ahead():
            self.stats.add("waits_replay_ratio")
        elif self.running is None and self.placed is not None:
            with self.stats.time("compute/dispatch"):
                self.running = self.learner.step(self.placed) if k == 1 else self.learner.steps(self.placed)
            self.update_end.watch(self.running)
            self.update_started = time.monotonic()
            self.stats.begin("compute/update")  # the busy fraction launch.status reads, as the PPO trainer's
            self.running_keys, self.placed = self.placed_keys, None
        elif self.running is None and self.published < self.learner.version:
            self._publish()  # idle with updates the actors have not seen: actors may wait for them
            self.stats.add("publishes_idle")

    def _connect_shard(self, shard: int, address: str) -> None:
        """Send priorities and credit for ``shard`` to ``address`` (its priorities socket), leaving the old one."""
        old = self.back_address.get(shard)
        if old == address:
            return
        if old:
            self.back[shard].disconnect(old)
        rules = getattr(self.ctx, "rules", None)
        if rules is not None:  # the address came over the authenticated samples stream: pin the buffer role's key
            rules.peer_roles[address] = BUFFER
        self.back[shard].connect(address)
        self.back_address[shard] = address
        self.log(f"replay buffer worker {shard}: priorities to {address}")

    def _ahead(self) -> bool:
        """No update yet: fewer than ``algo.learning_starts`` env steps inserted, or (throttled) the updates
        would leave the replay ratio's tolerance."""
        if self.env_steps < self.cfg.algo.learning_starts:
            return True
        return self.throttle and self.learner.version + self.chunk > trainer_allowance(self.cfg, self.env_steps)

    def _grant(self) -> None:
        """Ask each known shard incarnation for up to ``PREFETCH`` batches in flight, while the queue has room."""
        now = time.monotonic()
        for shard, incarnation in self.shard_incarnation.items():
            want = self.received[shard] + self.prefetch if len(self.batches) < self.queue else self.granted[shard]
            if want > self.granted[shard] or (now >= self.next_grant[shard] and self.granted[shard] > self.received[shard]):
                self.granted[shard] = max(want, self.granted[shard])
                self.back[shard].grant(self.granted[shard], incarnation=incarnation)
                self.next_grant[shard] = now + GRANT_EVERY_S

    def _take(self, msg: Message) -> None:
        """A shard's batch or report: count its inserts and episodes; queue the batch."""
        meta = msg.meta
        try:
            shard, incarnation = int(meta["shard"]), str(meta["incarnation"])
            steps = int(meta.get("env_steps", 0))
            if not 0 <= shard < self.shards or steps < 0:
                raise ValueError(shard)
        except (KeyError, TypeError, ValueError):
            self.stats.add("samples_invalid")
            return
        if self.shard_incarnation.get(shard) != incarnation:  # a new (or restarted) shard: credit starts afresh
            address = meta.get(PRIORITIES)
            if not isinstance(address, str) or not address:
                self.stats.add("samples_invalid")
                return
            restored = meta.get("restored_step")
            if self.resumed_step >= 0 and isinstance(restored, int) and restored >= 0 and restored != self.resumed_step:
                raise RuntimeError(f"--resume: replay buffer worker {shard} restored the replay of checkpoint {restored} "
                                   f"but this trainer restored checkpoint {self.resumed_step}; see "
                                   f"{self.cfg.run_dir}/replay and checkpoints")
            self._connect_shard(shard, address)
            self.shard_incarnation[shard] = incarnation
            self.granted[shard] = self.received[shard] = 0
        self.env_steps += steps
        self.stats.add("env_steps", steps)
        self.episodes.add(*episodes_from_meta(meta, max_count=steps))
        if isinstance(meta.get("replay_size"), int):
            self.replay_sizes[shard] = meta["replay_size"]
        if isinstance(meta.get("actor_returns"), dict):
            for actor, returns in meta["actor_returns"].items():
                if isinstance(returns, list) and all(isinstance(r, (int, float)) for r in returns):
                    self.actor_returns.setdefault(str(actor), deque(maxlen=self.cfg.log.window)).extend(returns)
        if isinstance(meta.get("epsilons"), dict):
            self.epsilons.update({str(k): float(v) for k, v in meta["epsilons"].items() if isinstance(v, float)})
        served = meta.get("served")  # batches the shard sent before this message
        if isinstance(served, int) and not isinstance(served, bool) and served > self.received[shard]:
            # sent but never here (lost with a previous trainer, or dropped in flight): credit counts from the
            # shard's own count, or a restarted trainer's grants would stay below what the shard already served
            self.received[shard] = served
            self.stats.add("batches_lost_in_flight")
        if not msg.tree:
            return  # a report
        try:
            batch, slot, written = self._checked_batch(msg.tree)
        except ValueError:
            self.stats.add("samples_invalid")
            return
        self.received[shard] += 1
        self.stats.add("samples")
        self.batches.append((batch, shard, incarnation, slot, written))

    def _checked_batch(self, tree: Any) -> tuple[ReplayBatch | SequenceBatch, np.ndarray, np.ndarray]:
        fields, n = batch_fields(self.cfg, self.spec), self.cfg.algo.batch_size
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
        return (batch_of(self.cfg, checked), check_array("slot", tree["slot"], (n,), "int64"),
                check_array("written", tree["written"], (n,), "int64"))

    def _finish_update(self, final: bool = False) -> None:
        """The dispatched update (or ``algo.updates_per_call`` of them, stacked) ended: priorities back, params
        published, a line for each update ``log.log_every`` makes due, a checkpoint if one fell due."""
        train_metrics, per_sample = jax.device_get(self.running)
        self.running = None
        k, version, cfg = self.chunk, self.learner.version, self.cfg
        first = version - k  # the version before these updates
        self.stats.end("compute/update")
        self.stats.add("updates", k)
        self.stats.sample("time/update_s", time.monotonic() - self.update_started)
        priorities = np.asarray(per_sample["priority"], np.float32).reshape(k, -1)
        for i, (shard, incarnation, slot, written) in enumerate(self.running_keys if self.prioritized else []):
            update = PriorityUpdate(slot, written, priorities[i])
            if not self.back[shard].send(update, incarnation=incarnation, version=first + i + 1):
                self.stats.add("priorities_dropped")
        last = version >= cfg.num_updates or final
        if version // cfg.trainer.publish_every > first // cfg.trainer.publish_every or last:
            self._publish()
        for v in range(first + 1, version + 1):
            if v % cfg.log.log_every == 0 or (last and v == version):
                self._log_metrics({name: x[v - version - 1] for name, x in train_metrics.items()} if k > 1
                                  else train_metrics, version=v)
        before = self.learner.checkpointer.latest_step() if self.learner.checkpointer is not None else None
        self.learner.maybe_save(since=first)
        if self.learner.checkpointer is not None and self.learner.checkpointer.latest_step() != before:
            self._tell_shards_to_save()

    def _tell_shards_to_save(self) -> None:
        if self.cfg.checkpoint.replay:
            for sender in self.back:
                sender.save(self.learner.version)

    def _log_metrics(self, train_metrics: dict[str, Any], version: int | None = None) -> None:
        self.total_env_steps = self.env_steps
        if self.logger is None:
            return
        version = self.learner.version if version is None else version
        ratio = samples_per_insert(self.cfg, version, self.env_steps)
        self.stats.gauge("samples_per_insert", ratio)
        self.logger.write(self.records.record(
            version, self.env_steps, self.episodes.summary(), train_metrics,
            samples_per_insert=ratio, replay_size=sum(self.replay_sizes.values()),
            **{f"epsilon/actor_{k}": v for k, v in sorted(self.epsilons.items(), key=lambda kv: int(kv[0]))},
            **{f"episode_return/actor_{k}": float(np.mean(v)) for k, v in sorted(self.actor_returns.items()) if v},
            worker_restarts=self.trial_restarts))

    def waiting(self) -> str:
        if getattr(self, "back", None) is None:
            return super().waiting()
        if self.running is not None:
            return "update running"
        if self.learner.version >= self.cfg.num_updates:
            return "done"
        if self.placed is not None and self._ahead():
            return (f"replay ratio: {self.learner.version} updates for {self.env_steps:,} env steps inserted "
                    f"(algo.learning_starts={self.cfg.algo.learning_starts:,}); waits for inserts")
        return f"batches: holds {len(self.batches)}, shards heard from: {sorted(self.shard_incarnation)}"

    def metrics(self) -> dict[str, Any]:
        out = super().metrics()
        for shard, sender in enumerate(getattr(self, "back", [])):
            out.update({f"priorities{shard}/{k}": v for k, v in sender.counters().items()})
        return out

    def close(self) -> None:
        super().close()  # the final checkpoint
        if getattr(self, "back", None) is not None:
            if self.cfg.checkpoint.final:
                self._tell_shards_to_save()
            for sender in self.back:
                sender.close()
