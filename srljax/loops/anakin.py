"""The Anakin loop: a JAX env (``envs/jax_envs``) stepped inside the compiled program, seeds in one program.

    python -m launch.local configs/gymnax_cartpole_ppo.py                  # one trial
    python -m launch.local configs/gymnax_cartpole_ppo.py seeds=[1,2,3]    # three trials, one vmapped program

``srljax.layout.plan_of`` picks this loop for a segment algorithm on a JAX env in ``layout.mode=single``. Each call
runs up to ``MAX_ITERATIONS`` iterations of rollout + update on the device (``srljax.learning.anakin``), as many as
fit before the next checkpoint, evaluation or the end (and about ``CALL_SECONDS`` of work, so lines and stops stay
prompt); the host then writes each iteration's metrics line, feeds the episode window, checkpoints. A checkpoint
holds the whole carry (every env's state and key, the acting key, the last row acted on), so ``--resume``
continues exactly where the run stopped.

``seeds=[...]``: each seed is its own trial ``<trial>-seed<s>`` (folder, config.json, metrics, checkpoints, as if it
ran alone with ``seed=s``), the trials' states stacked and the program ``vmap``-ed over them.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs import jax_envs
from srljax.config import Experiment
from srljax.config.experiment import seed_trials
from srljax.evaluation.evaluator import InlineEval
from srljax.learning.anakin import AnakinProgram
from srljax.learning.learner import Learner
from srljax.loops.result import TrainResult
from srljax.loops.signals import held
from srljax.prepare import Run, prepared
from srljax.telemetry.metrics import EpisodeWindow, MetricsLogger, UpdateRecords

MAX_ITERATIONS = 64
"""Iterations one compiled call may run (its output buffers' length)."""
CALL_SECONDS = 1.0
"""About how long one call should run: lines, checkpoints and stops wait for the call in flight."""


class _Trial:
    """One seed's learner (checkpoints), metrics and episode window."""

    def __init__(self, run: Run, spec: Any, resume: bool):
        self.cfg = run.cfg
        self.learner = Learner(run.cfg, spec)
        self.resume = resume
        self.window = EpisodeWindow(run.cfg.log.window)
        self.env_steps = 0
        self.meta: dict[str, Any] = {}
        self.logger: MetricsLogger | None = None
        self.records: UpdateRecords | None = None
        self.evals: InlineEval | None = None
        self.carry: Any = None

    def open(self) -> None:
        self.logger = MetricsLogger(self.cfg, total=self.cfg.total_env_steps,
                                    elapsed=float(self.meta.get("elapsed_s", 0.0)), wandb_id=self.meta.get("wandb_id"))
        self.records = UpdateRecords(env_steps=self.env_steps)
        self.evals = InlineEval.make(self.cfg, self.learner.algo, self.logger.wandb_log)
        self.learner.run_state = self.run_state

    def run_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        leaves = jax.device_get(jax.tree.leaves(self.carry))
        shell = {f"carry/{i}": np.asarray(x) for i, x in enumerate(leaves)}
        meta = {"env_steps": self.env_steps, "episodes": self.window.state(), "elapsed_s": round(self.logger.elapsed, 3),
                "wandb_id": self.logger.wandb_id}
        return shell, meta

    def restore(self, like: Any) -> None:
        like_shell = {f"carry/{i}": np.asarray(x) for i, x in enumerate(jax.device_get(jax.tree.leaves(like)))}
        shell, self.meta = self.learner.restore(like_shell)
        if not shell:
            raise RuntimeError(f"{self.cfg.run_dir}: its newest checkpoint holds no env state (not an Anakin run's?); "
                               "start a new trial")
        leaves = [jnp.asarray(shell[f"carry/{i}"]) for i in range(len(like_shell))]
        self.carry = jax.tree.unflatten(jax.tree.structure(like), leaves)
        self.env_steps = int(self.meta.get("env_steps", 0))
        self.window.load_state(self.meta.get("episodes", {}))


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _unstack(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda x: x[i], tree)


def _calls_until(version: int, every: int) -> int:
    return every - version % every if every > 0 else 1 << 30


def train_anakin(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Train a segment algorithm on a JAX env with rollout and update compiled together; ``resume``: continue."""
    run = prepared(cfg, resume)
    cfg, resume = run.cfg, run.resume
    runs = [run] if not cfg.seeds else [Run(c, run.plan, c.run_dir, resume) for c in seed_trials(cfg)]  # claimed
    env = jax_envs.make(cfg.env)
    trials = [_Trial(r, env.spec, resume) for r in runs]
    algo = trials[0].learner.algo
    program = AnakinProgram(env, algo, cfg.algo.num_steps, MAX_ITERATIONS)
    mesh = trials[0].learner.mesh
    start = jax.jit(program.start)
    for t in trials:
        root = jax.random.PRNGKey(t.cfg.seed)
        t.carry = start(t.learner.state, jax.random.fold_in(root, 2), jax.random.fold_in(root, 1))
        if resume:
            t.restore(t.carry)
    versions = {t.learner.version for t in trials}
    if len(versions) > 1:
        raise RuntimeError("the seeds' newest checkpoints are at different updates "
                           f"({', '.join(f'{t.cfg.trial}: {t.learner.version}' for t in trials)}); resume each "
                           "seed as its own trial (-f <trial>-seed<s> --resume without seeds)")
    for t in trials:
        t.open()
    version = versions.pop()
    steps_per_iteration = cfg.algo.num_steps * env.spec.num_envs
    with jax.set_mesh(mesh):
        step = jax.jit(jax.vmap(program.run, in_axes=(0, 0, None)), donate_argnums=(0, 1))
        state, carry = _stack([t.learner.state for t in trials]), _stack([t.carry for t in trials])
    result = TrainResult(config=cfg, env_steps=trials[0].env_steps)
    deadline = time.time() + cfg.timeout_seconds
    per_iteration = 0.0  # seconds, measured
    finished = False
    try:
        while version < cfg.num_updates:
            if time.time() > deadline:
                result.stopped_by = "timeout"
                break
            n = min(MAX_ITERATIONS, cfg.num_updates - version, _calls_until(version, cfg.checkpoint.every_updates),
                    _calls_until(version, cfg.eval.every_updates),
                    max(1, int(CALL_SECONDS / per_iteration)) if per_iteration else 1)
            with held():  # a stop waits for the call's lines and checkpoint (``srljax.loops.signals``)
                t0 = time.perf_counter()
                with jax.set_mesh(mesh):
                    state, carry, outputs = step(state, carry, jnp.int32(n))
                metrics, ep_return, ep_length = jax.device_get(outputs)
                took = time.perf_counter() - t0
                if version > trials[0].learner.version or n > 1:  # the first call compiles: not a measurement
                    per_iteration = took / n
                elif not per_iteration:
                    per_iteration = 0.0
                for i, t in enumerate(trials):
                    for k in range(n):
                        t.window.add(ep_return[i, k].ravel(), ep_length[i, k].ravel())
                        t.env_steps += steps_per_iteration
                        updates = version + k + 1
                        if updates % cfg.log.log_every == 0 or updates == cfg.num_updates:
                            record = t.records.record(updates, t.env_steps, t.window.summary(),
                                                      {name: v[i, k] for name, v in metrics.items()})
                            record["sps"] = n * steps_per_iteration / max(took, 1e-9)
                            t.logger.write(record)
                            if i == 0:
                                result.metrics.append(record)
                    t.learner.state = _unstack(state, i)
                    t.carry = _unstack(carry, i)
                    t.learner.version = version + n
                    t.learner.maybe_save(since=version)
                version += n
                result.env_steps = trials[0].env_steps
            for t in trials:
                if t.evals is not None:
                    t.evals.after_update(version, t.learner.policy_params(), t.env_steps)
        finished = True
    finally:
        for t in trials:
            t.learner.close()
            if t.evals is not None:
                t.evals.finish(version, t.learner.policy_params(), t.env_steps, evaluate=finished)
            t.logger.close()
    result.state = trials[0].learner.state
    return result
