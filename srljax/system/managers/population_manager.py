"""PopulationManager: the ``population`` role, SRL's Population Manager for a distributed PBT population.

    python -m launch.local configs/cartpole_pbt_distributed.py     # RUN_DIR/pbt/lineage.jsonl, lineage.png
    python -m launch.slurm configs/cartpole_pbt_distributed.py     # the same graph as one Slurm job

One worker, in the graph when ``pbt.population`` > 1 (``layout.mode=distributed``). It follows every member's
params stream (trainer ``i`` trains member ``i``, ``srljax/system/training/members.py``) and, when every
member has reached a ready point (``r x pbt.ready_updates``), evaluates them all in a thread
(``srljax.evaluation.evaluator.Evaluator``), decides with the single-process loop's own
``srljax.population.pbt.plan_copies`` (``exploit_plan`` + ``explore``) and sends every member's trainer one
directive (``srljax/comm/directives.py``): copy member j and train with lr x, or carry on. It
evaluates each member's last version as it comes. Written: ``eval.jsonl``, ``pbt/lineage.jsonl``,
``pbt/members.json`` (the best marked ``best``) and ``pbt/lineage.png`` (``srljax.population.pbt.plot_lineage``).
``docs/architecture.md``, "Distributed population".
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from srljax.comm import NameResolver
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import POPULATION
from srljax.system.shell.common import BackgroundCall
from srljax.system.shell.worker import Worker

FINAL_WAIT_S = 10.0  # at stop: how long to wait for a member's last params version


class PopulationManager(Worker):
    role = POPULATION
    placement = "cpu"

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close`` and ``metrics`` run after a partial setup too)
        self.population = self.ready_every = self.last = 0
        self.followers: list[Any] = []  # a ParamsFollower per member
        self.senders: list[Any] = []  # a DirectiveSender per member's trainer
        self.evaluator: Any = None  # an Evaluator (srljax/evaluation/evaluator.py)
        self.rng: np.random.Generator | None = None
        self.lrs: list[float] = []
        self.histories: list[list[tuple[int, float]]] = []
        self.next_ready: list[int] = []
        self.snapshots: dict[int, dict[int, tuple[int, Any]]] = {}
        self.finals: dict[int, dict[str, Any]] = {}
        self.final_due: dict[int, tuple[int, Any]] = {}
        self.lineage: list[dict[str, Any]] = []
        self.outbox: list[Any] = []
        self.copies = 0
        self.pbt_dir: Path | None = None
        self.eval_file: Any = None  # RUN_DIR/eval.jsonl, open for appending
        self.lineage_file: Any = None  # RUN_DIR/pbt/lineage.jsonl, open for appending
        self._job: BackgroundCall | None = None
        self.written = False

    def setup(self) -> None:
        import algos
        from srljax.comm.directives import DirectiveSender
        from srljax.config.pbt import member_lr
        from srljax.evaluation.evaluator import EVAL_FILE, Evaluator
        from srljax.layout import DIRECTIVES, TRAINER
        from srljax.population.pbt import PBT_DIR
        from srljax.system.shell.membership import member_follower
        from srljax.system.training.params import ParamsCodec

        cfg, p = self.cfg, self.cfg.pbt
        self.population, self.ready_every, self.last = p.population, p.ready_updates, cfg.num_updates
        algo = algos.make(cfg, self.spec)
        codec = ParamsCodec(algo)
        self.followers = [member_follower(self, codec, i) for i in range(self.population)]
        self.senders = []
        for i in range(self.population):
            sender = DirectiveSender(None, self.trial, ctx=self.ctx)
            if not self.connect_peers(sender, TRAINER, DIRECTIVES, [i]):
                raise RuntimeError(f"the configure message named no directives address for member {i}'s trainer")
            self.senders.append(sender)
        self.evaluator = Evaluator(cfg, algo)
        self.rng = np.random.default_rng(p.seed)
        self.lrs = [member_lr(cfg, i) for i in range(self.population)]
        self.histories = [[(0, lr)] for lr in self.lrs]
        self.next_ready = [1] * self.population  # each member's next ready point
        self.snapshots = {}  # ready point -> member -> (version, params)
        self.finals = {}  # member -> its final evaluation record
        self.final_due = {}  # member -> (last version, params), not yet evaluated
        self.lineage = []
        self.outbox = []  # directives decided, not sent yet
        self.copies = 0
        run_dir = Path(cfg.run_dir)
        self.pbt_dir = run_dir / PBT_DIR
        self.pbt_dir.mkdir(parents=True, exist_ok=True)
        self.eval_file = (run_dir / EVAL_FILE).open("a")
        self.lineage_file = (self.pbt_dir / "lineage.jsonl").open("a")
        self._job = BackgroundCall(f"{self.name}-evaluate")  # tag: the job, (kind, ready point, members)
        self.written = False
        self.log(f"population of {self.population}: ready every {self.ready_every} updates of {self.last}, "
                 f"{cfg.eval.episodes} evaluation episodes per member; starting lr {self.lrs}")

    # -- the loop ----------------------------------------------------------------------------
    def poll(self) -> None:
        self._collect()
        self._send()
        for i, follower in enumerate(self.followers):
            if follower.poll(timeout_ms=0 if follower.params is not None else 10):
                self._saw(i, follower.version, follower.params)
        if not self._job.busy:
            job = self._next_job()
            if job is not None:
                self._start(job)
        else:
            time.sleep(0.01)

    def _saw(self, member: int, version: int, params: Any) -> None:
        """A new params version of ``member``: it reached ready points (``ready_updates`` apart) or its last version."""
        r = self.next_ready[member]
        while self.ready_every and r * self.ready_every <= version and r * self.ready_every < self.last:
            self.snapshots.setdefault(r, {})[member] = (version, params)
            r += 1
        self.next_ready[member] = r
        if version >= self.last and member not in self.finals:
            self.final_due[member] = (version, params)

    def _next_job(self) -> tuple[str, int, dict[int, tuple[int, Any]]] | None:
        complete = [r for r, got in self.snapshots.items() if len(got) == self.population]
        if complete:  # the members wait at a ready point for its directives: the oldest comes first
            r = min(complete)
            return ("ready", r, self.snapshots.pop(r))
        if self.final_due:
            due, self.final_due = self.final_due, {}
            return ("final", 0, due)
        return None

    def _start(self, job: tuple[str, int, dict[int, tuple[int, Any]]]) -> None:
        self._job.start(self._evaluate, job[2], tag=job)

    def _evaluate(self, members: dict[int, tuple[int, Any]]) -> dict[int, Any]:
        return {i: self.evaluator.evaluate(params, version) for i, (version, params) in sorted(members.items())}

    def _collect(self) -> None:
        """Act on a finished evaluation; re-raise its error."""
        done = self._job.take()
        if done is None:
            return
        (kind, ready, members), results = done
        if kind == "ready":
            self._ready_point(ready, members, results)
        else:
            for i, result in results.items():
                self.finals[i] = self._write_eval(result, member=i, final=True)
            if len(self.finals) == self.population:
                self._write_summary()

    def _write_eval(self, result: Any, **extra: Any) -> dict[str, Any]:
        i = extra["member"]
        record = result.record(lr=self.lrs[i], deterministic=self.cfg.eval.deterministic, seed=self.cfg.eval.seed,
                               **extra)
        self.eval_file.write(json.dumps(record) + "\n")
        self.eval_file.flush()
        self.stats.add("evaluations")
        return record

    def _ready_point(self, ready: int, members: dict[int, tuple[int, Any]], results: dict[int, Any]) -> None:
        """Rank the members at ready point ``ready`` and send the copiers their directives."""
        from srljax.comm.directives import Directive
        from srljax.population.pbt import lineage_line, plan_copies

        update = ready * self.ready_every
        scores = [float(results[i].mean) for i in range(self.population)]
        for i in range(self.population):
            self._write_eval(results[i], member=i, ready=ready, update=update)
        lrs = list(self.lrs)
        plan = plan_copies(scores, lrs, self.rng, self.cfg)
        for i in range(self.population):
            copy = plan.get(i)
            skipped = copy is not None and self.followers[i].version >= self.last
            line = lineage_line(update, i, scores[i], lrs[i], None if skipped else copy, scores, lrs, ready=ready,
                                version=members[i][0])
            if skipped:
                line["copy_skipped"] = "the member had trained its updates"
            elif copy is not None:
                source, new_lr = copy
                self.outbox.append(Directive(i, source, new_lr, ready, members[source][0]))
                self.lrs[i] = new_lr
                self.histories[i].append((update, new_lr))
                self.copies += 1
            if not skipped and copy is None:
                self.outbox.append(Directive(i, -1, lrs[i], ready, -1))  # carry on: it waits for word either way
            self.lineage.append(line)
            self.lineage_file.write(json.dumps(line) + "\n")
        self.lineage_file.flush()
        self._send()
        self.stats.gauge("ready_point", ready)
        self.log(f"ready point {ready} (update {update}): scores {[round(s, 1) for s in scores]}; "
                 + (", ".join(f"member {i} copies {j} (lr {lr:.3g})" for i, (j, lr) in plan.items()) or "no copies"))

    def _send(self) -> None:
        """Send the directives decided (a member's socket that is full now is tried again next poll)."""
        while self.outbox:
            directive = self.outbox[0]
            if not self.senders[directive.copier].send(directive, timeout_ms=0):
                self.stats.add("directive_send_retries")
                return
            self.outbox.pop(0)
            self.stats.add("directives_sent")

    def _write_summary(self) -> None:
        """``pbt/members.json``, ``pbt/lineage.png`` and the summary line, once every member has its final evaluation."""
        if self.written or not self.finals:
            return
        self.written = True
        from srljax.config.pbt import member_dir
        from srljax.population.pbt import plot_lineage

        best = max(self.finals, key=lambda i: self.finals[i]["mean"])
        rows = []
        for i in range(self.population):
            final = self.finals.get(i, {})
            rows.append({"member": i, "final_score": final.get("mean", float("nan")), "version": final.get("version"),
                         "lr": self.lrs[i], "checkpoint": str(member_dir(self.cfg, i) / "checkpoints"),
                         **({"best": True} if i == best else {})})
        (self.pbt_dir / "members.json").write_text(json.dumps(rows, indent=2) + "\n")
        plot_lineage(self.pbt_dir, self.histories, self.lineage, self.last)
        self.log("population final scores " + ", ".join(
            f"member {r['member']}: {r['final_score']:.1f} (lr {r['lr']:.3g})" for r in rows)
                 + f"; best member {best}, its checkpoints in {rows[best]['checkpoint']}; {self.copies} copies")

    # -- heartbeats ------------------------------------------------------------------------------
    def progress(self) -> int:
        return int(self.stats.counters.get("evaluations", 0))

    def waiting(self) -> str:
        if self._job is not None and self._job.busy:
            return ""
        return "for every member to reach the next ready point"

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, sender in enumerate(self.senders):
            out.update({f"directives/{i}/{k}": v for k, v in sender.counters().items()})
        return out

    # -- the end -------------------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self._job is None:  # setup did not get that far
                return
            self._job.join()
            self._collect()
            if self.state != "error" and len(self.finals) < self.population:
                self._final()
        finally:
            for thing in (*self.followers, *self.senders):
                thing.close()
            for file in (self.eval_file, self.lineage_file):
                if file is not None:
                    file.close()

    def _final(self) -> None:
        """Evaluate every member without a final evaluation yet, waiting briefly for its last params."""
        deadline = time.monotonic() + FINAL_WAIT_S
        missing = [i for i in range(self.population) if i not in self.finals]
        while any(self.followers[i].version < self.last for i in missing) and time.monotonic() < deadline:
            for i in missing:
                self.followers[i].poll(timeout_ms=20)
        due = {i: (self.followers[i].version, self.followers[i].params) for i in missing
               if self.followers[i].params is not None}
        self._start(("final", 0, due))
        self._job.join()
        self._collect()
        if len(self.finals) < self.population:  # a member that never published: its row says so
            self._write_summary()
