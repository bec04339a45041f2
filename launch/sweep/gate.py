"""The learning gate: every shipped config's ``PROMISE`` run over its seeds and judged by the median and the worst seed.

    python -m launch.sweep configs/sweeps/gate.py                  # the quick promises (CI runs this)
    python -m launch.sweep configs/sweeps/gate.py --full           # every promise (MuJoCo, Atari, connect four, ...)
    python -m launch.sweep configs/sweeps/gate.py --dry-run        # what would run
    python -m launch.sweep configs/sweeps/gate.py --report --compare runs/gate.20261206-181500/gate.json

A gate sweep (``Sweep(gate=True)``) takes its trials from the configs' promises (``srljax/config/promise.py``):
each config runs at the promise's seeds with the promise's overrides (usually none: the config as shipped).
A gate always measures the tree it runs on: a launch moves an earlier gate folder aside to
``runs/<gate>.<time>/`` (kept, for ``--compare``) and runs every trial anew. At the end it writes
``gate.md`` (the table) and ``gate.json`` (the figures, the commit and the machine) beside ``results.md``
and prints one line per promise and a last line naming every broken one; the sweep exits 1 when one breaks.
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.sweep.local import available_cores, log_path, record_path
from launch.sweep.spec import Sweep, promise_of
from launch.sweep.trials import Planned, read_json, read_records
from srljax.config import ConfigError, Promise

GATE_ROOTS = ("configs", "examples")
DECLARES = re.compile(r"^PROMISE\s*[:=]", re.MULTILINE)
TRAINS = re.compile(r"^def experiment\(", re.MULTILINE)


def config_files(root: str | Path = ".") -> list[Path]:
    """Every config file (``def experiment(``) under ``configs/`` and ``examples/``, sweeps left out."""
    root = Path(root)
    out = []
    for top in GATE_ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            if "sweeps" not in path.parts and TRAINS.search(path.read_text()):
                out.append(path.relative_to(root))
    return out


def promised_configs(root: str | Path = ".") -> list[str]:
    """The config files that declare a ``PROMISE``, as paths ``launch.local`` takes (relative to ``root``)."""
    return [str(p) for p in config_files(root) if DECLARES.search((Path(root) / p).read_text())]


def tier(sweep: Sweep, full: bool) -> Sweep:
    """The gate's configs for this launch: the quick promises, or with ``full`` every one."""
    if full:
        return sweep
    configs = [c for c in sweep.configs if promise_of(c).quick]
    if not configs:
        raise ConfigError([f"the gate {sweep.name!r} has no quick promise (Promise.quick=True): run it with --full"])
    return dataclasses.replace(sweep, configs=configs)


def measure(metric: str, run_dir: Path) -> float | None:
    """The promise's metric from a finished trial's folder (None: the run never produced it)."""
    if metric in ("return", "best_return"):
        policies = sorted((run_dir / "policies").glob("*/metrics.jsonl"))
        if policies:  # several policies trained: the promise holds for the worst of them
            got = [measure(metric, path.parent) for path in policies]
            return None if None in got else min(got)
        values = [r["episode_return"] for r in read_records(run_dir / "metrics.jsonl")
                  if isinstance(r.get("episode_return"), (int, float))]
        if not values:
            return None
        if metric == "return":
            return float(values[-1])
        windows = [sum(values[i:i + 3]) / 3 for i in range(len(values) - 2)]
        return float(max(windows)) if windows else None
    if metric == "pbt_worst_member":
        members = read_json_list(run_dir / "pbt" / "members.json")
        scores = [m.get("final_score") for m in members]
        ok = scores and all(isinstance(x, (int, float)) and math.isfinite(x) for x in scores)
        return float(min(scores)) if ok else None
    if metric == "neg_exploitability":
        lines = read_records(run_dir / "psro" / "psro.jsonl")
        values = [r["exploitability"] for r in lines if isinstance(r.get("exploitability"), (int, float))]
        return -float(values[-1]) if values else None
    rows = read_records(run_dir / "eval.jsonl")
    if metric.startswith("win_rate:"):
        bot = metric.split(":", 1)[1]
        rates = [r["win_rate"] for r in rows if r.get("opponent") == bot and isinstance(r.get("win_rate"), (int, float))]
        return float(rates[-1]) if rates else None
    means = [r["mean"] for r in rows if isinstance(r.get("mean"), (int, float))]
    if not means:
        return None
    return float(max(means) if metric == "eval_best" else means[-1])


def read_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    return [x for x in data if isinstance(x, dict)] if isinstance(data, list) else []


@dataclass
class Verdict:
    """One promise as its seeds kept it."""

    config: str
    promise: Promise
    budget: int
    values: dict[int, float | None] = field(default_factory=dict)  # seed -> the metric (None: no figure)
    walls: dict[int, float | None] = field(default_factory=dict)  # seed -> launch to exit, seconds
    failed: dict[int, str] = field(default_factory=dict)  # seed -> why it has no figure

    @property
    def median(self) -> float:
        got = [v if v is not None else -math.inf for v in self.values.values()]
        return float(statistics.median(got)) if got else -math.inf

    @property
    def worst(self) -> float:
        return min((v if v is not None else -math.inf for v in self.values.values()), default=-math.inf)

    @property
    def kept(self) -> bool:
        return bool(self.values) and self.median >= self.promise.median and self.worst >= self.promise.worst

    def why(self) -> str:
        """Why the promise broke ("" if it held)."""
        out = [f"seed {s}: {why}" for s, why in self.failed.items()]
        if self.median < self.promise.median:
            out.append(f"median {_num(self.median)} < {self.promise.median:g}")
        if self.worst < self.promise.worst:
            out.append(f"worst seed {_num(self.worst)} < {self.promise.worst:g}")
        return "; ".join(out)

    def figures(self) -> str:
        return ", ".join(f"seed {s}: {_num(v) if v is not None else '-'}" for s, v in self.values.items())

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "metric": self.promise.metric, "budget": self.budget,
                "threshold_median": self.promise.median, "threshold_worst": self.promise.worst,
                "seeds": {str(s): v for s, v in self.values.items()}, "wall_s": {str(s): w for s, w in self.walls.items()},
                "promised_wall_s": self.promise.wall_s, "median": _finite(self.median), "worst": _finite(self.worst),
                "kept": self.kept, "why": self.why()}


