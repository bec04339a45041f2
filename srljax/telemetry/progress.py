"""What a distributed trial's launcher prints while it runs and when it ends, read from ``metrics.jsonl``.

    record = last_json_line(run_dir / "metrics.jsonl")    # {} while there is none (or it cannot be read)
    print(progress_line(record, cfg))     # update 120/488, env steps 122,880/500,000, return 187.3, ...
    print(summary_line(ok, reason, record, cfg, wall_s))   # finished: done, 500,224 env steps, ...

The controller prints a progress line every ``PROGRESS_EVERY_S`` (``srljax/system/shell/controller.py``), so the
launcher's own console (a terminal or a job log) shows the run without opening the trainer's log.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from srljax.config import Experiment
from srljax.config.psro import last_params_version, psro_graph

PROGRESS_EVERY_S = 5.0  # a CartPole run of a minute shows ~10 lines; a 3-day run one line per 5 s of its log
TAIL_BYTES = 8192


def last_json_line(path: Path) -> dict[str, Any]:
    """The last complete JSON line of ``path`` ({} if none): reads only its tail; a line being written is skipped."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return {}
    for line in reversed(lines[-2:]):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        return record if isinstance(record, dict) else {}
    return {}


def trial_record(cfg: Experiment, run_dir: Path | None = None) -> dict[str, Any]:
    """The trial's last metrics line; for a distributed population or league (whose members each write
    ``RUN_DIR/members/<i>/metrics.jsonl``): the members' env steps summed, the fewest updates and the mean return;
    for several training policies (``RUN_DIR/policies/<name>/metrics.jsonl``, the same env steps each): the most
    env steps, the fewest updates and the policies' mean return.
    ``run_dir``: where the trial's folder is now (default: ``cfg.run_dir``, as launched)."""
    from srljax.config.pbt import member_count, member_dir

    run_dir = Path(cfg.run_dir) if run_dir is None else Path(run_dir)
    members = member_count(cfg) if cfg.layout.mode == "distributed" else 0
    trained = cfg.policies.training() if cfg.layout.mode == "distributed" and cfg.policies.enabled else ()
    if trained:  # several policies: each trainer writes RUN_DIR/policies/<name>/metrics.jsonl over the same steps
        lines = [x for name in trained if (x := last_json_line(run_dir / "policies" / name / "metrics.jsonl"))]
        returns = [r for x in lines if (r := _number(x.get("episode_return"))) is not None]
        return {"env_steps": max(int(x.get("env_steps", 0)) for x in lines),
                "update": min(x.get("update", 0) for x in lines),
                **({"episode_return": sum(returns) / len(returns)} if returns else {})} if lines else {}
    if not members:
        return last_json_line(run_dir / "metrics.jsonl")
    lines = [last_json_line(member_dir(cfg, i, run_dir) / "metrics.jsonl") for i in range(members)]
    lines = [x for x in lines if x]
    if not lines:
        return {}
    returns = [r for x in lines if (r := _number(x.get("episode_return"))) is not None]
    return {"env_steps": sum(int(x.get("env_steps", 0)) for x in lines), "update": min(x.get("update", 0) for x in lines),
            **({"episode_return": sum(returns) / len(returns)} if returns else {})}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def progress_line(record: dict[str, Any], cfg: Experiment) -> str:
    """One line from a metrics record: updates, env steps, return, speed, lag, restarts."""
    if not record:
        return "no metrics line yet"
    steps = int(record.get("env_steps", 0))
    parts = [f"update {record.get('update', '?')}/{last_params_version(cfg)}"]
    if psro_graph(cfg):  # versions run on through the best responses; env steps count the dropped samples too
        parts += [f"best response {int(record.get('iteration', 0))}/{cfg.psro.iterations}", f"env steps {steps:,}"]
    else:
        parts.append(f"env steps {steps:,}/{cfg.total_env_steps:,}")
    if (ret := _number(record.get("episode_return"))) is not None:
        parts.append(f"return {ret:.1f}")
    if (sps := _number(record.get("sps"))) is not None:
        parts.append(f"{sps:,.0f} env steps/s")
    if (lag := _number(record.get("lag/max"))) is not None:
        parts.append(f"lag max {lag:.0f}")
    if record.get("worker_restarts"):
        parts.append(f"restarts {record['worker_restarts']}")
    return ", ".join(parts)


def summary_line(ok: bool, reason: str, record: dict[str, Any], cfg: Experiment, wall_s: float) -> str:
    """The run's last line: how it ended, how far it got, its return, wall time and where the files are."""
    ret = _number(record.get("episode_return"))
    return (f"{'finished' if ok else 'FAILED'}: {reason}, {int(record.get('env_steps', 0)):,} env steps, "
            f"{record.get('update', 0)} updates"
            + (f", recent mean episode return {ret:.1f}" if ret is not None else "")
            + f", wall {wall_s:.0f} s; metrics in {metrics_path(cfg)}")


def metrics_path(cfg: Experiment) -> str:
    """Where the trial's metrics lines are: ``RUN_DIR/metrics.jsonl``, or each member's in a distributed population."""
    from srljax.config.pbt import member_count

    if cfg.layout.mode == "distributed" and member_count(cfg):
        return str(Path(cfg.run_dir) / "members" / "<i>" / "metrics.jsonl")
    return str(Path(cfg.run_dir) / "metrics.jsonl")
