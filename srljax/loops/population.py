"""Population-based training (Jaderberg et al. 2017) in the single-process loop: ``pbt.population`` > 1.

    python -m launch.local configs/cartpole_pbt.py                     # RUN_DIR/pbt/lineage.jsonl, lineage.png
    result = train(cfg)                                                # srljax.loops.train hands populations here

K members, each a policy with its own ``TrainState`` (params, optimiser state, normaliser stats),
envs (seed ``seed + i``), act key and learning rate, train in turn in this process: one update of
member 0, one of member 1, ... (the same ``Collector`` and ``Learner`` as the ordinary loop). Every
``pbt.ready_updates`` updates every member is evaluated (``srljax.evaluation.evaluator.Evaluator``: fixed-seed,
deterministic episodes, ``eval.episodes`` of them) and ranked; each of the bottom
``floor(pbt.quantile x K)`` members whose score is below a randomly chosen member of the top as many
copies that member's whole train state (weights, optimiser state, normaliser stats; exploit) and
multiplies its learning rate by one of ``pbt.perturb_factors`` or, with ``pbt.resample_probability``,
draws it log-uniformly from ``pbt.lr_range`` (explore).

The learning rate lives in the train state: with a population, PPO's optimiser ends in
``optax.inject_hyperparams(optax.scale)`` and a member's rate is ``trainer.lr x step_size`` (times
the annealing schedule), so every member runs the one compiled update and a perturbation is a new
number in the state, never a recompile. Only the learning rate is explored in this first version
(the entropy coefficient and clip range are closed over by the loss).

Written to the run folder: ``metrics.jsonl`` (one line per member update, with ``member`` and its
``lr``), ``eval.jsonl`` (every member's evaluations, with ``member``), ``pbt/lineage.jsonl`` (one
line per ready step and member: its score, and for an exploiting member whom it copied, the
learning rate before and after), ``pbt/members.json`` (the final evaluation of every member) and
``pbt/lineage.png`` (learning rate per member over updates, a copy drawn as an arrow from the
member copied). The same population as a worker graph (``layout.mode=distributed``: a trainer per
member, their actors, a population manager; local and Slurm) is ``srljax/system/managers/population_manager.py``,
which ranks and decides with ``plan_copies`` here. Not built: resuming a population (refused in both
layouts, ``srljax.storage.run_dir.resume_problems``), and per-member checkpoints beyond the final one in the single-process loop.
"""

from __future__ import annotations

import dataclasses
import json
import math
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
from srljax.prepare import Run, prepared
from srljax.storage.checkpoint import Checkpointer
from srljax.telemetry.metrics import MetricsLogger, UpdateRecords

PBT_DIR = "pbt"


def lr_scale(state: Any) -> float:
    """A member's learning-rate factor (``step_size`` of the optimiser's last, injected, transform)."""
    return float(state.opt_state[-1].hyperparams["step_size"])


def with_lr_scale(state: Any, scale: float) -> Any:
    """``state`` with the learning-rate factor set to ``scale`` (same shapes and dtypes: no recompile)."""
    last = state.opt_state[-1]
    old = last.hyperparams["step_size"]
    hyper = {**last.hyperparams, "step_size": jnp.asarray(scale, old.dtype)}
    return state.replace(opt_state=(*state.opt_state[:-1], last._replace(hyperparams=hyper)))


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


def explore(lr: float, rng: np.random.Generator, cfg: Experiment) -> float:
    """A perturbed learning rate: ``lr`` x a factor, or a log-uniform draw from ``pbt.lr_range``, clipped to it."""
    p = cfg.pbt
    low, high = p.lr_range
    if rng.random() < p.resample_probability:
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))
    return float(min(max(lr * float(rng.choice(p.perturb_factors)), low), high))


def exploit_plan(scores: list[float], n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """``(bottom member, top member it copies)`` pairs: each of the ``n`` lowest-scoring members copies a
    random one of the ``n`` highest if that one scored strictly more (ties at a score cap copy nothing)."""
    order = sorted(range(len(scores)), key=lambda i: (scores[i], i))
    bottom, top = order[:n], order[-n:]
    out = []
    for i in bottom:
        j = int(rng.choice(top))
        if scores[j] > scores[i]:
            out.append((i, j))
    return out


def plan_copies(scores: list[float], lrs: list[float], rng: np.random.Generator,
                cfg: Experiment) -> dict[int, tuple[int, float]]:
    """One ready step's decisions: ``{copier: (member it copies, its new learning rate)}`` (exploit with
    ``exploit_plan``, explore the copied member's rate with ``explore``, in member order). The single-process
    loop and the distributed population manager (``srljax/system/managers/population_manager.py``) both use it."""
    copied = dict(exploit_plan(scores, cfg.pbt.num_exploit, rng))
    return {i: (copied[i], explore(lrs[copied[i]], rng, cfg)) for i in range(len(scores)) if i in copied}


def lineage_line(update: int, member: int, score: float, lr: float, copy: tuple[int, float] | None,
                 scores: list[float], lrs: list[float], **extra: Any) -> dict[str, Any]:
    """One line of ``pbt/lineage.jsonl``: a member's score at a ready step and, if it copied, whom and the rates."""
    line: dict[str, Any] = {"update": update, "member": member, "score": score, "lr": lr, **extra}
    if copy is not None:
        src, new_lr = copy
        line |= {"copied": src, "copied_score": scores[src], "copied_lr": lrs[src], "new_lr": new_lr}
    return line


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


def plot_lineage(directory: Path, histories: list[list[tuple[int, float]]], lineage: list[dict[str, Any]],
                 num_updates: int) -> Path | None:
    """``lineage.png``: each member's learning rate over updates (log scale) with an arrow for every copy from
    the member copied to the one that copied it, and below each member's evaluation score at every ready
    step. None (and a note) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("pbt: matplotlib is not installed; lineage.png not drawn (lineage.jsonl has the same data)")
        return None
    fig, (ax, score_ax) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, hist in enumerate(histories):
        xs = [u for u, _ in hist] + [num_updates]
        ys = [lr for _, lr in hist] + [hist[-1][1]]
        ax.step(xs, ys, where="post", color=colours[i % len(colours)], label=f"member {i}")
        scores = [(x["update"], x["score"]) for x in lineage if x["member"] == i]
        if scores:
            score_ax.plot(*zip(*scores), marker="o", ms=3, color=colours[i % len(colours)], label=f"member {i}")
    for line in lineage:
        if "copied" in line:
            ax.annotate("", xy=(line["update"], line["new_lr"]), xytext=(line["update"], line["copied_lr"]),
                        arrowprops={"arrowstyle": "->", "color": colours[line["member"] % len(colours)], "lw": 1.2})
            ax.text(line["update"], line["new_lr"], f" {line['copied']}->{line['member']}", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("learning rate (before annealing)")
    ax.set_title("PBT lineage: learning rate per member; arrows: copied member -> copier")
    ax.legend(fontsize=8)
    score_ax.set_xlabel("update")
    score_ax.set_ylabel("evaluation score at ready steps\n(before the copy)")
    fig.tight_layout()
    path = directory / "lineage.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
