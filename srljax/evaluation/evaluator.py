"""Evaluation: the current policy on envs of its own, fixed seeds, deterministic actions (``cfg.eval``).

    evaluator = Evaluator(cfg, algo)
    result = evaluator.evaluate(params, version=40)       # EvalResult: returns [eval.episodes], lengths
    book = EvalBook(cfg, algo)                            # eval.jsonl, best/ checkpoint, summary
    if book.due(version): book.add(evaluator.evaluate(params, version), params)
    params, meta = load_best(cfg.run_dir, algo)           # the best version's params and its score

The same code runs inline in the single-process loop (``srljax/loops/train.py``, ``srljax/loops/replay.py``)
and in the distributed ``eval`` worker (``srljax/system/managers/eval_manager.py``), which follows the
trainer's params stream.

An evaluation makes a fresh env (``env`` as trained, ``eval.num_envs`` copies, sync) with seed
``eval.seed`` and an act key from the same seed, so evaluating one params version twice gives the
same episodes. Env i plays a fixed share of the ``eval.episodes`` episodes (``episodes // n``, one
more for the first ``episodes % n``), so which episodes count never depends on which end first
(no bias towards short episodes). Returns are the env adapter's whole-game returns (Atari: all
lives, unclipped). With ``eval.video`` env 0's first episode is also recorded (``srljax/evaluation/video.py``)
to ``RUN_DIR/videos/version-<v>.gif`` and, with wandb on, ``eval/video``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

import envs
from srljax.config import Experiment
from srljax.evaluation.video import VideoRecorder
from srljax.learning.acting import Acting

BEST_DIR = "best"
EVAL_FILE = "eval.jsonl"


@dataclass
class EvalResult:
    """One evaluation of one params version."""

    version: int
    returns: list[float]
    lengths: list[int]
    wall_s: float = 0.0
    video: str | None = None  # eval.video: the file (relative to the run folder) of env 0's first episode
    video_note: str | None = None  # eval.video: why there is no video

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    def record(self, **extra: Any) -> dict[str, Any]:
        """The ``eval.jsonl`` line: version, mean/median/std/min/max return, mean length, every return."""
        r = np.asarray(self.returns, np.float64)
        return {"version": self.version, "mean": float(r.mean()), "median": float(np.median(r)),
                "std": float(r.std()), "min": float(r.min()), "max": float(r.max()),
                "episodes": len(self.returns), "mean_length": float(np.mean(self.lengths)),
                "returns": [float(x) for x in r], "wall_s": round(self.wall_s, 3),
                **({"video": self.video} if self.video else {}),
                **({"video_skipped": self.video_note} if self.video_note else {}), **extra}


def eval_env_config(cfg: Experiment) -> Any:
    """The env the evaluation steps: the training env, ``eval.num_envs`` (or one per episode) copies, sync."""
    n = cfg.eval.num_envs or cfg.eval.episodes
    return dataclasses.replace(cfg.env, num_envs=n, batch_size=0)


def acting_algorithm(cfg: Experiment, algo: Any) -> Any:
    """``algo`` with ``act`` replaced by its deterministic act when ``eval.deterministic`` asks for it."""
    if not cfg.eval.deterministic:
        return algo
    if getattr(algo, "act_deterministic", None) is None:
        raise ValueError("eval.deterministic=true but this algorithm has no deterministic act "
                         "(Algorithm.act_deterministic is None): set eval.deterministic=false or give it one")
    return dataclasses.replace(algo, act=algo.act_deterministic)


class Evaluator:
    """Runs ``eval.episodes`` whole episodes with given params; the act function compiles once."""

    def __init__(self, cfg: Experiment, algo: Any):
        self.cfg = cfg
        self.env_cfg = eval_env_config(cfg)
        self.acting = Acting(acting_algorithm(cfg, algo), self.env_cfg.num_envs, jax.random.PRNGKey(cfg.eval.seed))
        self._initial_state = jax.tree.map(np.array, self.acting.actor_state)
        self.video = VideoRecorder(cfg) if cfg.eval.video else None
        self._noted = False

    def evaluate(self, params: Any, version: int) -> EvalResult:
        start = time.perf_counter()
        episodes, n = self.cfg.eval.episodes, self.env_cfg.num_envs
        quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
        returns: list[list[float]] = [[] for _ in range(n)]
        lengths: list[list[int]] = [[] for _ in range(n)]
        acting = self.acting  # the same fixed key and fresh actor states every evaluation
        acting.key = jax.random.PRNGKey(self.cfg.eval.seed)
        acting.first[:] = True
        for store, init in zip(jax.tree.leaves(acting.actor_state), jax.tree.leaves(self._initial_state)):
            store[...] = init
        env = envs.make(self.env_cfg, seed=self.cfg.eval.seed)
        video = self.video
        try:
            if video is not None:
                video.begin(env)
            ts = env.reset()
            if video is not None:
                video.capture(ts)
            while any(len(returns[i]) < quota[i] for i in range(n)):
                action, _ = acting.act(params, ts)
                ts = env.step(action, ts.env_id)
                if video is not None:
                    video.capture(ts)
                for row in np.flatnonzero(~np.isnan(ts.episode_return)):
                    i = int(ts.env_id[row])
                    if len(returns[i]) < quota[i]:
                        returns[i].append(float(ts.episode_return[row]))
                        lengths[i].append(int(ts.episode_length[row]))
        finally:
            env.close()
        flat_r = [r for rs in returns for r in rs]
        flat_l = [x for ls in lengths for x in ls]
        result = EvalResult(version, flat_r, flat_l)
        if video is not None:
            path = video.write(version)
            result.video = str(path.relative_to(self.cfg.run_dir)) if path is not None else None
            result.video_note = video.note
            if video.note and not self._noted:  # said once per evaluator, and in every eval.jsonl line
                print(f"[{self.cfg.name}/{self.cfg.trial}] {video.note}", flush=True)
                self._noted = True
        result.wall_s = time.perf_counter() - start
        return result


def params_like(algo: Any) -> Any:
    """Abstract published params of ``algo`` (shapes and dtypes, nothing computed)."""
    return jax.eval_shape(lambda key: algo.policy_params(algo.init(key)), jax.random.PRNGKey(0))


def load_best(run_dir: str | Path, algo: Any) -> tuple[Any, dict[str, Any]]:
    """The best evaluated version's params (``RUN_DIR/best/``) and its meta (``version``, ``mean``, ...)."""
    from srljax.storage.checkpoint import Checkpointer
    from srljax.storage.steps import read_meta

    directory = Path(run_dir) / BEST_DIR
    found = read_meta(directory)
    if found is None:
        raise FileNotFoundError(f"no best checkpoint in {directory}: the run had eval.every_updates=0, "
                                "eval.keep_best=false or no evaluation yet")
    step, meta = found
    checkpointer = Checkpointer(directory, keep=1)
    try:
        params = checkpointer.restore(params_like(algo), step)
    finally:
        checkpointer.close()
    return params, meta


