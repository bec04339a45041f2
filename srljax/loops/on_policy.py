"""The single-process on-policy loop (PPO, IMPALA, MAPPO, a user's segment algorithm): the notebook / one-GPU path.

    from srljax import train           # srljax/loops/train.py hands segment algorithms here
    from srljax.config import Experiment
    result = train(Experiment(total_env_steps=100_000))
    result.metrics[-1]["episode_return"]

envpool batches -> jitted ``act`` -> ``SegmentBuilder`` -> jitted ``update``, the same ``act``/``update`` as the
distributed workers. By default collection and update alternate (strictly on-policy, as CleanRL); with
``trainer.overlap_collection`` a collector thread gathers batch k+1 during update k with params one update
older (deterministic per seed, as Cleanba), which pays when the update leaves cores idle (``bench/RESULTS.md``,
"How Pong got past the sum of its parts"). Each record carries where the wall time went (``time_env``,
``time_act``, ``time_update``, ``time_store``). Every checkpoint holds the whole run; ``train(cfg,
resume=True)`` continues it, each env's episode in progress cut as by a time limit
(``SegmentBuilder.cut_episodes``). ``docs/architecture.md``, "Run state and resume".
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jax

import envs
from srljax.config import Experiment
from srljax.evaluation.evaluator import InlineEval
from srljax.learning.acting import Acting
from srljax.learning.learner import Learner
from srljax.learning.policies import restore_policies
from srljax.learning.rollout import SegmentBuilder
from srljax.loops.result import COLLECT_PHASES, PHASES, TrainResult
from srljax.loops.signals import held
from srljax.prepare import Run, prepared
from srljax.telemetry.metrics import EpisodeWindow, MetricsLogger, UpdateRecords
from srljax.types import Trajectory


@dataclass
class Batch:
    """One training batch and what the collector saw up to its last row."""

    traj: Trajectory
    env_steps: int
    episodes: dict[str, float]
    phases: dict[str, float]
    window: dict[str, Any] = field(default_factory=dict)  # the episode window's contents (a checkpoint's)


class Collector:
    """Steps the env with given params until a training batch is ready; owns env, key and storage."""

    def __init__(self, cfg: Experiment, env: envs.VecEnv, algo: Any):
        self.cfg, self.env, self.algo = cfg, env, algo
        self.acting = Acting(algo, env.spec.num_envs, jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1))
        self.builder = SegmentBuilder(env.spec, cfg.algo.num_steps, algo.extras_spec, algo.return_gamma)
        self.episodes = EpisodeWindow(cfg.log.window)
        self.env_steps = 0
        self.started = False

    def state(self) -> dict[str, Any]:
        """Acting's and the builder's arrays, for the run's checkpoint (see the module docstring)."""
        return {**{f"acting/{k}": v for k, v in self.acting.state().items()},
                **{f"builder/{k}": v for k, v in self.builder.state().items()}}

    def load_state(self, shell: dict[str, Any] | None, meta: dict[str, Any]) -> None:
        """Continue from a checkpoint: counters and episode window always; acting and builder arrays
        when ``shell`` holds them (else a fresh act key folded from the checkpoint's update)."""
        self.env_steps = int(meta.get("env_steps", 0))
        self.episodes.load_state(meta.get("episodes", {}))
        if shell:
            self.acting.load_state({k.removeprefix("acting/"): v for k, v in shell.items() if k.startswith("acting/")})
            self.builder.load_state({k.removeprefix("builder/"): v for k, v in shell.items()
                                     if k.startswith("builder/")})
        else:
            self.acting.key = jax.random.fold_in(self.acting.key, int(meta.get("version", 0)))
        self.builder.cut_episodes()  # the envs are new: episodes in progress end here
        self.acting.first[:] = True

    def collect(self, params: Any, version: int, deadline: float, stop: threading.Event | None = None) -> Batch | None:
        """The next batch acted with ``params`` (tagged ``version``); None past ``deadline`` or on ``stop``."""
        if not self.started:
            self.env.async_reset()
            self.started = True
        phases = dict.fromkeys(COLLECT_PHASES, 0.0)
        clock = time.perf_counter
        while not self.builder.ready(self.cfg.batch_envs):
            if time.time() > deadline or (stop is not None and stop.is_set()):
                return None
            t0 = clock()
            ts = self.env.recv()
            t1 = clock()
            ids = ts.env_id
            action, extras = self.acting.act(params, ts)
            t2 = clock()
            self.env.send(action, ids)
            t3 = clock()
            self.builder.add(ts, action, extras, version)
            self.episodes.add(ts.episode_return, ts.episode_length)
            self.env_steps += len(ids)
            phases["time_env"] += (t1 - t0) + (t3 - t2)
            phases["time_act"] += t2 - t1
            phases["time_store"] += clock() - t3
        t4 = clock()
        traj = self.builder.pop(self.cfg.batch_envs)
        phases["time_store"] += clock() - t4
        return Batch(traj, self.env_steps, self.episodes.summary(), phases, self.episodes.state())


