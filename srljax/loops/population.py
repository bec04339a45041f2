"""Population-based training (Jaderberg et al. 2017) in the single-process loop: ``pbt.population`` > 1.

    python -m launch.local configs/cartpole_pbt.py                     # RUN_DIR/pbt/lineage.jsonl, lineage.png
    result = train(cfg)                                                # srljax.loops.train hands populations here

K members, each with its own train state, envs (seed ``seed + i``) and learning rate, train in turn in this
process with the ordinary loop's ``Collector`` and ``Learner``; every ``pbt.ready_updates`` updates each is
evaluated (``Evaluator``) and the bottom copy the top and perturb their learning rate (``plan_copies`` in
``srljax/population/pbt.py``, which the distributed ``population_manager.py`` uses too). Written:
``metrics.jsonl`` and ``eval.jsonl`` (with ``member``), ``pbt/lineage.jsonl``, ``pbt/members.json``,
``pbt/lineage.png`` and the best member's final checkpoint. Resuming a population is refused
(``srljax.storage.run_dir.resume_problems``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import envs
from srljax.config import Experiment
from srljax.config.pbt import member_lr
from srljax.evaluation.evaluator import EVAL_FILE, Evaluator
from srljax.learning.learner import Learner
from srljax.loops.on_policy import Collector
from srljax.population.pbt import PBT_DIR, lineage_line, lr_scale, plan_copies, plot_lineage, with_lr_scale
from srljax.prepare import Run, prepared
from srljax.storage.checkpoint import Checkpointer
from srljax.telemetry.metrics import MetricsLogger, UpdateRecords


@dataclass
class Member:
    index: int
    learner: Learner
    collector: Any
    env: Any
    params: Any = None
    score: float = float("nan")
    history: list[tuple[int, float]] = field(default_factory=list)  # (update, lr)


@dataclass
class PopulationResult:
    """What ``train`` hands back for a population (``srljax.loops.train.TrainResult``'s fields, per member)."""

    config: Experiment
    metrics: list[dict[str, Any]] = field(default_factory=list)
    final_scores: list[float] = field(default_factory=list)
    final_lr: list[float] = field(default_factory=list)
    lineage: list[dict[str, Any]] = field(default_factory=list)
    env_steps: int = 0
    stopped_by: str = "done"
    state: Any = None  # the best member's train state

    @property
    def run_dir(self) -> Path:
        return self.config.run_dir


def train_population(cfg: Experiment | Run, resume: bool = False) -> PopulationResult:
    """Train ``cfg.pbt.population`` members of ``cfg`` in this process (see the module docstring)."""
    run = prepared(cfg, resume)  # refuses a resume (srljax.storage.run_dir.resume_problems)
    cfg, run_dir = run.cfg, run.run_dir

    p = cfg.pbt
    rng = np.random.default_rng(p.seed)
    lrs = [member_lr(cfg, i) for i in range(p.population)]
    members: list[Member] = []
    for i in range(p.population):
        member_cfg = dataclasses.replace(cfg, seed=cfg.seed + i)
        env = envs.make(cfg.env, seed=member_cfg.seed)
        learner = Learner(member_cfg, env.spec, checkpoints=False)
        learner.state = jax.device_put(with_lr_scale(learner.state, lrs[i] / cfg.trainer.lr), learner._replicated)
        members.append(Member(i, learner, Collector(member_cfg, env, learner.algo), env))
    evaluator = Evaluator(cfg, members[0].learner.algo)  # every member has the same structure: one compile
    logger = MetricsLogger(cfg, total=cfg.total_env_steps)  # each line is one member's progress
    pbt_dir = run_dir / PBT_DIR
    pbt_dir.mkdir(exist_ok=True)
    lineage_file = (pbt_dir / "lineage.jsonl").open("a")
    eval_file = (run_dir / EVAL_FILE).open("a")
    result = PopulationResult(config=cfg)
    records = [UpdateRecords() for _ in members]
    deadline = time.time() + cfg.timeout_seconds

    def lr_of(m: Member) -> float:
        return cfg.trainer.lr * lr_scale(m.learner.state)

    def evaluate_all(update: int, final: bool = False) -> list[float]:
        scores = []
        for m in members:
            res = evaluator.evaluate(m.params, m.learner.version)
            m.score = res.mean
            scores.append(res.mean)
            eval_file.write(json.dumps(res.record(member=m.index, update=update, lr=lr_of(m),
                                                  deterministic=cfg.eval.deterministic, seed=cfg.eval.seed,
                                                  **({"final": True} if final else {}))) + "\n")
        eval_file.flush()
        return scores

    try:
        for m in members:
            m.params = m.learner.policy_params()
            m.history.append((0, lr_of(m)))
        update = 0
        while update < cfg.num_updates:
            for m in members:
                batch = m.collector.collect(m.params, m.learner.version, deadline)
                if batch is None:
                    result.stopped_by = "timeout"
                    break
                if m.learner._update is None and members[0].learner._update is not None:
                    # one compiled update for the whole population: same shapes, hyperparameters in the state
                    m.learner._update = members[0].learner._update
                    m.learner._batch_shardings = members[0].learner._batch_shardings
                metrics = jax.device_get(m.learner.step(batch.traj))
                m.params = jax.block_until_ready(m.learner.policy_params())
                version = m.learner.version
                if version % cfg.log.log_every == 0 or version == cfg.num_updates:
                    record = records[m.index].record(version, batch.env_steps, batch.episodes, metrics,
                                                     member=m.index)
                    record["lr"] = float(metrics.get("lr", cfg.trainer.lr)) * lr_scale(m.learner.state)
                    logger.write(record)
                    result.metrics.append(record)
            if result.stopped_by == "timeout":
                break
            update += 1
            if p.ready_updates and update % p.ready_updates == 0 and update < cfg.num_updates:
                scores = evaluate_all(update)
                lrs = [lr_of(m) for m in members]
                plan = plan_copies(scores, lrs, rng, cfg)
                for m in members:
                    line = lineage_line(update, m.index, scores[m.index], lrs[m.index], plan.get(m.index), scores, lrs,
                                        env_steps=m.collector.env_steps)
                    if m.index in plan:
                        src, new_lr = members[plan[m.index][0]], plan[m.index][1]
                        print(f"[{cfg.name}/{cfg.trial}] pbt at update {update}: member {m.index} (score "
                              f"{scores[m.index]:.1f}) copies member {src.index} (score {scores[src.index]:.1f}), "
                              f"lr {lrs[m.index]:.3g} -> {new_lr:.3g}", flush=True)
                        state = jax.tree.map(jnp.copy, src.learner.state)
                        state = state.replace(rng=jax.random.fold_in(state.rng, 1000 * update + m.index))
                        m.learner.state = jax.device_put(with_lr_scale(state, new_lr / cfg.trainer.lr),
                                                         m.learner._replicated)
                        m.params = jax.block_until_ready(m.learner.policy_params())
                        m.history.append((update, new_lr))
                    lineage_file.write(json.dumps(line) + "\n")
                    result.lineage.append(line)
                lineage_file.flush()
        result.final_scores = evaluate_all(update, final=True)
        result.final_lr = [lr_of(m) for m in members]
        result.env_steps = sum(m.collector.env_steps for m in members)
        (pbt_dir / "members.json").write_text(json.dumps(
            [{"member": m.index, "final_score": m.score, "lr": lr_of(m), "updates": m.learner.version,
              "env_steps": m.collector.env_steps} for m in members], indent=2) + "\n")
        best = max(members, key=lambda m: m.score)
        result.state = best.learner.state
        if cfg.checkpoint.final:  # the best member's whole train state, like the ordinary loop's final checkpoint
            ckpt = Checkpointer(run_dir / "checkpoints", keep=cfg.checkpoint.keep)
            ckpt.save(best.learner.version, best.learner.state, meta={"version": best.learner.version,
                                                                      "member": best.index, "score": best.score})
            ckpt.close()
        plot_lineage(pbt_dir, [m.history for m in members], result.lineage, cfg.num_updates)
        print(f"[{cfg.name}/{cfg.trial}] population final scores "
              + ", ".join(f"member {m.index}: {m.score:.1f} (lr {lr_of(m):.3g})" for m in members), flush=True)
    finally:
        for m in members:
            m.env.close()
        lineage_file.close()
        eval_file.close()
        logger.close()
    return result
