"""TrainerWorker: the TRAINER role's one worker; takes samples, runs the shared ``Learner``, publishes params.

    worker = TrainerWorker(cfg, index=0, names=names)  # run by a backend: worker.run()

The worker runs the loop; three parts, chosen once from the run's plan (``parts.trainer_parts``), do the rest:
what the learner trains (``learners.py``: the run's experiment, one policy's of several, one member's), where
batches come from (``sources.py``: segments from actors or buffers cut into batches of the trainer's size;
``replay_source.py``: Ape-X's batches pulled from the replay shards, priorities sent back) and where params go
(``publishers.py``: the params stream and the trial's end; ``members.py``: a member's, which also reads the
population manager's directives).

With the segment source, segments ``[T+1, b]`` from any actors or buffers are checked, counted as env steps, and dropped (counted)
when older than ``trainer.max_policy_lag``; a batch is ``cfg.batch_envs`` columns from any segments, the
remainder kept. A group of ``trainer.num_hosts`` processes is one ``jax.distributed`` group
(``srljax.parallel.multihost``); only trainer 0 publishes, logs and says ``done``. The update is dispatched
and not waited for: meanwhile the trainer receives, cuts the next batch and starts its copy to the devices.
Params go out every ``trainer.publish_every`` updates, when idle with unpublished updates, and every second.
With ``layout.deterministic`` (``SegmentSource``) update k takes every actor's k-th segment, in actor order. Checkpoints hold the
run (``Learner.save``); ``configure`` with ``resume`` restores the newest before compiling.
``docs/architecture.md``, "Data flow" and "Run state and resume".
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import jax
import zmq

from algos.base import segment_extras_spec
from srljax.comm import SampleReceiver
from srljax.comm.sockets import context
from srljax.config import Experiment
from srljax.layout import PARAMS, SAMPLES, TRAINER
from srljax.learning.learner import Learner
from srljax.storage.run_dir import rollback_metrics
from srljax.system.shell.common import bind_address, bind_host, stream_key
from srljax.system.shell.worker import Worker
from srljax.system.training.parts import trainer_parts
from srljax.telemetry.metrics import MetricsLogger, UpdateRecords
from srljax.types import EnvSpec

SAMPLE_HWM = 4  # segments queued at the trainer; beyond this actors feel backpressure
DRAIN_MAX = 64  # segments taken per poll at most, so control and publishing stay timely
IDLE_POLL_MS = 50  # the longest the loop sleeps when neither a sample nor an update's end wakes it


class TrainerWorker(Worker):
    role = TRAINER
    placement = TRAINER
    serves = (SAMPLES, PARAMS)  # a member's trainer also binds ``directives`` (``MemberPublisher``)

    def __init__(self, cfg: Experiment, index: int, *args: Any, **kwargs: Any) -> None:
        super().__init__(cfg, index, *args, **kwargs)
        self.experiment = cfg  # the whole experiment (names keys; the other policies or members); ``self.cfg``
        # becomes what this trainer trains in ``setup`` (``learning.scope``: a policy's or a member's experiment)
        self.env_spec: EnvSpec | None = None  # the env's spec (``self.spec``: the learner's, from ``learning.scope``)
        parts = trainer_parts(self)  # the one place the run's plan picks the trainer's behaviour
        self.learning, self.source, self.publisher = parts.learning, parts.source, parts.publisher
        self.hosts = 1  # processes in this trainer group
        self.group: Any = None  # the jax.distributed group (trainer.num_hosts > 1)
        self.primary = False  # process 0 of its group: publishes, logs, tells the controller
        self.share = 0  # columns this process feeds per update
        self.learner: Learner | None = None
        self.receiver: SampleReceiver | None = None
        self.update_end: UpdateEnd | None = None
        self.poller: zmq.Poller | None = None
        self.logger: MetricsLogger | None = None
        self.records = UpdateRecords()
        self.placed: Any = None  # the next batch, on its way to the devices
        self.running: Any = None  # outputs of the dispatched update, until it ends
        self.update_started = 0.0

    def setup(self) -> None:
        if self.spec is None:
            raise RuntimeError("the configure message carried no env spec")
        self.env_spec = self.spec
        self.cfg, self.spec = self.learning.scope(self, self.experiment, self.env_spec)
        self.publisher.prepare()
        self.source.prepare()
        cfg = self.cfg
        self.hosts = cfg.trainer.num_hosts
        if self.hosts > 1:
            from srljax.parallel import multihost as distributed

            self.log(f"joining the trainer group as process {self.index} of {self.hosts}")
            self.group = distributed.join_via_names(self.names, cfg.name, cfg.trial, process_id=self.index,
                                                    num_processes=self.hosts, host=bind_host())
        self.primary = self.index % self.hosts == 0  # several policies: trainer i is policy i's one process
        self.share = cfg.batch_envs // self.hosts
        self.learner = self.learning.make(cfg, self.spec)
        meta: dict[str, Any] = {}
        if self.resume:  # every process of a group restores the same step (orbax reads each array once)
            _, meta = self.learner.restore()
            if self.primary:  # a restarted trainer: the lines its predecessor logged after the checkpoint go
                rollback_metrics(Path(cfg.run_dir) / "metrics.jsonl", self.learner.version)
            self.log(f"resumed from the checkpoint of update {self.learner.version} "
                     f"({int(meta.get('env_steps', 0)):,} env steps)")
        elif self.restarted and self.primary:  # lost before its first checkpoint: it trains again from update 0,
            rollback_metrics(Path(cfg.run_dir) / "metrics.jsonl", 0)  # and each update keeps one line
        self.learner.run_state = self._run_state
        self.extras_spec = segment_extras_spec(self.learner.algo)  # what segments carry
        self.learner.compile(self.source.example_batch())
        self.receiver = SampleReceiver(bind_address(cfg), self.trial, ctx=self.ctx, hwm=SAMPLE_HWM,
                                       max_bytes=self.source.samples_limit(),
                                       max_message_bytes=self.source.samples_message_limit(),
                                       **self.samples_options(sender=False))
        self.register(SAMPLES, self.receiver.address)
        self.update_end = UpdateEnd(context(self.ctx))
        self.poller = zmq.Poller()
        self.poller.register(self.receiver.sock, zmq.POLLIN)
        self.poller.register(self.update_end.sock, zmq.POLLIN)
        self.publisher.setup()
        if self.primary:
            self.logger = MetricsLogger(cfg, total=cfg.total_env_steps, elapsed=float(meta.get("elapsed_s", 0.0)),
                                        wandb_id=meta.get("wandb_id"), prometheus=self.exporter)
        self.source.start(meta)
        self.records = UpdateRecords(env_steps=self.source.env_steps)
        self.log(f"samples at {self.receiver.address}; batch {cfg.batch_envs} env columns x {cfg.algo.num_steps} "
                 f"steps ({self.share} from this process of {self.hosts}), {cfg.num_updates} updates")
        self.learning.start(self)
        self.publisher.start()
        self.source.announce()

    def register(self, stream: str, address: str) -> None:
        """Under the whole experiment's keys (a policy's or member's ``self.cfg`` names another trial)."""
        self._addresses[stream] = address
        self.names.add(stream_key(self.experiment, self.role, self.index, stream), address)

    def ready_info(self) -> dict[str, Any]:
        extras = self.learning.ready_extras(self.extras_spec)
        return {"extras_spec": {k: [list(shape), dtype] for k, (shape, dtype) in extras.items()}}

    # -- the loop -----------------------------------------------------------------------------------------
    def poll(self) -> None:
        self.publisher.poll()
        if self.publisher.after_done():  # one trainer of several, its updates trained
            return
        learner, source = self.learner, self.source
        if self.running is not None and self.update_end.ended():
            self.finish_update()
        if self.primary and self.running is None:
            self.publisher.republish()
        if learner.version >= self.cfg.num_updates and self.running is None:
            self.publisher.finished()
            return
        with self.stats.time("wait/samples_or_update"):
            # Sleep until a sample arrives or the running update ends (``UpdateEnd`` rings): no
            # spinning, which on XLA:CPU would take cycles from the update itself.
            woken = dict(self.poller.poll(IDLE_POLL_MS))
        if self.receiver.sock in woken:
            for _ in range(DRAIN_MAX):
                msg = self.receiver.recv(timeout_ms=0)
                if msg is None:
                    break
                source.take(msg)
        source.after_receive()
        k = source.chunk  # updates per compiled call
        if self.placed is None and learner.version + k * (self.running is not None) + k - 1 < self.cfg.num_updates:
            self.placed = source.next_batch(learner)
        if self.running is None and self.placed is not None and source.ahead():
            self.stats.add("waits_replay_ratio")
        elif self.running is None and self.placed is not None and self.publisher.may_update():
            with self.stats.time("compute/dispatch"):
                self.running = source.dispatch(learner, self.placed)
            self.update_end.watch(self.running)
            self.update_started = time.monotonic()
            self.stats.begin("compute/update")  # its share of wall time is the trainer's busy fraction
            self.placed = None
        elif self.running is None and self.primary and self.publisher.published < learner.version:
            # Idle, waiting for samples, with updates the actors have not seen: publishing now costs
            # nothing, and actors throttled on an old version (publish_every > 1) may be what it waits for.
            self.publisher.publish()
            self.stats.add("publishes_idle")

    def finish_update(self, final: bool = False) -> None:
        """The dispatched update (or ``algo.updates_per_call`` of them) ended: publish, log a line for each update
        ``log.log_every`` makes due, then checkpoint (a checkpoint of update N exists only after N's line:
        ``--resume`` cuts ``metrics.jsonl`` back to it and continues with N+1). ``final``: the trial stops now,
        so the last line is written whatever ``log.log_every`` says."""
        outputs = jax.device_get(self.running)
        self.running = None
        k, version, cfg = self.source.chunk, self.learner.version, self.cfg
        first = version - k  # the version before these updates
        self.stats.end("compute/update")
        self.stats.add("updates", k)
        self.stats.sample("time/update_s", time.monotonic() - self.update_started)
        train_metrics = self.source.ended(outputs, first)
        last = version >= cfg.num_updates or final
        if self.primary and (version // cfg.trainer.publish_every > first // cfg.trainer.publish_every or last):
            self.publisher.publish()
        for v in range(first + 1, version + 1):
            if v % cfg.log.log_every == 0 or (last and v == version):
                self._log_metrics({name: x[v - version - 1] for name, x in train_metrics.items()} if k > 1
                                  else train_metrics, v)
        checkpointer = self.learner.checkpointer
        before = checkpointer.latest_step() if checkpointer is not None else None
        self.learner.maybe_save(since=first)
        if checkpointer is not None and checkpointer.latest_step() != before:
            self.source.saved()

    def _log_metrics(self, train_metrics: dict[str, Any], version: int) -> None:
        env_steps, columns = self.source.line(version)  # a group's processes all take part
        self.source.total_env_steps = env_steps
        if self.logger is None:
            return
        self.logger.write(self.records.record(version, env_steps, self.source.episodes.summary(),
                                              self.publisher.train_metrics(train_metrics), **columns,
                                              worker_restarts=self.trial_restarts))

    def _run_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The trainer's part of a checkpoint (JSON only; written by process 0 of a group)."""
        meta = self.source.state()
        if self.logger is not None:
            meta |= {"wandb_id": self.logger.wandb_id, "elapsed_s": round(self.logger.elapsed, 3)}
        return {}, {**meta, **self.publisher.state()}

    # -- what the controller sees ------------------------------------------------------------------------------
    def progress(self) -> int:
        return self.learner.version if self.learner is not None else 0

    def waiting(self) -> str:
        if self.running is not None:
            return "update running"
        if self.learner is None:
            return "setup"
        if note := self.publisher.waiting():
            return note
        if self.learner.version >= self.cfg.num_updates:
            return "done"
        return self.source.waiting()

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"queue/pending_columns": self.source.pending_columns}
        if self.learner is not None:
            out["policy_version"] = self.learner.version
        if self.receiver is not None:
            out.update({f"samples/{k}": v for k, v in self.receiver.counters().items()})
        return {**out, **self.source.metrics(), **self.publisher.metrics()}

    def close(self) -> None:
        try:
            if self.running is not None:  # stopped mid-update: its line before its checkpoint
                self.finish_update(final=True)
            if self.learner is not None:
                self.learner.close()  # final checkpoint (cfg.checkpoint.final); a collective in a group
            for thing in (self.logger, self.receiver, self.update_end):
                if thing is not None:
                    thing.close()
            self.source.close()  # Ape-X: the shards save the replay of the final checkpoint
        finally:
            self.publisher.close()


