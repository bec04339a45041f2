"""EvalManager: the ``eval`` role, evaluating the trainer's params by version (SRL's Eval Manager).

    python -m launch.local configs/cartpole_ppo_eval_distributed.py    # RUN_DIR/eval.jsonl, RUN_DIR/best/

One worker, added to the graph when ``eval.every_updates`` > 0. It subscribes to the trainer's params
stream like an actor and, every ``eval.every_updates`` versions, plays ``eval.episodes`` episodes on
envs of its own with fixed seeds and deterministic actions (``srljax.evaluation.evaluator.Evaluator``: the
single-process loop's code), in a thread, so its loop keeps turning (heartbeats, params) during a
long Atari evaluation. A version that arrives while an evaluation runs is not queued: the next
evaluation takes the newest version held, so the manager never falls behind the trainer. Results
go to ``RUN_DIR/eval.jsonl`` (by version), its own wandb run (``<exp>/<trial>/eval``) and, for the
best mean return so far, ``RUN_DIR/best/`` (``srljax.evaluation.evaluator.EvalBook``). When the trial ends
(``stop``) it evaluates the last version (``eval.final``: waiting up to ``FINAL_WAIT_S`` for the
trainer's last params) and logs the summary line.

It is its own eval actor: this first version runs the episodes in the manager's process rather
than fanning them out to several eval actors.
"""

from __future__ import annotations

import time
from typing import Any

import zmq

from srljax.comm import NameResolver
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import EVAL
from srljax.system.shell.common import BackgroundCall
from srljax.system.shell.worker import Worker

FINAL_WAIT_S = 10.0  # at stop: how long to wait for the trainer's last params version


class EvalManager(Worker):
    role = EVAL
    placement = "cpu"

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close`` runs after a partial setup too)
        self.follower: Any = None  # a ParamsFollower of the trainer
        self.evaluator: Any = None  # an Evaluator (srljax/evaluation/evaluator.py)
        self._wandb: Any = None  # its own wandb run, when log.wandb is on
        self.book: Any = None  # an EvalBook
        self._job: BackgroundCall | None = None

    def setup(self) -> None:
        import algos
        from srljax.evaluation.evaluator import EvalBook, Evaluator
        from srljax.layout import PARAMS, TRAINER
        from srljax.system.training.params import ParamsCodec, ParamsFollower
        from srljax.telemetry.metrics import _start_wandb

        algo = algos.make(self.cfg, self.spec)
        self.follower = ParamsFollower(self.trial, self.peers_of(TRAINER, PARAMS), ParamsCodec(algo), self.stats, self.ctx)
        self.follow_peers(self.follower.sub, TRAINER, PARAMS)
        self.evaluator = Evaluator(self.cfg, algo)
        self._wandb = None
        if self.cfg.log.wandb != "disabled":
            import secrets

            self._wandb = _start_wandb(self.cfg, self.role, secrets.token_hex(4))
        self.book = EvalBook(self.cfg, self._wandb_log)
        self._job = BackgroundCall(f"{self.name}-evaluate")  # tag: the params evaluated

    def _wandb_log(self, values: dict[str, float], step: int) -> None:
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    def poll(self) -> None:
        self._collect()
        self.follower.poll(timeout_ms=50)
        version = self.follower.version
        if not self._job.busy and version > 0 and self.book.due(version):
            params = self.follower.params
            self._job.start(self.evaluator.evaluate, params, version, tag=params)

    def _collect(self) -> None:
        """Record a finished evaluation; re-raise its error."""
        done = self._job.take()
        if done is None:
            return
        params, result = done
        record = self.book.add(result, params)
        self.stats.add("evaluations")
        self.stats.gauge("eval_version", result.version)
        self.stats.gauge("eval_mean", record["mean"])

    def progress(self) -> int:
        return 0 if self.book is None else max(0, self.book.last_version)

    def waiting(self) -> str:
        job = self._job
        return "" if job is not None and job.busy else "for a params version due for evaluation"

    def close(self) -> None:
        try:
            if self.book is None:
                return
            self._job.join()
            self._collect()
            if self.cfg.eval.final and self.state != "error":
                self._final()
            self.log(self.book.summary())
        finally:
            for thing in (self.book, self.follower):
                if thing is not None:
                    thing.close()
            if self._wandb is not None:
                self._wandb.finish()

    def _final(self) -> None:
        """Evaluate the trial's last version, waiting briefly for the trainer's last params."""
        last = self.cfg.num_updates
        deadline = time.monotonic() + FINAL_WAIT_S
        while self.follower.version < last and time.monotonic() < deadline:
            self.follower.poll(timeout_ms=100)
        version = self.follower.version
        if version < 1:
            return
        if version in self.book.evaluated:
            from srljax.evaluation.evaluator import EVAL_FILE, _last_record

            self.book.final = _last_record(self.book.run_dir / EVAL_FILE, version)
            return
        self.book.add(self.evaluator.evaluate(self.follower.params, version), self.follower.params, final=True)
