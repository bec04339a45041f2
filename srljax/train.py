"""Single-process training: the notebook / one-GPU path.

    from srljax import train
    from srljax.config import Experiment
    result = train(Experiment(total_env_steps=100_000))
    result.metrics[-1]["episode_return"]

envpool batches (async when ``env.batch_size < env.num_envs``) -> jitted ``act`` ->
``SegmentBuilder`` -> jitted ``update``. The distributed workers run the same ``act``/``update``.

By default collection and update alternate: batch k is collected with the params of update k,
strictly on-policy as CleanRL. With ``trainer.overlap_collection`` a collector thread gathers
batch k+1 while the learner updates on batch k, with the params one update older (batch k
always uses the params of update k-1, so runs stay deterministic for a seed, as Cleanba's actor
does). That pays when the update leaves the CPU or accelerator part idle, e.g. an Atari CNN
update on a CPU keeps ~1.3 of 2 cores busy.

Each metrics record carries where the wall time went since the previous record:
``time_env`` (waiting in ``recv`` plus ``send``), ``time_act`` (the jitted ``act`` up to its
action on the host), ``time_update`` (``update`` until the new params are ready) and
``time_store`` (rollout storage and episode stats), in seconds. With async envpool the envs step
while the loop acts and updates, so ``time_env`` is only the part not hidden behind them; with
overlapped collection the phases run at once and may add up to more than the wall time.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jax

import envs
from srljax.acting import Acting
from srljax.config import Experiment, write_json
from srljax.layout import validate
from srljax.learner import Learner
from srljax.metrics import EpisodeWindow, MetricsLogger, UpdateRecords
from srljax.rollout import SegmentBuilder
from srljax.run_dir import claim
from srljax.types import Trajectory

PHASES = ("time_env", "time_act", "time_update", "time_store")
COLLECT_PHASES = ("time_env", "time_act", "time_store")


@dataclass
class TrainResult:
    """What ``train`` hands back to a notebook."""

    config: Experiment
    metrics: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    env_steps: int = 0
    stopped_by: str = "done"  # "done" | "timeout"

    @property
    def run_dir(self):
        return self.config.run_dir


@dataclass
class Batch:
    """One training batch and what the collector saw up to its last row."""

    traj: Trajectory
    env_steps: int
    episodes: dict[str, float]
    phases: dict[str, float]


class Collector:
    """Steps the env with given params until a training batch is ready; owns env, key and storage."""

    def __init__(self, cfg: Experiment, env: envs.VecEnv, algo: Any):
        self.cfg, self.env, self.algo = cfg, env, algo
        self.acting = Acting(algo, env.spec.num_envs, jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1))
        self.builder = SegmentBuilder(env.spec, cfg.algo.num_steps, algo.extras_spec)
        self.episodes = EpisodeWindow(cfg.log.window)
        self.env_steps = 0
        self.started = False

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
        return Batch(traj, self.env_steps, self.episodes.summary(), phases)


class _LaggedCollection:
    """A collector thread one update behind the learner: batch k is acted with params version k-1."""

    def __init__(self, collector: Collector, params: Any, num_batches: int, deadline: float):
        self._collector, self._num_batches, self._deadline = collector, num_batches, deadline
        self._params: dict[int, Any] = {0: params}
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
                version = max(k - 1, 0)
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


def train(cfg: Experiment) -> TrainResult:
    validate(cfg)
    run_dir = claim(cfg)  # refuses a run folder an earlier run left files in
    write_json(cfg, run_dir / "config.json")

    env = envs.make(cfg.env, seed=cfg.seed)
    learner = Learner(cfg, env.spec)
    collector = Collector(cfg, env, learner.algo)
    logger = MetricsLogger(cfg, total=cfg.total_env_steps)
    result = TrainResult(config=cfg)

    deadline = time.time() + cfg.timeout_seconds
    records = UpdateRecords()
    phases = dict.fromkeys(PHASES, 0.0)
    params = learner.policy_params()
    lagged = _LaggedCollection(collector, params, cfg.num_updates, deadline) if cfg.trainer.overlap_collection else None
    try:
        while learner.version < cfg.num_updates:
            if lagged is not None:
                batch = lagged.next()
            else:
                batch = collector.collect(params, learner.version, deadline)
            if batch is None:
                result.stopped_by = "timeout"
                break
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
            if updates % cfg.log.log_every == 0 or updates == cfg.num_updates:
                record = records.record(updates, batch.env_steps, batch.episodes, jax.device_get(train_metrics),
                                        **phases)
                phases = dict.fromkeys(PHASES, 0.0)
                logger.write(record)
                result.metrics.append(record)
    finally:
        if lagged is not None:
            lagged.close()
        env.close()
        learner.close()
        logger.close()
    result.state = learner.state
    return result
