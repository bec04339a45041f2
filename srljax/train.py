"""Single-process training: the notebook / one-GPU path.

    from srljax import train
    from srljax.config import Experiment
    result = train(Experiment(total_env_steps=100_000))
    result.metrics[-1]["episode_return"]

envpool batches (async when ``env.batch_size < env.num_envs``) -> jitted ``act`` ->
``SegmentBuilder`` -> jitted ``update``. The distributed workers run the same ``act``/``update``.

Each metrics record carries where the loop's wall time went since the previous record:
``time_env`` (waiting in ``recv`` plus ``send``), ``time_act`` (the jitted ``act`` up to its
action on the host), ``time_update`` (``update`` until the new params are ready) and
``time_store`` (rollout storage and episode stats), in seconds. With async envpool the envs step
while the loop acts and updates, so ``time_env`` is only the part not hidden behind them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jax

import envs
from srljax.config import Experiment, validate, write_json
from srljax.learner import Learner
from srljax.metrics import EpisodeWindow, MetricsLogger
from srljax.rollout import SegmentBuilder
from srljax.system.common import jit_act

PHASES = ("time_env", "time_act", "time_update", "time_store")


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


def train(cfg: Experiment) -> TrainResult:
    validate(cfg)
    run_dir = cfg.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json(cfg, run_dir / "config.json")

    env = envs.make(cfg.env, seed=cfg.seed)
    learner = Learner(cfg, env.spec)
    algo = learner.algo
    key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 1)
    act = jit_act(algo)

    builder = SegmentBuilder(env.spec, cfg.algo.num_steps, algo.extras_spec)
    episodes = EpisodeWindow(cfg.log.window)
    logger = MetricsLogger(cfg, total=cfg.total_env_steps)
    result = TrainResult(config=cfg)

    params = learner.policy_params()
    actor_state = algo.initial_actor_state(env.spec.num_envs)
    env_steps = 0
    start = last_log_time = time.time()
    last_log_steps = 0
    phases = dict.fromkeys(PHASES, 0.0)
    clock = time.perf_counter
    env.async_reset()
    try:
        while learner.version < cfg.num_updates:
            if time.time() - start > cfg.timeout_seconds:
                result.stopped_by = "timeout"
                break
            t0 = clock()
            ts = env.recv()
            t1 = clock()
            ids = ts.env_id
            rows_state = jax.tree.map(lambda x: x[ids], actor_state)
            action, extras, rows_state, key = act(params, ts.obs, rows_state, key)
            action, extras = jax.device_get((action, extras))
            t2 = clock()
            env.send(action, ids)
            t3 = clock()
            actor_state = jax.tree.map(lambda x, y: x.at[ids].set(y), actor_state, rows_state)
            builder.add(ts, action, extras, learner.version)
            episodes.add(ts.episode_return, ts.episode_length)
            env_steps += len(ids)
            ready = builder.ready(cfg.batch_envs)
            t4 = clock()
            phases["time_env"] += (t1 - t0) + (t3 - t2)
            phases["time_act"] += t2 - t1
            phases["time_store"] += t4 - t3
            if not ready:
                continue
            batch = builder.pop(cfg.batch_envs)
            t5 = clock()
            phases["time_store"] += t5 - t4
            train_metrics = learner.step(batch)
            params = jax.block_until_ready(learner.policy_params())
            phases["time_update"] += clock() - t5
            updates = learner.version
            if updates % cfg.log.log_every == 0 or updates == cfg.num_updates:
                now = time.time()
                record = {
                    "update": updates,
                    "env_steps": env_steps,
                    "sps": (env_steps - last_log_steps) / max(now - last_log_time, 1e-9),
                    **episodes.summary(),
                    **{k: float(v) for k, v in jax.device_get(train_metrics).items()},
                    **phases,
                }
                phases = dict.fromkeys(PHASES, 0.0)
                last_log_time, last_log_steps = now, env_steps
                logger.write(record)
                result.metrics.append(record)
    finally:
        env.close()
        learner.close()
        logger.close()
    result.state = learner.state
    result.env_steps = env_steps
    return result