def judge(planned: list[Planned], sweep_dir: Path) -> list[Verdict]:
    """Every promise of the gate's trials, from their run folders and the runner's records."""
    verdicts: dict[str, Verdict] = {}
    for p in planned:
        config = p.spec.config
        if config not in verdicts:
            verdicts[config] = Verdict(config, promise_of(config), p.cfg.total_env_steps)
        v = verdicts[config]
        record = read_json(record_path(sweep_dir, p.spec.name))
        v.walls[p.spec.seed] = record.get("wall_s")
        code = record.get("exit_code")
        value = measure(v.promise.metric, p.run_dir) if code == 0 else None
        v.values[p.spec.seed] = value
        if code is None:
            v.failed[p.spec.seed] = "did not run"
        elif code != 0:
            v.failed[p.spec.seed] = f"exit {code} (log: {log_path(sweep_dir, p.spec.name)})"
        elif value is None:
            v.failed[p.spec.seed] = f"no {v.promise.metric} in its run folder"
    return list(verdicts.values())


def write(verdicts: list[Verdict], sweep_dir: Path, sweep_file: str) -> Path:
    """``gate.md`` and ``gate.json`` in the gate's folder; returns the markdown's path."""
    tree = tree_id()
    data = {"tree": tree, "written": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(),
            "promises": [v.to_json() for v in verdicts]}
    (sweep_dir / "gate.json").write_text(json.dumps(data, indent=1) + "\n")
    kept = sum(v.kept for v in verdicts)
    lines = [f"# Learning gate `{sweep_file}`", "", f"Tree {tree}; {data['written']} on {data['machine']}.",
             f"{kept} of {len(verdicts)} promises kept.", "",
             "| config | metric | budget (env steps) | seeds | per seed | median (>=) | worst (>=) | wall per seed "
             "(promised) | kept |", "|---|---|---|---|---|---|---|---|---|"]
    for v in verdicts:
        walls = [w for w in v.walls.values() if w]
        wall = f"{statistics.median(walls):.0f} s" if walls else "-"
        lines.append(f"| {v.config} | {v.promise.metric} | {v.budget:,} | {len(v.values)} | {v.figures()} | "
                     f"{_num(v.median)} ({v.promise.median:g}) | {_num(v.worst)} ({v.promise.worst:g}) | {wall} "
                     f"({v.promise.wall_s:.0f} s) | {'yes' if v.kept else '**NO**: ' + v.why()} |")
    path = sweep_dir / "gate.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def summary(verdicts: list[Verdict], path: Path) -> str:
    """Every promise on a line, then the last line: all kept, or each broken one with its seeds' figures."""
    lines = []
    for v in verdicts:
        lines.append(f"  {'kept  ' if v.kept else 'BROKEN'} {v.config}: {v.promise.metric} median {_num(v.median)} "
                     f"(>= {v.promise.median:g}), worst {_num(v.worst)} (>= {v.promise.worst:g}); {v.figures()}")
    broken = [v for v in verdicts if not v.kept]
    if broken:
        lines.append(f"gate: {len(broken)} of {len(verdicts)} promises BROKEN ({path}): " + "; ".join(
            f"{v.config} [{v.why()}; {v.figures()}]" for v in broken))
    else:
        lines.append(f"gate: all {len(verdicts)} promises kept ({path})")
    return "\n".join(lines)