class _LaggedCollection:
    """A collector thread one update behind the learner: batch k is acted with params version k-1."""

    def __init__(self, collector: Collector, params: Any, num_batches: int, deadline: float, first_version: int = 0):
        self._collector, self._num_batches, self._deadline = collector, num_batches, deadline
        self._first = first_version  # the params version of ``params`` (a resumed run's checkpoint)
        self._params: dict[int, Any] = {first_version: params}
        self._cond = threading.Condition()
        self._batches: queue.Queue[Batch] = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="srljax-collector", daemon=True)
        self._thread.start()

    def publish(self, version: int, params: Any) -> None:
        with self._cond:
            self._params[version] = params
            self._params.pop(version - 2, None)
            self._cond.notify_all()

    def next(self) -> Batch | None:
        """The next batch; None when the collector stopped (deadline); re-raises its error."""
        while True:
            try:
                return self._batches.get(timeout=0.5)
            except queue.Empty:
                if not self._thread.is_alive():
                    if self._error is not None:
                        raise RuntimeError("the collector thread failed") from self._error
                    return None

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join()  # a put into the full queue gives up within 0.5 s once stopped

    def _params_for(self, version: int) -> Any | None:
        with self._cond:
            self._cond.wait_for(lambda: version in self._params or self._stop.is_set())
            return self._params.get(version)

    def _run(self) -> None:
        try:
            for k in range(self._num_batches):
                version = self._first + max(k - 1, 0)
                params = self._params_for(version)
                batch = None if params is None else self._collector.collect(params, version, self._deadline, self._stop)
                if batch is None:
                    break
                while not self._stop.is_set():
                    try:
                        self._batches.put(batch, timeout=0.5)
                        break
                    except queue.Full:
                        pass
        except BaseException as error:  # handed to the learner thread by next()
            self._error = error


def train_on_policy(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Train a segment algorithm (PPO, IMPALA, MAPPO, a user's) in this process; ``resume``: continue its trial
    from the newest checkpoint."""
    run = prepared(cfg, resume)  # checked, folder claimed, config.json written (srljax/prepare.py)
    cfg, resume = run.cfg, run.resume

    env = envs.make(cfg.env, seed=cfg.seed)
    learner = Learner(cfg, env.spec)
    collector = Collector(cfg, env, learner.algo)
    overlap = cfg.trainer.overlap_collection
    meta: dict[str, Any] = {}
    if resume:
        shell, meta = learner.restore(None if overlap else collector.state())
        collector.load_state(shell, meta)
    elif run.plan.policies:  # several policies: each one's ``load`` checkpoint into its part of the state
        restore_policies(learner, cfg, env.spec)
    selfplay = None
    if run.plan.selfplay:  # the env's opponent: snapshots of this learner (srljax/selfplay/opponents.py)
        from srljax.selfplay.opponents import SelfPlay

        selfplay = SelfPlay(cfg, env, learner.algo, learner.policy_params(), resume=resume)
    logger = MetricsLogger(cfg, total=cfg.total_env_steps, elapsed=float(meta.get("elapsed_s", 0.0)),
                           wandb_id=meta.get("wandb_id"))
    result = TrainResult(config=cfg, env_steps=collector.env_steps)
    counted = {"env_steps": collector.env_steps, "episodes": collector.episodes.state()}  # as of the last update

    def run_state() -> tuple[dict[str, Any], dict[str, Any]]:
        shell = {} if overlap else collector.state()
        now = counted if overlap else {"env_steps": collector.env_steps, "episodes": collector.episodes.state()}
        return shell, {**now, "wandb_id": logger.wandb_id, "elapsed_s": round(logger.elapsed, 3)}

    learner.run_state = run_state
    deadline = time.time() + cfg.timeout_seconds
    records = UpdateRecords(env_steps=collector.env_steps)
    phases = dict.fromkeys(PHASES, 0.0)
    params = learner.policy_params()
    evals = InlineEval.make(cfg, learner.algo, logger.wandb_log)  # eval.every_updates > 0: fixed-seed episodes
    lagged = None
    finished = False
    if overlap:
        lagged = _LaggedCollection(collector, params, cfg.num_updates - learner.version, deadline, learner.version)
    try:
        while learner.version < cfg.num_updates:
            if lagged is not None:
                batch = lagged.next()
            else:
                batch = collector.collect(params, learner.version, deadline)
            if batch is None:
                result.stopped_by = "timeout"
                break
            if overlap:
                counted.update(env_steps=batch.env_steps, episodes=batch.window)
            with held():  # a stop waits for the update's line and checkpoint (``srljax.loops.signals``)
                t0 = time.perf_counter()
                train_metrics = learner.step(batch.traj)
                params = jax.block_until_ready(learner.policy_params())
                if lagged is not None:
                    lagged.publish(learner.version, params)
                for k, v in batch.phases.items():
                    phases[k] += v
                phases["time_update"] += time.perf_counter() - t0
                result.env_steps = batch.env_steps
                updates = learner.version
                extra = selfplay.after_update(updates, params, batch.env_steps) if selfplay is not None else {}
                if updates % cfg.log.log_every == 0 or updates == cfg.num_updates:
                    record = records.record(updates, batch.env_steps, batch.episodes,
                                            {**jax.device_get(train_metrics), **extra}, **phases)
                    phases = dict.fromkeys(PHASES, 0.0)
                    logger.write(record)
                    result.metrics.append(record)
                learner.maybe_save()
            if evals is not None:
                evals.after_update(learner.version, params, batch.env_steps)
        finished = True
    finally:
        if lagged is not None:
            lagged.close()
        env.close()
        learner.close()
        if evals is not None:  # the final evaluation only after a run that did not fail
            evals.finish(learner.version, params, result.env_steps, evaluate=finished)
        if selfplay is not None:
            selfplay.finish(learner.version, params, result.env_steps, evaluate=finished)
        logger.close()
    result.state = learner.state
    return result