class UpdateEnd:
    """Rings a socket the trainer's poller watches when a dispatched update's outputs are ready.

    One thread blocks on each watched update's arrays (``jax.block_until_ready``) and then writes
    one byte to an inproc PAIR, so the loop sleeps in ``zmq.Poller`` on samples and the update's
    end together instead of polling ``is_ready()`` in a tight loop.
    """

    def __init__(self, ctx: zmq.Context) -> None:
        address = f"inproc://srljax-update-end-{id(self)}"
        self.sock = ctx.socket(zmq.PAIR)  # the loop's end
        self.sock.bind(address)
        self._ring = ctx.socket(zmq.PAIR)  # the waiter thread's end; only that thread uses it
        self._ring.connect(address)
        self._updates: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._wait_loop, name="update-end", daemon=True)
        self._thread.start()

    def watch(self, outputs: Any) -> None:
        self._updates.put(outputs)

    def ended(self) -> bool:
        """True once (per watched update) when it has ended; never blocks."""
        try:
            self.sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _wait_loop(self) -> None:
        try:
            while (outputs := self._updates.get()) is not None:
                try:
                    jax.block_until_ready(outputs)
                except Exception:  # noqa: BLE001 - rung all the same: the loop's ``device_get`` raises it
                    pass
                try:
                    self._ring.send(b"", zmq.NOBLOCK)
                except zmq.ZMQError:  # the loop's end is gone (closed after a long update): nobody waits
                    pass
        finally:
            self._ring.close(linger=0)  # by the one thread that uses it (libzmq's rule)

    def close(self) -> None:
        self._updates.put(None)
        self._thread.join(timeout=10)
        self.sock.close(linger=0)
