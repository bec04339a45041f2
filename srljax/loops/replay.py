"""Single-process training for replay algorithms (DQN, SAC, TD3, R2D2): the notebook / one-GPU path.

    from srljax.config import load_file
    from srljax.loops.replay import train_replay
    result = train_replay(load_file("configs/cartpole_dqn.py"))
    result.metrics[-1]["episode_return"]

envpool batches -> ``Acting``'s jitted act (each row's exploration values, ``algo.exploration``, in its actor
state) -> ``Replay.add`` -> the updates the replay ratio owes (``Replay.sample`` -> ``Learner.step`` -> priorities
back, skipped for uniform replay). Update k is owed once ``replay_ratio * (env_steps - learning_starts)``
reaches ``k * batch_size`` samples (CleanRL's "train every ``batch_size / replay_ratio`` steps"); beta anneals
from ``algo.replay.beta0`` to 1. Records add ``time_sample``, the exploration values, ``beta``, ``replay_size``
and ``samples_per_insert`` (the ratio achieved). With ``checkpoint.replay=true`` checkpoints hold the replay
and ``--resume`` continues with it; without it, resuming a replay trial is refused.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np

import envs
from srljax.config import ConfigError, Experiment
from srljax.evaluation.evaluator import InlineEval
from srljax.learning.acting import Acting
from srljax.learning.learner import Learner
from srljax.loops.result import PHASES, TrainResult
from srljax.loops.signals import held
from srljax.prepare import Run, prepared
from srljax.replay.buffer import Replay, SampleKeys, config_replay, extras_bytes, memory_problem, replay_extras
from srljax.storage.steps import read_meta
from srljax.telemetry.metrics import EpisodeWindow, MetricsLogger, UpdateRecords
from srljax.types import EnvSpec

REPLAY_PHASES = (*PHASES, "time_sample")


def make_replay(cfg: Experiment, spec: EnvSpec) -> Replay:
    """The replay ``cfg.algo.replay`` describes, one stream per env of ``spec``; raises ``ConfigError`` if it
    does not fit in memory (checked with the env's real observation shape, before the run folder is claimed)."""
    r = cfg.algo.replay
    sizes = (r.capacity, spec.num_envs, spec.obs_shape, spec.obs_dtype, spec.action_shape, spec.action_dtype)
    if problem := memory_problem(*sizes, dedup_frames=r.dedup_frames, extra_row_bytes=extras_bytes(replay_extras(cfg.algo, spec))):
        raise ConfigError([problem])
    return config_replay(cfg, spec, r.capacity, spec.num_envs, check_memory=False)


def train_replay(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Train a replay algorithm (``srljax.config.algo.consumes(cfg.algo) == "replay"``) in this process."""
    run = prepared(cfg, resume)  # checked (a replay's memory too), folder claimed, config.json written
    cfg, resume = run.cfg, run.resume
    env = envs.make(cfg.env, seed=cfg.seed)
    try:
        replay = make_replay(cfg, env.spec)
    except ConfigError:
        env.close()
        raise
    learner = Learner(cfg, env.spec)
    if learner.algo.consumes != "replay":
        raise TypeError(f"{type(cfg.algo).__name__} declares consumes='replay' but its algorithm's update consumes "
                        f"{learner.algo.consumes!r}")
    meta: dict[str, Any] = {}
    if resume:
        meta = _restore(cfg, learner, replay)
    loop = _ReplayLoop(cfg, env, learner, replay, meta)
    finished = False
    try:
        loop.run()
        finished = True
    finally:
        env.close()
        learner.close()
        if loop.evals is not None:  # the final evaluation only after a run that did not fail
            loop.evals.finish(learner.version, learner.policy_params(), loop.env_steps, evaluate=finished)
        loop.logger.close()
    loop.result.state = learner.state
    return loop.result


def _restore(cfg: Experiment, learner: Learner, replay: Replay) -> dict[str, Any]:
    """Restore the newest checkpoint: train state, the replay's contents (``checkpoint.replay``), counters."""
    found = read_meta(cfg.run_dir / "checkpoints")
    filled = int((found[1] if found else {}).get("replay_filled", 0))
    like = {f"replay/{k}": v for k, v in replay.state_like(filled).items()}
    shell, meta = learner.restore(like)
    if shell:
        replay.load_state({k.removeprefix("replay/"): np.asarray(v) for k, v in shell.items() if k.startswith("replay/")})
        replay.cut_streams(np.arange(replay.num_streams))  # the envs are new: their episodes in progress ended
    print(f"[{cfg.name}/{cfg.trial}] resumed from the checkpoint of update {learner.version} "
          f"({int(meta.get('env_steps', 0)):,} env steps; {replay.size:,} replay transitions restored)", flush=True)
    return meta


class _ReplayLoop:
    """The loop's state: acting, replay, counters, episode window, metrics."""

    def __init__(self, cfg: Experiment, env: envs.VecEnv, learner: Learner, replay: Replay,
                 meta: dict[str, Any] | None = None):
        self.cfg, self.env, self.learner, self.replay = cfg, env, learner, replay
        self.algo = cfg.algo
        self.acting = Acting(learner.algo, env.spec.num_envs, jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1))
        self.rng = np.random.default_rng(cfg.seed)  # replay sampling
        self.episodes = EpisodeWindow(cfg.log.window)
        meta = meta or {}
        self.logger = MetricsLogger(cfg, total=cfg.total_env_steps, elapsed=float(meta.get("elapsed_s", 0.0)),
                                    wandb_id=meta.get("wandb_id"))
        self.evals = InlineEval.make(cfg, learner.algo, self.logger.wandb_log)  # eval.every_updates > 0
        self.env_steps = int(meta.get("env_steps", 0))
        self.episodes.load_state(meta.get("episodes", {}))
        if "rng" in meta:
            self.rng.bit_generator.state = meta["rng"]
        self.records = UpdateRecords(env_steps=self.env_steps)
        self.result = TrainResult(config=cfg, env_steps=self.env_steps)
        self.phases = dict.fromkeys(REPLAY_PHASES, 0.0)
        self.exploration = learner.algo.exploration  # e.g. DQN's {"epsilon": ...} (algos/base.py)
        self.explore = self.exploration(self.env_steps, None, 1)
        self.stored = list(replay_extras(cfg.algo, self.env.spec))  # act's extras kept with each row (R2D2: the carry)
        self.beta = self.algo.replay.beta0
        learner.run_state = self._run_state

    def _run_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """This loop's part of a checkpoint: the replay's contents with ``checkpoint.replay`` (the same orbax
        step as the train state, so both are written or neither), counters, the sampling generator."""
        shell = {f"replay/{k}": v for k, v in self.replay.state().items()} if self.cfg.checkpoint.replay else {}
        return shell, {"env_steps": self.env_steps, "episodes": self.episodes.state(), "rng": self.rng.bit_generator.state,
                       "replay_filled": self.replay.filled_rows() if shell else 0,
                       "wandb_id": self.logger.wandb_id, "elapsed_s": round(self.logger.elapsed, 3)}

    def run(self) -> None:
        cfg, a = self.cfg, self.algo
        deadline = time.time() + cfg.timeout_seconds
        params = self.learner.policy_params()
        metrics: dict[str, Any] = {}
        self.env.async_reset()
        while self.env_steps < cfg.total_env_steps:
            if time.time() > deadline:
                self.result.stopped_by = "timeout"
                break
            for _ in range(a.num_steps):
                self._step(params)
            owed = min(int(a.replay_ratio * max(0, self.env_steps - a.learning_starts)) // a.batch_size,
                       cfg.num_updates)
            trained = False
            chunk = a.updates_per_call
            while self.learner.version + chunk <= owed and self.replay.size:
                with held():  # a stop waits for the updates' lines and checkpoint (``srljax.loops.signals``)
                    before = self.learner.version
                    metrics = self._update(chunk)
                    trained = True
                    if self.learner.version // cfg.log.log_every > before // cfg.log.log_every:
                        self._log(metrics, before)
                    self.learner.maybe_save(since=before)
            if trained:
                t0 = time.perf_counter()
                params = jax.block_until_ready(self.learner.policy_params())
                self.phases["time_update"] += time.perf_counter() - t0
                if self.evals is not None:
                    self.evals.after_update(self.learner.version, params, self.env_steps)
        if self.learner.version % cfg.log.log_every or not self.result.metrics:
            self._log(metrics, self.learner.version - 1, last_only=True)
        self.result.env_steps = self.env_steps

    def _step(self, params: Any) -> None:
        """One recv: act with this step's exploration values, send, store the rows."""
        clock = time.perf_counter
        t0 = clock()
        ts = self.env.recv()
        t1 = clock()
        self.explore = self.exploration(self.env_steps, None, 1)
        stored = None
        if self.stored:  # a recurrent policy: Acting keeps each env's carry (and resets it where episodes start)
            for k, v in self.explore.items():
                self.acting.actor_state[k][:] = v
            action, extras = self.acting.act(params, ts)
            stored = {k: extras[k] for k in self.stored}
        else:
            # Every row has this step's values, so the per-env actor state Acting.act would gather and store
            # back (~0.2 ms a call on this CPU, as long as CartPole's whole act) is built here instead.
            state = {k: np.full(len(ts.env_id), v, np.float32) for k, v in self.explore.items()}
            action, _, _, self.acting.key = self.acting.jitted(params, ts.obs, state, None, self.acting.key)
            action = np.asarray(action)
        t2 = clock()
        self.env.send(action, ts.env_id)
        t3 = clock()
        self.replay.add(ts.obs, action, ts.reward, ts.terminated, ts.truncated, ts.env_id, extras=stored)
        self.episodes.add(ts.episode_return, ts.episode_length)
        self.env_steps += len(ts.env_id)
        self.phases["time_env"] += (t1 - t0) + (t3 - t2)
        self.phases["time_act"] += t2 - t1
        self.phases["time_store"] += clock() - t3

    def _update(self, k: int = 1) -> dict[str, Any]:
        """Sample, update, route the priorities back (prioritized replay only). ``k`` > 1
        (``algo.updates_per_call``): k batches sampled at once and trained in one compiled call; the metrics
        come back stacked ``[k]``."""
        r, clock = self.algo.replay, time.perf_counter
        self.beta = r.beta0 + (1.0 - r.beta0) * min(1.0, self.env_steps / self.cfg.total_env_steps)
        t0 = clock()
        batch, keys = self.replay.sample(self.algo.batch_size, self.beta, self.rng, batches=0 if k == 1 else k)
        t1 = clock()
        metrics, per_sample = self.learner.step(batch) if k == 1 else self.learner.steps(batch)
        t2 = clock()
        if self.replay.alpha > 0:
            flat = SampleKeys(keys.slot.reshape(-1), keys.written.reshape(-1))
            self.replay.update_priorities(flat, np.asarray(per_sample["priority"]).reshape(-1))
        self.phases["time_sample"] += (t1 - t0) + (clock() - t2)
        self.phases["time_update"] += t2 - t1
        return metrics

    def _log(self, metrics: dict[str, Any], before: int, last_only: bool = False) -> None:
        """A line for each update after version ``before`` up to now that ``log.log_every`` makes due (the
        last only with ``last_only``); ``metrics`` is one update's, or ``[k]`` stacked by ``_update(k)``."""
        a, now = self.algo, self.learner.version
        metrics = jax.device_get(metrics)
        stacked = np.ndim(next(iter(metrics.values()), 0)) > 0
        due = [now] if last_only else [v for v in range(before + 1, now + 1) if v % self.cfg.log.log_every == 0]
        inserted = max(self.env_steps - a.learning_starts, 1)
        for v in due:
            one = {k: x[v - now - 1] for k, x in metrics.items()} if stacked else metrics
            record = self.records.record(
                v, self.env_steps, self.episodes.summary(), one,
                **self.explore, beta=self.beta, replay_size=self.replay.size,
                samples_per_insert=v * a.batch_size / inserted, **self.phases)
            self.phases = dict.fromkeys(REPLAY_PHASES, 0.0)
            self.logger.write(record)
            self.result.metrics.append(record)
        self.result.env_steps = self.env_steps
