"""PSROManager: the ``population`` role when ``psro.enabled`` in a worker graph: PSRO's meta-game.

    python -m launch.local configs/kuhn_psro.py layout.mode=distributed layout.num_actors=2   # RUN_DIR/psro/psro.jsonl
    python -m launch.slurm configs/kuhn_psro.py layout.mode=distributed layout.num_actors=2   # the same graph on Slurm

The graph: this manager, one trainer (``srljax/system/training/psro_trainer.py``) and its actors
(``srljax/system/acting/psro_actor.py``). The manager holds the population and its meta-game
(``srljax.population.psro.MetaGame``, the single-process loop's own: exact payoffs by ``GameTree.payoff``, the
meta-solver, OpenSpiel's exploitability of the mixture). At setup it joins policy 0, the network the trainer starts
from (initialised here from ``seed`` as the trainer's ``Learner`` is), writes ``psro.jsonl``'s line 0 and the
actors' first opponents (``psro/table.json``). Then, per best response ``k``: it follows the trainer's params until
version ``GraphSchedule.end(k)`` (the trainer waits there), freezes them into the population (greedy with
``psro.greedy``), writes line ``k + 1`` and, unless it was the last, the table of the next best response's opponents,
then sends the trainer the directive to start it (``srljax/comm/directives.py``, ready point ``k + 1``). After the
last it writes ``psro/exploitability.png`` and its ``done`` key, which the trainer waits for before it ends the trial.

The lines are the single-process loop's (``iteration``, ``policies``, ``env_steps``, ``updates``,
``exploitability``, ``meta_strategy``, ``payoff``, ``meta_exploitability``, ``br_score``, ``wall_s``) with the
trainer's params ``version``; ``env_steps`` and ``updates`` are the best responses' trained ones (``U`` updates of
``env_steps_per_update`` each: the samples the actors stepped and the trainer dropped between best responses are
counted in ``metrics.jsonl``, not here); ``br_score`` is exact here: the best response's sampling policy's mean
score, both seats, against the meta-strategy it trained against (the single-process loop's is the mean of its last
1,000 training games).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from srljax.comm import NameResolver
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import POPULATION
from srljax.system.shell.worker import Worker


class PSROManager(Worker):
    role = POPULATION
    placement = "cpu"

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close`` and ``metrics`` run after a partial setup too)
        self.meta: Any = None  # the MetaGame (srljax/population/psro.py)
        self.schedule: Any = None  # its GraphSchedule
        self.follower: Any = None  # a ParamsFollower of the trainer
        self.sender: Any = None  # a DirectiveSender to the trainer
        self.outbox: list[Any] = []
        self.next = 0  # the best response awaited
        self.done_key = ""
        self.started = 0.0
        self.closed = False

    def setup(self) -> None:
        import jax

        import algos
        import envs
        from srljax.comm.directives import DirectiveSender
        from srljax.layout import DIRECTIVES, TRAINER
        from srljax.population.psro import (
            NO_RESTART,
            PSRO_DIR,
            TABLE,
            GraphSchedule,
            MetaGame,
            br_config,
            game_tree,
        )
        from srljax.system.shell.membership import member_follower
        from srljax.system.training.params import ParamsCodec
        from srljax.system.training.psro_trainer import manager_done_key

        cfg = self.cfg
        if self.restarted:
            raise RuntimeError(NO_RESTART.format(who="population manager"))
        self.done_key = manager_done_key(cfg)
        self.names.delete(self.done_key)
        self.schedule = GraphSchedule.of(cfg)
        algo = algos.make(br_config(cfg), self.spec)
        self.follower = member_follower(self, ParamsCodec(algo), 0)
        self.sender = DirectiveSender(None, self.trial, ctx=self.ctx)
        if not self.connect_peers(self.sender, TRAINER, DIRECTIVES, [0]):
            raise RuntimeError("the configure message named no directives address for the trainer")
        env = envs.make(dataclasses.replace(cfg.env, num_envs=1, batch_size=None), seed=cfg.seed)
        try:
            tree = game_tree(env)
        finally:
            env.close()
        (Path(cfg.run_dir) / PSRO_DIR / TABLE).unlink(missing_ok=True)  # an old trial's opponents: never drawn
        self.meta = MetaGame(cfg, algo, tree, cfg.run_dir)
        state = jax.jit(algo.init)(jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 0))  # as the trainer's Learner
        self.meta.join(algo.policy_params(state))  # policy 0: the network best response 0 starts from
        self.started = time.monotonic()
        self._line(0, version=0, br_score=float("nan"))
        self.meta.write_table(0)
        self.log(f"psro: {self.schedule.iterations} best responses of {self.schedule.updates} updates, meta-solver "
                 f"{cfg.psro.solver}; {tree.num_nodes:,} histories of {tree.game}")

    def _line(self, iteration: int, version: int, br_score: float) -> None:
        u, esu = self.schedule.updates, self.cfg.env_steps_per_update
        line = self.meta.line(iteration, iteration * u * esu, iteration * u, br_score,
                              time.monotonic() - self.started, version=version)
        self.stats.gauge("exploitability", line["exploitability"])
        self.log(f"psro iteration {iteration}: {line['policies']} policies, exploitability "
                 f"{line['exploitability']:.4f} at {line['env_steps']:,} env steps; meta-strategy "
                 f"{[round(float(s), 3) for s in self.meta.sigma]}")

    # -- the loop ----------------------------------------------------------------------------
    def poll(self) -> None:
        self._send()
        if self.next >= self.schedule.iterations:
            time.sleep(0.05)
            return
        if self.follower.poll(timeout_ms=20) and self.follower.version >= self.schedule.end(self.next):
            self._frozen(self.next, self.follower.version, self.follower.params)

    def _frozen(self, k: int, version: int, params: Any) -> None:
        """Best response ``k`` trained: into the population, the next line, the next opponents, the trainer's word."""
        from srljax.comm.directives import Directive

        br_score = self.meta.score_against_meta(params)
        self.meta.join(params, greedy=self.cfg.psro.greedy)
        self.next = k + 1
        self._line(self.next, version=version, br_score=br_score)
        self.stats.add("best_responses")
        if self.next < self.schedule.iterations:
            self.meta.write_table(self.next)
            self.outbox.append(Directive(0, -1, float(self.cfg.trainer.lr), self.next, version))
            self._send()
        else:
            self._finish()

    def _send(self) -> None:
        while self.outbox:
            if not self.sender.send(self.outbox[0], timeout_ms=0):
                self.stats.add("directive_send_retries")
                return
            self.outbox.pop(0)
            self.stats.add("directives_sent")

    def _finish(self) -> None:
        self.meta.close(f"{self.cfg.name}/{self.cfg.trial}")
        self.closed = True
        self.names.add(self.done_key, "1")
        self.log("psro done: psro.jsonl and exploitability.png written")

    # -- heartbeats ------------------------------------------------------------------------------
    def progress(self) -> int:
        return self.next

    def waiting(self) -> str:
        if self.schedule is None or self.next >= self.schedule.iterations:
            return ""
        return (f"for best response {self.next}'s last params (version {self.schedule.end(self.next)}; "
                f"the trainer's newest here: {self.follower.version})")

    def metrics(self) -> dict[str, Any]:
        if self.sender is None:
            return {}
        out = {f"directives/{k}": v for k, v in self.sender.counters().items()}
        if self.meta is not None and len(self.meta.sigma):
            out["policies"] = len(self.meta.tables)
            out["meta_strategy_support"] = int(np.sum(self.meta.sigma > 0))
        return out

    # -- the end -------------------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self.meta is not None and not self.closed:  # stopped early: the lines so far, the curve so far
                self.meta.close(f"{self.cfg.name}/{self.cfg.trial}")
                self.closed = True
        finally:
            for thing in (self.follower, self.sender):
                if thing is not None:
                    thing.close()