def compare(old_path: str | Path, new: dict[str, Any]) -> str:
    """What moved between an earlier gate's ``gate.json`` (a file or its folder) and ``new``."""
    old_path = Path(old_path)
    if old_path.is_dir():
        old_path = old_path / "gate.json"
    old = read_json(old_path)
    if not old.get("promises"):
        raise ConfigError([f"--compare {old_path}: not a gate.json (a gate's folder holds one after it ran)"])
    before = {p["config"]: p for p in old["promises"]}
    lines = [f"compared with {old_path} (tree {old.get('tree', '?')}) -> tree {new.get('tree', '?')}:"]
    for p in new["promises"]:
        q = before.pop(p["config"], None)
        if q is None:
            lines.append(f"  new      {p['config']}: median {_num(p['median'])}, worst {_num(p['worst'])}")
            continue
        moved = "kept -> BROKEN" if q["kept"] and not p["kept"] else "BROKEN -> kept" if p["kept"] and not q[
            "kept"] else "kept" if p["kept"] else "BROKEN"
        lines.append(f"  {moved:<8} {p['config']}: median {_num(q['median'])} -> {_num(p['median'])} "
                     f"({_delta(q['median'], p['median'])}), worst {_num(q['worst'])} -> {_num(p['worst'])} "
                     f"({_delta(q['worst'], p['worst'])}), wall per seed {_wall(q)} -> {_wall(p)}")
    lines += [f"  gone     {config}" for config in before]
    return "\n".join(lines)


def tree_id() -> str:
    """The commit the gate ran on, ``+changes`` when the work tree differs from it."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (commit or "unknown") + ("+changes" if dirty else "")


def machine() -> str:
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.machine()} {cpu or platform.processor()}, {available_cores()} cores".strip()


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}" if abs(x) < 10 else f"{x:.1f}"


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _delta(a: float | None, b: float | None) -> str:
    return f"{b - a:+.3g}" if a is not None and b is not None else "?"


def _wall(p: dict[str, Any]) -> str:
    walls = [w for w in p.get("wall_s", {}).values() if w]
    return f"{statistics.median(walls):.0f} s" if walls else "-"
