"""The Anakin loop: a JAX env (``envs/jax_envs``) stepped inside the compiled program, seeds in one program.

    python -m launch.local configs/gymnax_cartpole_ppo.py                  # one trial
    python -m launch.local configs/gymnax_cartpole_ppo.py seeds=[1,2,3]    # three trials, one vmapped program

``srljax.layout.plan_of`` picks this loop for an algorithm on a JAX env in ``layout.mode=single``: a segment
algorithm (PPO, IMPALA, LSTM policies, a user's) runs ``srljax.learning.anakin``'s program (collect ``T`` rows,
one update), a replay algorithm (DQN) ``srljax.learning.anakin_replay``'s (act, append to the on-device replay, the
updates the replay ratio owes), a search algorithm (AlphaZero) ``srljax.learning.anakin_search``'s (every move
searched with the env as the model, one update on the searched rows; evaluated against OpenSpiel's bots,
``srljax.selfplay.search_bots``), MuZero ``srljax.learning.anakin_muzero``'s (searched over its learned model, a
trajectory replay on the device, unrolled windows), value decomposition (QMIX, VDN) ``srljax.learning.anakin_qmix``'s
(recurrent epsilon-greedy acting, a replay of sequences on the device, the gradient steps). Each call runs up to ``MAX_ITERATIONS`` iterations on the device, as many as fit
before the next checkpoint, evaluation or the end, and about ``CALL_SECONDS`` of work (lines and stops stay
prompt); the host then writes each update's metrics line, feeds the episode window, checkpoints. A checkpoint
holds the whole carry (every env's state and key, the acting key, the last row, a replay's contents), so
``--resume`` continues exactly where the run stopped.

``seeds=[...]``: each seed is its own trial ``<trial>__seed=<s>`` (folder, config.json, metrics, checkpoints, as if it
ran alone with ``seed=s``), the trials' states stacked and the program mapped over them: one after another inside
the program by default (each seed bit for bit as run alone), ``seeds_batch`` at a time ``vmap``-ed.
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from algos.muzero import MuZeroAlgorithm
from algos.qmix import QMixAlgorithm
from envs import jax_envs
from srljax.config import Experiment
from srljax.config.experiment import seed_trials
from srljax.evaluation.evaluator import InlineEval
from srljax.learning.anakin import AnakinProgram
from srljax.learning.anakin_muzero import MuZeroProgram
from srljax.learning.anakin_qmix import SequenceProgram
from srljax.learning.anakin_replay import AnakinReplayProgram
from srljax.learning.anakin_search import SearchProgram
from srljax.learning.learner import Learner
from srljax.loops.result import TrainResult
from srljax.loops.signals import held
from srljax.parallel import sharding
from srljax.prepare import Run, prepared
from srljax.selfplay.search_bots import SearchBotEval
from srljax.telemetry.metrics import EpisodeWindow, MetricsLogger, UpdateRecords

MAX_ITERATIONS = 64
"""Iterations one compiled call may run (its output buffers' length)."""
CALL_SECONDS = 1.0
"""About how long one call should run: lines, checkpoints and stops wait for the call in flight."""


class _Schedule:
    """What each iteration does, decided on the host as the envpool loops decide it: rows per env, updates owed,
    exploration values (a replay algorithm's)."""

    def __init__(self, cfg: Experiment, algo: Any, num_envs: int):
        self.cfg, self.algo, self.replay = cfg, algo, algo.consumes == "replay"
        a = cfg.algo
        if self.replay:  # ``updates_per_call`` updates' worth of rows per iteration, as ``srljax.loops.replay``
            self.rows = max(1, round(a.updates_per_call * a.batch_size / (a.replay_ratio * num_envs)))
            self.updates = math.ceil(self.rows * num_envs * a.replay_ratio / a.batch_size) + 1
            self.iterations = math.ceil(cfg.total_env_steps / (self.rows * num_envs))
        else:
            self.rows, self.updates, self.iterations = a.num_steps, 1, cfg.num_updates
        self.env_steps_per_iteration = self.rows * num_envs

    def updates_owed(self, env_steps: int, version: int) -> int:
        """Updates the iteration that ends at ``env_steps`` runs, after ``version`` so far."""
        if not self.replay:
            return 1
        a = self.cfg.algo
        owed = min(int(a.replay_ratio * max(0, env_steps - a.learning_starts)) // a.batch_size, self.cfg.num_updates)
        return max(0, min(owed - version, self.updates))

    def explore(self, env_steps: int) -> dict[str, float]:
        return self.algo.exploration(env_steps, None, 1) if self.replay else {}


class _Trial:
    """One seed's learner (checkpoints), metrics and episode window."""

    def __init__(self, run: Run, env: jax_envs.JaxEnv):
        self.cfg, self.env = run.cfg, env
        self.learner = Learner(run.cfg, env.spec)
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
        algo = self.learner.algo
        bots = algo.consumes == "search" and self.env.spec.players > 1  # a single-player search agent: ``eval``
        self.evals = (SearchBotEval.make(self.cfg, algo, self.env) if bots
                      else InlineEval.make(self.cfg, algo, self.logger.wandb_log))
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
        print(f"[{self.cfg.name}/{self.cfg.trial}] resumed from the checkpoint of update {self.learner.version} "
              f"({self.env_steps:,} env steps, every env's state with it)", flush=True)


def _stack(trees: list[Any]) -> Any:
    return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def _unstack(tree: Any, i: int) -> Any:
    return jax.tree.map(lambda x: x[i], tree)


def _crosses(before: int, after: int, every: int) -> bool:
    return every > 0 and after // every > before // every


def _program(cfg: Experiment, env: jax_envs.JaxEnv, algo: Any, schedule: _Schedule) -> Any:
    if schedule.replay:
        a = cfg.algo
        return AnakinReplayProgram(env, algo, rows=schedule.rows, updates=schedule.updates, batch_size=a.batch_size,
                                   n_step=a.n_step, capacity=a.replay.capacity, max_iterations=MAX_ITERATIONS)
    if isinstance(algo, QMixAlgorithm):
        return SequenceProgram(env, algo, cfg.algo.num_steps, MAX_ITERATIONS, capacity=cfg.algo.replay_capacity)
    if isinstance(algo, MuZeroAlgorithm):
        return MuZeroProgram(env, algo, cfg.algo.num_steps, MAX_ITERATIONS, capacity=cfg.algo.replay_capacity)
    if algo.consumes == "search":
        return SearchProgram(env, algo, cfg.algo.num_steps, MAX_ITERATIONS)
    return AnakinProgram(env, algo, cfg.algo.num_steps, MAX_ITERATIONS)


def train_anakin(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Train on a JAX env with acting, (replay) and update compiled together; ``resume``: continue its trial(s)."""
    run = prepared(cfg, resume)
    cfg, resume = run.cfg, run.resume
    runs = [run] if not cfg.seeds else [Run(c, run.plan, c.run_dir, resume) for c in seed_trials(cfg)]  # claimed
    env = jax_envs.make(cfg.env)
    trials = [_Trial(r, env) for r in runs]
    algo = trials[0].learner.algo
    schedule = _Schedule(cfg, algo, env.spec.num_envs)
    program = _program(cfg, env, algo, schedule)
    start = jax.jit(program.start)
    for t in trials:
        root = jax.random.PRNGKey(t.cfg.seed)
        t.carry = start(t.learner.state, jax.random.fold_in(root, 2), jax.random.fold_in(root, 1))
        if resume:
            t.restore(t.carry)
    if len({(t.learner.version, t.env_steps) for t in trials}) > 1:
        raise RuntimeError("the seeds' newest checkpoints are at different updates "
                           f"({', '.join(f'{t.cfg.trial}: {t.learner.version}' for t in trials)}); resume each "
                           "seed as its own trial (-f <trial>__seed=<s> --resume, without seeds)")
    for t in trials:
        t.open()
    version, env_steps = trials[0].learner.version, trials[0].env_steps
    mesh = trials[0].learner.mesh
    with jax.set_mesh(mesh):
        state, carry = _stack([t.learner.state for t in trials]), _stack([t.carry for t in trials])
        replicated = sharding.replicated(mesh)
        # the envs (and everything with an env axis) split over trainer.devices, the train state replicated: XLA
        # partitions rollout and update, the gradients' all-reduce included (axis + 1: the seeds' axis comes first)
        on_envs = jax.tree.map(lambda axis: replicated if axis is None else sharding.batch_axis_sharding(mesh, axis + 1),
                               program.env_axes(trials[0].carry), is_leaf=lambda x: x is None)
        state, carry = jax.device_put(state, replicated), jax.device_put(carry, on_envs)
        # the trials' axis: ``lax.map`` runs each seed with exactly the program one seed runs, ``seeds_batch`` of
        # them vmapped at a time (``Experiment.seeds_batch``)
        batch = min(cfg.seeds_batch, len(trials))

        def run_all(state: Any, carry: Any, n: jax.Array, plan: Any) -> Any:
            return jax.lax.map(lambda x: program.run(x[0], x[1], n, plan), (state, carry),
                               batch_size=batch if batch > 1 else None)

        step = jax.jit(run_all, donate_argnums=(0, 1), in_shardings=(replicated, on_envs, None, None),
                       out_shardings=(replicated, on_envs, replicated))
    result = TrainResult(config=cfg, env_steps=env_steps)
    deadline = time.time() + cfg.timeout_seconds
    per_iteration: float | None = None  # seconds, measured from the second call on (the first one compiles)
    total = schedule.iterations * schedule.env_steps_per_iteration
    finished = False
    try:
        while env_steps < total:
            if time.time() > deadline:
                result.stopped_by = "timeout"
                break
            # the iterations of this call: up to a checkpoint or evaluation falling due, the end, ~CALL_SECONDS
            limit = 1 if per_iteration is None else min(MAX_ITERATIONS, max(1, int(CALL_SECONDS / max(per_iteration, 1e-9))))
            owed, explore, steps, v = [], [], env_steps, version
            while len(owed) < limit and steps < total:
                explore.append(schedule.explore(steps))
                steps += schedule.env_steps_per_iteration
                owed.append(schedule.updates_owed(steps, v))
                v, before = v + owed[-1], v
                if _crosses(before, v, cfg.checkpoint.every_updates) or _crosses(before, v, cfg.eval.every_updates):
                    break
            n = len(owed)
            pad = MAX_ITERATIONS - n
            plan = {"updates": jnp.asarray(owed + [0] * pad, jnp.int32),
                    "explore": {k: jnp.asarray([e[k] for e in explore] + [0.0] * pad, jnp.float32)
                                for k in (explore[0] if explore else {})}}
            with held():  # a stop waits for the call's lines and checkpoint (``srljax.loops.signals``)
                t0 = time.perf_counter()
                with jax.set_mesh(mesh):
                    state, carry, outputs = step(state, carry, jnp.int32(n), plan if schedule.replay else None)
                metrics, ep_return, ep_length, ep_won = jax.device_get(sharding.host_local(outputs))
                took = time.perf_counter() - t0
                per_iteration = 0.0 if per_iteration is None else took / n  # after compiling: the next call measures
                sps = n * schedule.env_steps_per_iteration / max(took, 1e-9)
                for i, t in enumerate(trials):
                    self_version = version
                    for k in range(n):
                        t.window.add(ep_return[i, k].ravel(), ep_length[i, k].ravel(), ep_won[i, k].ravel())
                        t.env_steps += schedule.env_steps_per_iteration
                        for j in range(owed[k]):
                            update = self_version + j + 1
                            if update % cfg.log.log_every == 0 or update == cfg.num_updates:
                                values = {name: (v[i, k, j] if schedule.replay else v[i, k]) for name, v in metrics.items()}
                                values |= {name: e for name, e in explore[k].items()}
                                record = t.records.record(update, t.env_steps, t.window.summary(), values)
                                record["sps"] = sps
                                t.logger.write(record)
                                if i == 0:
                                    result.metrics.append(record)
                        self_version += owed[k]
                    t.learner.state = jax.device_put(_unstack(state, i), replicated)
                    t.carry = _unstack(carry, i)
                    t.learner.version = self_version
                    t.learner.maybe_save(since=version)
                version, env_steps = trials[0].learner.version, trials[0].env_steps
                result.env_steps = env_steps
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
