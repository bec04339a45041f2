"""PBT's explore and exploit (Jaderberg et al. 2017), pure and shared by both layouts of a population.

    plan = plan_copies(scores, lrs, rng, cfg)        # {copier: (member it copies, its new learning rate)}
    state = with_lr_scale(state, new_lr / cfg.trainer.lr)                    # no recompile

At a ready step the members are ranked by score; each of the bottom ``pbt.num_exploit`` whose score is below
a random member of the top as many copies it (exploit) and takes its learning rate times one of
``pbt.perturb_factors`` or, with ``pbt.resample_probability``, a log-uniform draw from ``pbt.lr_range``
(explore). A member's learning rate is a factor in its optimiser state (``optax.inject_hyperparams``), so every
member runs the one compiled update; only the learning rate is explored (the entropy coefficient and
clip range are closed over by the loss). The single-process loop (``srljax/loops/population.py``) and the
distributed manager and member trainers (``srljax/system/managers/population_manager.py``,
``srljax/system/training/members.py``) call these; ``pbt/lineage.jsonl`` lines and ``lineage.png`` are
written by ``lineage_line`` and ``plot_lineage``. Members' starting rates and folders are config arithmetic
(``srljax.config.pbt.member_lr``, ``member_dir``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from srljax.config import Experiment

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
