"""Metrics out of a running experiment: ``metrics.jsonl``, progress, wandb, Prometheus, TensorBoard.

    log = MetricsLogger(cfg, total=cfg.total_env_steps)
    log.write({"env_steps": 1024, "episode_return": 21.0, "sps": 900.0, "policy_loss": 0.1})
    log.close()

Every record is one JSON line appended to ``runs/<experiment>/<trial>/metrics.jsonl``. Off a terminal
(``log.progress=lines``, or ``auto`` in a job log) the console gets a line at most every ``log.progress_every_s``
(the first and the last always); with ``log.tensorboard=true`` every record also goes to
``RUN_DIR/tensorboard/`` (``srljax/telemetry/tensorboard.py``), at step ``env_steps``.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from srljax.config import Experiment, to_dict
from srljax.layout import TRAINER


class EpisodeWindow:
    """Mean of the last ``size`` completed episodes (true returns from the env adapter); ``win_rate`` over the last
    ``size`` episodes whose outcome the env reports (``won``: 1 / 0, NaN where it reports none; a JAX env's
    ``episode_won``, SMAX)."""

    def __init__(self, size: int):
        self.returns: deque[float] = deque(maxlen=size)
        self.lengths: deque[int] = deque(maxlen=size)
        self.wins: deque[float] = deque(maxlen=size)
        self.count = 0

    def add(self, episode_return: np.ndarray, episode_length: np.ndarray, won: np.ndarray | None = None) -> None:
        ended = ~np.isnan(episode_return)
        for r, n in zip(episode_return[ended], episode_length[ended]):
            self.returns.append(float(r))
            self.lengths.append(int(n))
            self.count += 1
        if won is not None:
            self.wins.extend(float(w) for w in np.asarray(won)[ended & ~np.isnan(won)])

    def add_wins(self, wins: np.ndarray) -> None:
        """Outcomes reported apart from the returns (1.0 / 0.0 each: the worker graph's actors send them so)."""
        self.wins.extend(float(w) for w in wins)

    def state(self) -> dict[str, Any]:
        """JSON-able contents, for a run's checkpoint."""
        return {"returns": list(self.returns), "lengths": list(self.lengths), "wins": list(self.wins),
                "count": self.count}

    def load_state(self, state: dict[str, Any]) -> None:
        self.returns.clear()
        self.lengths.clear()
        self.wins.clear()
        self.returns.extend(float(x) for x in state.get("returns", []))
        self.lengths.extend(int(x) for x in state.get("lengths", []))
        self.wins.extend(float(x) for x in state.get("wins", []))
        self.count = int(state.get("count", len(self.returns)))

    def summary(self) -> dict[str, float]:
        if not self.returns:
            return {}
        out = {
            "episode_return": float(np.mean(self.returns)),
            "episode_length": float(np.mean(self.lengths)),
            "episodes": self.count,
        }
        if self.wins:
            out["win_rate"] = float(np.mean(self.wins))
        return out


class UpdateRecords:
    """Builds the metrics record of a logged update, for the single-process loop and the trainer alike.

        records = UpdateRecords()
        logger.write(records.record(update, env_steps, window.summary(), train_metrics, **extra))
    """

    def __init__(self, env_steps: int = 0) -> None:
        self._last = (time.monotonic(), env_steps)  # a resumed run's first sps counts from its checkpoint

    def record(self, update: int, env_steps: int, episodes: dict[str, float], train_metrics: dict[str, Any],
               **extra: Any) -> dict[str, Any]:
        """``update``, ``env_steps``, ``sps`` (since the previous record), episode stats, losses, ``extra``."""
        now = time.monotonic()
        last_time, last_steps = self._last
        self._last = (now, env_steps)
        return {"update": update, "env_steps": env_steps, "sps": (env_steps - last_steps) / max(now - last_time, 1e-9),
                **episodes, **{k: float(v) for k, v in train_metrics.items()}, **extra}


def _plain(value: Any) -> Any:
    if isinstance(value, (np.generic, np.ndarray)) or hasattr(value, "item"):
        value = np.asarray(value).item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/inf; keep them visible rather than crash
    return value


class MetricsLogger:
    """``elapsed``: seconds the run had already trained (a resumed run's ``time`` continues from there);
    ``wandb_id``: the wandb run to continue (a resumed run logs into the same one); ``self.wandb_id``
    is the id this logger uses, for the run's checkpoint. ``prometheus``: ``"serve"`` (the single-process
    loop) serves the records' numbers on an endpoint of its own (``log.prometheus_port``; 0: any free
    port) listed in ``RUN_DIR/prometheus_targets.json``; a ``srljax.telemetry.prometheus.Exporter`` (a trainer
    worker's) adds them to that one; None: no Prometheus."""

    TENSORBOARD_DIR = "tensorboard"

    def __init__(self, cfg: Experiment, total: int, role: str = TRAINER, *, elapsed: float = 0.0,
                 wandb_id: str | None = None, prometheus: Any = "serve"):
        self.cfg = cfg
        self.total = total
        self.run_dir = Path(cfg.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / "metrics.jsonl"
        self._file = self.path.open("a")
        self._start = time.time() - elapsed
        self.wandb_id = wandb_id or secrets.token_hex(4)
        self._progress = None
        mode = cfg.log.progress
        if mode == "bar" or (mode == "auto" and sys.stdout.isatty()):
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} steps"),
                TextColumn("{task.fields[info]}"),
                TimeRemainingColumn(),
            )
            self._task = self._progress.add_task(f"{cfg.name}/{cfg.trial}", total=total, info="")
            self._progress.start()
        self._wandb = None
        if cfg.log.wandb != "disabled":
            self._wandb = _start_wandb(cfg, role, self.wandb_id)
        self._own_prometheus = prometheus == "serve"
        self._prometheus = _serve_prometheus(cfg, role) if self._own_prometheus else prometheus
        self._printed_at: float | None = None  # when the last progress line was printed (``log.progress_every_s``)
        self._unprinted = ""  # the newest line not printed yet, printed at ``close``
        self._tensorboard: dict[Any, Any] = {}  # member (None: the trial) -> EventWriter
        if cfg.log.tensorboard:
            self._board(None).text("config", "    " + json.dumps(to_dict(cfg), indent=2).replace("\n", "\n    "))

    def _board(self, member: Any) -> Any:
        """The TensorBoard writer of the trial (``member`` None) or of a single-process population's member."""
        if member not in self._tensorboard:
            from srljax.telemetry.tensorboard import EventWriter

            folder = self.run_dir / self.TENSORBOARD_DIR
            self._tensorboard[member] = EventWriter(folder if member is None else folder / f"member-{member}")
        return self._tensorboard[member]

    def write(self, record: dict[str, Any], gauges: bool = True) -> None:
        """One metrics line (and the progress line, tensorboard, wandb); ``gauges=False``: not the Prometheus
        gauges, which hold the latest values only (a loop writing many lines at once sets them from its last)."""
        record = {"time": round(time.time() - self._start, 3), **{k: _plain(v) for k, v in record.items()}}
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        steps = record.get("env_steps", 0)
        ret = record.get("episode_return")
        info = f"{record.get('sps', 0):,.0f} sps" + (f"  return {ret:.1f}" if isinstance(ret, float) else "")
        if "member" in record:  # a population's lines: whose
            info = f"member {record['member']}  {info}"
        if self._progress is not None:
            self._progress.update(self._task, completed=steps, info=info)
        else:
            self._line(f"[{self.cfg.name}/{self.cfg.trial}] {steps:,}/{self.total:,} steps  {info}")
        if self.cfg.log.tensorboard:
            self._board(record.get("member")).scalars(record, step=int(steps))
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in record.items() if isinstance(v, (int, float))}, step=int(steps))
        if self._prometheus is not None and gauges:
            for key, value in record.items():
                if isinstance(value, (int, float)):
                    self._prometheus.set(key, value)

    def _line(self, line: str) -> None:
        """Print ``line`` if ``log.progress_every_s`` passed since the last one printed; else keep it for ``close``."""
        now = time.monotonic()
        if self._printed_at is None or now - self._printed_at >= self.cfg.log.progress_every_s:
            print(line, flush=True)
            self._printed_at, self._unprinted = now, ""
        else:
            self._unprinted = line

    def wandb_log(self, values: dict[str, float], step: int) -> None:
        """Extra numbers for wandb only (``eval/*`` from ``srljax.evaluation.evaluator``), at env step ``step``."""
        if self._wandb is not None:
            self._wandb.log(values, step=step)

    @property
    def elapsed(self) -> float:
        """Seconds this run has trained, over all its launches."""
        return time.time() - self._start

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
        elif self._unprinted:  # the run's last line
            print(self._unprinted, flush=True)
            self._unprinted = ""
        self._file.close()
        for writer in self._tensorboard.values():
            writer.close()
        self._tensorboard.clear()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None
        if self._own_prometheus and self._prometheus is not None:
            self._prometheus.close()
            self._prometheus = None


def _start_wandb(cfg: Experiment, role: str, run_id: str) -> Any:
    import wandb

    wandb_dir = Path(cfg.run_dir).absolute()
    os.environ.setdefault("WANDB_SILENT", "true")
    return wandb.init(
        project=cfg.log.wandb_project,
        group=cfg.name,
        name=f"{cfg.name}/{cfg.trial}/{role}",
        mode=cfg.log.wandb,
        dir=str(wandb_dir),
        config=to_dict(cfg),
        reinit="create_new",
        id=f"{run_id}-{role}",
        resume="allow",  # a resumed trial continues the same wandb run
    )


def _serve_prometheus(cfg: Experiment, role: str) -> Any:
    """The single-process loop's endpoint (gauges ``srljax_train_<key>``), None with ``log.prometheus_port=-1``."""
    if cfg.log.prometheus_port < 0:
        return None
    from srljax.comm.hosts import bind_host
    from srljax.telemetry.prometheus import Exporter, Target, write_targets

    exporter = Exporter(cfg.log.prometheus_port, bind_host())
    write_targets(cfg.run_dir, [Target(exporter.address, {"experiment": cfg.name, "trial": cfg.trial, "role": role,
                                                           "index": "0"})])
    return exporter
