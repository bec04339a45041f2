"""A sweep's ``results.md`` and ``curves.png``, from the trials' run folders only.

    write_report(sweep, planned, sweep_dir, "configs/sweeps/mujoco.py")   # -> sweep_dir/results.md

One row per config and grid point (its seeds pooled): median and IQM of the final returns with
95% bootstrap CIs (``launch/sweep/stats.py``), each seed's final return, wall time per trial and
env steps per second, and, when the sweep names a ``Reference``, the published figure for the env
and median / reference. ``curves.png`` has one panel per env: per row the median over seeds and
the min-max range, on the env-step range every seed covers. matplotlib is imported only here
(``pip install -e '.[test]'`` installs it); without it the table is still written.
"""

from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from launch.sweep.local import available_cores, log_path, record_path
from launch.sweep.spec import Sweep, shape
from launch.sweep.stats import bootstrap_ci, iqm, median
from launch.sweep.trials import DONE, Planned, read_json, read_records, trial_state
from srljax.config import consumes

CURVE_POINTS = 100


@dataclass
class TrialResult:
    """What one trial's run folder says: final return (mean of the last ``log.window`` episodes), curve, time."""

    planned: Planned
    state: str
    final: float | None = None
    steps: np.ndarray | None = None  # [N] env steps of each metrics line with an episode return
    returns: np.ndarray | None = None  # [N]
    env_steps: int = 0
    wall_s: float | None = None
    steady_sps: float | None = None  # env steps/s between the line at STEADY_FROM of the run and the last
    exit_code: int | None = None

    @property
    def env(self) -> str:
        return self.planned.cfg.env.factory or self.planned.cfg.env.id


def collect(planned: list[Planned], sweep_dir: Path) -> list[TrialResult]:
    """Every trial's result as its folder stands now (states are read again: trials may have run since)."""
    out = []
    for p in planned:
        state, _ = trial_state(p.cfg)
        record = read_json(record_path(sweep_dir, p.spec.name))
        result = TrialResult(p, state, exit_code=record.get("exit_code"))
        records = read_records(p.run_dir / "metrics.jsonl")
        rows = [r for r in records if isinstance(r.get("episode_return"), (int, float))]
        if state == DONE and rows:
            result.steps = np.array([r.get("env_steps", 0) for r in rows], dtype=np.float64)
            result.returns = np.array([r["episode_return"] for r in rows], dtype=np.float64)
            result.final = float(result.returns[-1])
            last = records[-1]
            result.env_steps = int(last.get("env_steps", 0))
            # launch to exit as the runner measured it; else the metrics clock (from the logger's start)
            result.wall_s = record.get("wall_s") or last.get("time")
            result.steady_sps = steady_rate(records)
        out.append(result)
    return out


STEADY_FROM = 0.2  # the share of a trial's metrics lines left out of its steady rate (start-up, JIT compile)


def steady_rate(records: list[dict]) -> float | None:
    """env steps/s between the metrics line at ``STEADY_FROM`` of the run and the last one (None if too short)."""
    timed = [r for r in records if isinstance(r.get("time"), (int, float)) and isinstance(r.get("env_steps"), (int, float))]
    if len(timed) < 3:
        return None
    a, b = timed[int(len(timed) * STEADY_FROM)], timed[-1]
    return (b["env_steps"] - a["env_steps"]) / (b["time"] - a["time"]) if b["time"] > a["time"] else None


def short_of_budget(results: list[TrialResult]) -> list[str]:
    """Why finished trials end below ``total_env_steps``: a trial trains whole updates (one line per config)."""
    out = []
    for r in results:
        cfg = r.planned.cfg
        per_update = cfg.env_steps_per_update
        if r.final is None or consumes(cfg.algo) != "segments" or r.env_steps >= cfg.total_env_steps:
            continue
        line = (f"- `{Path(r.planned.spec.config).stem}` trials end at about {r.env_steps:,} env steps, short of "
                f"total_env_steps={cfg.total_env_steps:,}: a trial trains whole updates of {per_update:,} env steps "
                f"({cfg.num_updates} of them); a multiple of {per_update:,} reaches the budget exactly.")
        if line not in out:
            out.append(line)
    return out