class EvalBook:
    """What the eval manager keeps: ``eval.jsonl`` (one line per evaluation), the best version's params in
    ``RUN_DIR/best/`` and the summary at the end. ``wandb_log(values, step)``: where ``eval/*`` numbers go."""

    def __init__(self, cfg: Experiment, wandb_log: Callable[[dict[str, float], int], None] | None = None):
        self.cfg = cfg
        self.run_dir = Path(cfg.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._file = (self.run_dir / EVAL_FILE).open("a")
        self._wandb_log = wandb_log
        self._tensorboard: Any = None  # ``log.tensorboard``: RUN_DIR/tensorboard/eval (srljax/telemetry/tensorboard.py)
        if cfg.log.tensorboard:
            from srljax.telemetry.tensorboard import EventWriter

            self._tensorboard = EventWriter(self.run_dir / "tensorboard" / Path(EVAL_FILE).stem)
        self._checkpointer: Any = None
        self.last_version = -1  # the newest version evaluated
        self.best: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None
        self.evaluated: set[int] = set()
        from srljax.storage.steps import read_meta

        found = read_meta(self.run_dir / BEST_DIR)  # a resumed or restarted manager keeps the earlier best
        if found is not None and "mean" in found[1]:
            self.best = found[1]

    def due(self, version: int) -> bool:
        """Whether ``version`` should be evaluated: ``eval.every_updates`` versions after the last one."""
        every = self.cfg.eval.every_updates
        return every > 0 and version > 0 and version // every > max(self.last_version, 0) // every

    def add(self, result: EvalResult, params: Any, final: bool = False, env_steps: int | None = None) -> dict[str, Any]:
        """Record one evaluation; keep ``params`` as the best if its mean return is the highest so far."""
        record = result.record(time=round(time.time(), 3), deterministic=self.cfg.eval.deterministic,
                               seed=self.cfg.eval.seed, **({"env_steps": env_steps} if env_steps is not None else {}),
                               **({"final": True} if final else {}))
        self.last_version = max(self.last_version, result.version)
        self.evaluated.add(result.version)
        if self.cfg.eval.keep_best and (self.best is None or record["mean"] > self.best["mean"]):
            self._save_best(params, record)
            record["best"] = True
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        if final:
            self.final = record
        if self._tensorboard is not None:
            self._tensorboard.scalars({f"eval/{k}": record[k] for k in ("mean", "median", "std", "min", "max",
                                                                        "mean_length", "version")},
                                      step=int(env_steps or result.version))
        if self._wandb_log is not None:
            values: dict[str, Any] = {f"eval/{k}": float(record[k])
                                      for k in ("mean", "median", "std", "min", "max", "mean_length")}
            if result.video and self.cfg.log.wandb != "disabled":
                import wandb

                values["eval/video"] = wandb.Video(str(self.run_dir / result.video))
            self._wandb_log({**values, "eval/version": float(result.version)}, int(env_steps or result.version))
        return record

    def _save_best(self, params: Any, record: dict[str, Any]) -> None:
        from srljax.storage.checkpoint import Checkpointer

        if self._checkpointer is None:
            self._checkpointer = Checkpointer(self.run_dir / BEST_DIR, keep=1)
        meta = {k: v for k, v in record.items() if k != "returns"}
        self._checkpointer.save(record["version"], jax.device_get(params), meta=meta)
        self._checkpointer.wait()  # a best version is rare; written now, so a crash right after keeps it
        self.best = meta

    def summary(self) -> str:
        """One line: the final evaluation and the best version."""
        parts = []
        if self.final is not None:
            f = self.final
            parts.append(f"final evaluation: version {f['version']} mean return {f['mean']:.1f} "
                         f"(min {f['min']:.1f}, max {f['max']:.1f}) over {f['episodes']} episodes")
        if self.best is not None:
            parts.append(f"best: version {self.best['version']} mean return {self.best['mean']:.1f}"
                         + (f" (params in {self.run_dir / BEST_DIR})" if self.cfg.eval.keep_best else ""))
        return "; ".join(parts) or "no evaluation"

    def close(self) -> None:
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._checkpointer is not None:
            self._checkpointer.close()
            self._checkpointer = None


class InlineEval:
    """The single-process loops' evaluation: ``after_update(version, params)`` evaluates when due, ``finish``
    evaluates the last version (``eval.final``) and prints the summary. Inactive with ``eval.every_updates=0``."""

    def __init__(self, cfg: Experiment, algo: Any, wandb_log: Callable[[dict[str, float], int], None] | None = None):
        self.evaluator = Evaluator(cfg, algo)
        self.book = EvalBook(cfg, wandb_log)
        self.cfg = cfg

    @staticmethod
    def make(cfg: Experiment, algo: Any, wandb_log: Any = None) -> InlineEval | None:
        return InlineEval(cfg, algo, wandb_log) if cfg.eval.every_updates > 0 else None

    def after_update(self, version: int, params: Any, env_steps: int | None = None) -> None:
        if self.book.due(version):
            self.book.add(self.evaluator.evaluate(params, version), params, env_steps=env_steps)

    def finish(self, version: int, params: Any, env_steps: int | None = None, evaluate: bool = True) -> None:
        try:
            if not evaluate:
                return
            if self.cfg.eval.final and version > 0 and version not in self.book.evaluated:
                self.book.add(self.evaluator.evaluate(params, version), params, final=True, env_steps=env_steps)
            elif self.cfg.eval.final and version in self.book.evaluated:
                self.book.final = _last_record(self.book.run_dir / EVAL_FILE, version)
            print(f"[{self.cfg.name}/{self.cfg.trial}] {self.book.summary()}", flush=True)
        finally:
            self.book.close()


def _last_record(path: Path, version: int) -> dict[str, Any] | None:
    """The last ``eval.jsonl`` line of ``version`` (the final evaluation when it was also a periodic one)."""
    found = None
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("version") == version:
            found = record
    return found


def read_evals(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every ``eval.jsonl`` line of a run (for tests, reports and notebooks)."""
    path = Path(run_dir) / EVAL_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def summary_from_files(run_dir: str | Path) -> str | None:
    """The eval manager's summary for a launcher's last lines (last evaluation, best version), read from
    ``eval.jsonl``; None when the run has no evaluation."""
    lines = read_evals(run_dir)
    if not lines:
        return None
    last, best = lines[-1], max(lines, key=lambda x: x["mean"])
    return (f"evaluation: last version {last['version']} mean return {last['mean']:.1f} over {last['episodes']} "
            f"episodes; best version {best['version']} mean return {best['mean']:.1f}; "
            f"{len(lines)} evaluations in {Path(run_dir) / EVAL_FILE}")