def write_report(sweep: Sweep, planned: list[Planned], sweep_dir: Path, sweep_file: str) -> Path:
    """Write ``results.md`` (and ``curves.png`` if matplotlib is installed); returns the markdown's path."""
    results = collect(planned, sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    curves_note = plot_curves(sweep, results, sweep_dir / "curves.png")
    path = sweep_dir / "results.md"
    path.write_text(markdown(sweep, results, sweep_dir, sweep_file, curves_note))
    return path


def groups(results: list[TrialResult]) -> dict[tuple, list[TrialResult]]:
    out: dict[tuple, list[TrialResult]] = {}
    for r in results:
        out.setdefault(r.planned.spec.group, []).append(r)
    return out


def settings(r: TrialResult) -> str:
    """The grid point without the env id (which has its own column)."""
    return ", ".join(f"{k}={v}" for k, v in r.planned.spec.point if k != "env.id")


def markdown(sweep: Sweep, results: list[TrialResult], sweep_dir: Path, sweep_file: str, curves_note: str) -> str:
    ref = sweep.reference
    finished = [r for r in results if r.final is not None]
    head = ["config", "env", "settings", "seeds", "median [95% CI]", "IQM [95% CI]", "final return per seed",
            "wall time per trial", "env steps/s", "steady env steps/s"]
    if ref:
        head += [ref.title, "median / reference"]
    lines = [f"# Sweep `{sweep.name}`", "",
             f"`python -m launch.sweep {sweep_file}`: {len(finished)} of {len(results)} trials finished "
             f"({shape(sweep, len(results))}); trial folders in `{sweep_dir}/`.",
             f"Report written {time.strftime('%Y-%m-%d %H:%M %Z')} on {machine()}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rows in groups(results).values():
        lines.append("| " + " | ".join(_row(rows, ref)) + " |")
    lines += ["", "Final return: the mean return of the last `log.window` episodes (20 by default) at a trial's "
              "last metrics line. Median and IQM (interquartile mean: the mean of the middle half of the seeds, "
              "which is the plain mean below 4 seeds) over seeds, with 95% percentile-bootstrap confidence "
              "intervals (2,000 resamples of the seeds, numpy seed 0). Wall time: per trial, launch to exit "
              "(start-up and JIT included; trials that ran side by side shared the cores); env steps/s: the "
              "trial's env steps over that time; steady env steps/s: from its metrics lines, leaving out the first "
              f"{STEADY_FROM:.0%} (start-up and compilation). All three are medians over seeds."]
    short = short_of_budget(results)
    if short:
        lines += ["", "Budgets:", *short]
    if ref:
        lines += ["", f"Reference column \"{ref.title}\": {ref.source}"]
    lines += ["", curves_note]
    missing = [r for r in results if r.final is None]
    if missing:
        lines += ["", "Not in the table:"]
        for r in missing:
            lines.append(f"- `{r.planned.spec.name}`: {_why_missing(r, sweep_dir)}")
    return "\n".join(lines) + "\n"


def _row(rows: list[TrialResult], ref) -> list[str]:
    first = rows[0]
    finals = np.array([r.final for r in rows if r.final is not None])
    cells = [Path(first.planned.spec.config).stem, first.env, settings(first) or "-", f"{finals.size}/{len(rows)}"]
    if finals.size:
        cells += [_with_ci(finals, median), _with_ci(finals, iqm),
                  " / ".join(_num(r.final) if r.final is not None else "-" for r in rows)]
        walls = [r.wall_s for r in rows if r.wall_s]
        rates = [r.env_steps / r.wall_s for r in rows if r.wall_s]
        steady = [r.steady_sps for r in rows if r.steady_sps]
        cells += [_duration(float(np.median(walls))) if walls else "-",
                  f"{np.median(rates):,.0f}" if rates else "-", f"{np.median(steady):,.0f}" if steady else "-"]
    else:
        cells += ["-"] * 6
    if ref:
        value = ref.returns.get(first.env)
        if value is None:
            cells += ["-", "-"]
        else:
            cells.append(_num(value))
            if not finals.size:
                cells.append("-")
            else:
                mid = float(median(finals))
                ratio = f"{mid / value:.2f}x, " if value > 0 else ""
                budget = first.planned.cfg.total_env_steps
                other = (f" (reference at {ref.env_steps:,} env steps, these at {budget:,})"
                         if ref.env_steps and ref.env_steps != budget else "")
                cells.append(ratio + ("at or above" if mid >= value else "**below**") + other)
    return cells


def _with_ci(x: np.ndarray, statistic) -> str:
    low, high = bootstrap_ci(x, statistic)
    return f"{_num(float(statistic(x)))} [{_num(low)}, {_num(high)}]"


def _num(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.1f}"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _why_missing(r: TrialResult, sweep_dir: Path) -> str:
    log = log_path(sweep_dir, r.planned.spec.name)
    where = f"; log `{log.relative_to(sweep_dir)}`" if log.exists() else ""
    if r.state == DONE:
        return "finished without a completed episode" + where
    if r.exit_code not in (None, 0):
        return f"failed (exit {r.exit_code}){where}"
    _, detail = trial_state(r.planned.cfg)
    return ("not run yet" if r.state == "new" else f"unfinished ({detail})") + where


def machine() -> str:
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{platform.platform()}, {available_cores()} CPUs, Python {platform.python_version()}{load}"


def curve_band(results: list[TrialResult]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """``(steps, median, low, high)`` over the seeds' curves on the env-step range every seed covers."""
    curves = [(r.steps, r.returns) for r in results if r.steps is not None and r.steps.size]
    if not curves:
        return None
    start, stop = max(s[0] for s, _ in curves), min(s[-1] for s, _ in curves)
    steps = np.linspace(start, stop, CURVE_POINTS) if stop > start else np.array([stop])
    ys = np.stack([np.interp(steps, s, y) for s, y in curves])  # [seeds, points]
    return steps, np.median(ys, axis=0), ys.min(axis=0), ys.max(axis=0)


def plot_curves(sweep: Sweep, results: list[TrialResult], path: Path) -> str:
    """Draw ``curves.png``; returns the report's line about it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("No learning curves: matplotlib is not installed (`pip install -e '.[test]'` or `pip install "
                "matplotlib`, then `python -m launch.sweep SWEEP.py --report`).")
    by_env: dict[str, list[list[TrialResult]]] = {}
    for rows in groups(results).values():
        by_env.setdefault(rows[0].env, []).append(rows)
    cols = min(3, len(by_env))
    nrows = math.ceil(len(by_env) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), squeeze=False)
    for ax, (env, members) in zip(axes.flat, by_env.items()):
        for rows in members:
            band = curve_band(rows)
            if band is None:
                continue
            steps, mid, low, high = band
            label = " ".join(filter(None, [Path(rows[0].planned.spec.config).stem, settings(rows[0])]))
            (line,) = ax.plot(steps, mid, label=f"{label} (median of {sum(r.final is not None for r in rows)})")
            ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.25, linewidth=0)
        if sweep.reference and env in sweep.reference.returns:
            ref, value = sweep.reference, sweep.reference.returns[env]
            if ref.env_steps:  # the reference where it was reached: a point at its budget, a dashed line to it
                ax.plot([0, ref.env_steps], [value, value], color="gray", linestyle="--", linewidth=0.8)
                ax.plot([ref.env_steps], [value], "o", color="gray", label=f"{ref.title} at {ref.env_steps:,} steps")
            else:
                ax.axhline(value, color="gray", linestyle="--", label=ref.title)
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.set_ylabel("episode return")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(by_env):]:
        ax.set_visible(False)
    fig.suptitle(f"{sweep.name}: median and min-max over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"Learning curves (median and min-max range over seeds, one panel per env):\n\n![learning curves]({path.name})"
