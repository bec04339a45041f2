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
prompt). The host sends call k+1 before writing call k's metrics lines and feeding its
episode window, so that host work runs beside the device's; it waits for a call (and takes every trial's state from
it) only where a checkpoint or evaluation falls due, at the end and at a stop. A checkpoint
holds the whole carry (every env's state and key, the acting key, the last row, a replay's contents), so
``--resume`` continues exactly where the run stopped.

``trainer.num_hosts=N`` (``launch.local`` starts N processes, ``launch.slurm`` one per node; ``launch/hosts.py``): the
same program over every device of N processes joined by ``jax.distributed`` (a global mesh, the envs split over all
of them, the gradients all-reduced); process 0 decides each call's length and the timeout (broadcast to all), writes
the metrics lines and evaluates; all of them write each checkpoint together (orbax, the env state gathered). A
SIGTERM to any of them is JAX's preemption notice: every process stops at the same call, checkpointed.

``seeds=[...]``: each seed is its own trial ``<trial>__seed=<s>`` (folder, config.json, metrics, checkpoints, as if it
ran alone with ``seed=s``), the trials' states stacked and the program mapped over them: one after another inside
the program by default (each seed bit for bit as run alone), ``seeds_batch`` at a time ``vmap``-ed.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, NamedTuple

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


class _Quiet:
    """The metrics logger of a process other than 0 in a group of hosts: process 0 writes the lines."""

    wandb_log = None

    def __init__(self, elapsed: float, wandb_id: str | None):
        self._start, self.wandb_id = time.time() - elapsed, wandb_id

    @property
    def elapsed(self) -> float:
        return time.time() - self._start

    def write(self, record: dict[str, Any], gauges: bool = True) -> None:
        pass

    def close(self) -> None:
        pass


def _hosts() -> int:
    return jax.process_count()


def _gathered(x: Any) -> np.ndarray:
    """The whole value of ``x`` on this process (a collective over the group when ``x`` spans several processes)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(jax.device_get(x))


def _placed(tree: Any, shardings: Any) -> Any:
    """``tree`` (numpy, local or global arrays; the same values on every process) laid out as ``shardings``: with
    several processes through a compiled identity, which every process runs (``device_put`` only reshards here)."""
    if _hosts() == 1:
        return jax.device_put(tree, shardings)
    if all(isinstance(x, jax.Array) and x.sharding.is_equivalent_to(s, x.ndim)
           for x, s in zip(jax.tree.leaves(tree), jax.tree.leaves(shardings))):
        return tree  # already so (a replicated state after each call)
    return jax.jit(lambda x: x, out_shardings=shardings)(tree)


def _agreed(limit: int, timed_out: bool) -> tuple[int, bool]:
    """Process 0's call length and timeout decision, on every process (each measures its own time)."""
    if _hosts() == 1:
        return limit, timed_out
    from jax.experimental import multihost_utils

    got = multihost_utils.broadcast_one_to_all(np.asarray([limit, int(timed_out)], np.int32))
    return int(got[0]), bool(got[1])


def _preempted(call: int) -> bool:
    """A group of hosts: whether a SIGTERM (JAX's preemption notice, on any process) has every process stop at this
    call; they all answer the same at the same call."""
    if _hosts() == 1:
        return False
    from jax.experimental import multihost_utils

    return multihost_utils.reached_preemption_sync_point(call)


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
        elapsed, wandb_id = float(self.meta.get("elapsed_s", 0.0)), self.meta.get("wandb_id")
        self.records = UpdateRecords(env_steps=self.env_steps)
        if not self.learner.is_primary:  # process 0 of a group of hosts writes the lines and evaluates
            self.logger = _Quiet(elapsed, wandb_id)
            self.learner.run_state = self.run_state
            return
        self.logger = MetricsLogger(self.cfg, total=self.cfg.total_env_steps, elapsed=elapsed, wandb_id=wandb_id)
        algo = self.learner.algo
        bots = algo.consumes == "search" and self.env.spec.players > 1  # a single-player search agent: ``eval``
        self.evals = (SearchBotEval.make(self.cfg, algo, self.env) if bots
                      else InlineEval.make(self.cfg, algo, self.logger.wandb_log))
        self.learner.run_state = self.run_state

    def run_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        shell = {f"carry/{i}": _gathered(x) for i, x in enumerate(jax.tree.leaves(self.carry))}
        meta = {"env_steps": self.env_steps, "episodes": self.window.state(), "elapsed_s": round(self.logger.elapsed, 3),
                "wandb_id": self.logger.wandb_id}
        return shell, meta

    def restore(self, like: Any) -> None:
        like_shell = {f"carry/{i}": _gathered(x) for i, x in enumerate(jax.tree.leaves(like))}
        shell, self.meta = self.learner.restore(like_shell)
        if not shell:
            raise RuntimeError(f"{self.cfg.run_dir}: its newest checkpoint holds no env state (not an Anakin run's?); "
                               "start a new trial")
        leaves = [np.asarray(shell[f"carry/{i}"]) for i in range(len(like_shell))]  # placed with the envs' layout
        self.carry = jax.tree.unflatten(jax.tree.structure(like), leaves)
        self.env_steps = int(self.meta.get("env_steps", 0))
        self.window.load_state(self.meta.get("episodes", {}))
        if self.learner.is_primary:
            print(f"[{self.cfg.name}/{self.cfg.trial}] resumed from the checkpoint of update {self.learner.version} "
                  f"({self.env_steps:,} env steps, every env's state with it)", flush=True)


def _stack(trees: list[Any]) -> Any:
    """The trials' trees stacked on a new first axis; numpy leaves (a restored carry) stay numpy, so a group of
    hosts places them from host values, as every process holds them."""
    return jax.tree.map(lambda *xs: np.stack(xs) if all(isinstance(x, np.ndarray) for x in xs) else jnp.stack(xs),
                        *trees)


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
        replicated = sharding.replicated(mesh)
        # the envs (and everything with an env axis) split over trainer.devices, the train state replicated: XLA
        # partitions rollout and update, the gradients' all-reduce included (axis + 1: the seeds' axis comes first)
        on_envs = jax.tree.map(lambda axis: replicated if axis is None else sharding.batch_axis_sharding(mesh, axis + 1),
                               program.env_axes(trials[0].carry), is_leaf=lambda x: x is None)
        state = _placed(_stack([t.learner.state for t in trials]), replicated)
        carry = _placed(_stack([t.carry for t in trials]), on_envs)
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
    planned_steps, planned_version = env_steps, version  # where the calls sent so far will have brought the run
    pending: _Call | None = None  # the call in flight whose lines are not written yet
    synced = True  # the trials' learner states, carries and versions are those of the last call written
    ready = 0.0  # when the last written call's outputs were ready

    def write(call: _Call) -> None:
        """The call's lines (waiting for its outputs) and episode windows; the trials' states stay where they were."""
        nonlocal per_iteration, ready, version, env_steps
        metrics, ep_return, ep_length, ep_won = jax.device_get(sharding.host_local(call.outputs))
        now = time.perf_counter()
        took, ready = now - max(call.sent, ready), now  # the device ran it from its start or the previous call's end
        per_iteration = 0.0 if per_iteration is None else took / call.n  # after compiling: the next call measures
        sps = call.n * schedule.env_steps_per_iteration / max(took, 1e-9)
        for i, t in enumerate(trials):
            self_version, lines = version, []
            for k in range(call.n):
                t.window.add(ep_return[i, k].ravel(), ep_length[i, k].ravel(), ep_won[i, k].ravel())
                t.env_steps += schedule.env_steps_per_iteration
                for j in range(call.owed[k]):
                    update = self_version + j + 1
                    if update % cfg.log.log_every == 0 or update == cfg.num_updates:
                        values = {name: (v[i, k, j] if schedule.replay else v[i, k]) for name, v in metrics.items()}
                        values |= {name: e for name, e in call.explore[k].items()}
                        record = t.records.record(update, t.env_steps, t.window.summary(), values)
                        record["sps"] = sps
                        lines.append(record)
                self_version += call.owed[k]
            for j, record in enumerate(lines):  # the Prometheus gauges (latest values) from the call's last line
                t.logger.write(record, gauges=j == len(lines) - 1)
            if i == 0:
                result.metrics.extend(lines)
        version, env_steps = version + sum(call.owed), trials[0].env_steps
        result.env_steps = env_steps

    def sync(since: int) -> None:
        """Every trial's state and carry from the last call written, and the checkpoint if one fell due after
        ``since``."""
        nonlocal synced
        for i, t in enumerate(trials):
            t.learner.state = _placed(_unstack(state, i), replicated)
            t.carry = _unstack(carry, i)
            t.learner.version = version
            t.learner.maybe_save(since=since)
        synced = True

    finished = False
    calls = 0
    try:
        while planned_steps < total:
            # the iterations of this call: up to a checkpoint or evaluation falling due, the end, ~CALL_SECONDS
            limit = 1 if per_iteration is None else min(MAX_ITERATIONS, max(1, int(CALL_SECONDS / max(per_iteration, 1e-9))))
            limit, timed_out = _agreed(limit, time.time() > deadline)  # process 0's, in a group of hosts
            if timed_out:
                result.stopped_by = "timeout"
                break
            if _preempted(calls):  # every process of the group at this same call: the final checkpoint follows
                result.stopped_by = "interrupted"
                break
            calls += 1
            owed, explore, steps, v = [], [], planned_steps, planned_version
            due = False
            while len(owed) < limit and steps < total:
                explore.append(schedule.explore(steps))
                steps += schedule.env_steps_per_iteration
                owed.append(schedule.updates_owed(steps, v))
                v, before = v + owed[-1], v
                if _crosses(before, v, cfg.checkpoint.every_updates) or _crosses(before, v, cfg.eval.every_updates):
                    due = True
                    break
            n = len(owed)
            pad = MAX_ITERATIONS - n
            plan = {"updates": jnp.asarray(owed + [0] * pad, jnp.int32),
                    "explore": {k: jnp.asarray([e[k] for e in explore] + [0.0] * pad, jnp.float32)
                                for k in (explore[0] if explore else {})}}
            # a stop waits for the calls' lines and checkpoint (``srljax.loops.signals``); a group of hosts leaves
            # SIGTERM to JAX (its preemption notice, ``_preempted``) and its launcher turns Ctrl-C into that
            with held() if _hosts() == 1 else contextlib.nullcontext():
                sent = time.perf_counter()
                with jax.set_mesh(mesh):
                    state, carry, outputs = step(state, carry, jnp.int32(n), plan if schedule.replay else None)
                call = _Call(outputs, n, owed, explore, sent)
                planned_steps, planned_version = steps, v
                # the previous call's lines are written while this one runs (the host work off the device's path)
                if pending is not None:
                    write(pending)
                pending, synced = call, False
                # a checkpoint or evaluation falls due, the end, the compiling first call: wait for it
                if due or planned_steps >= total or per_iteration is None:
                    before = version
                    write(pending)
                    pending = None
                    sync(since=before)
            if synced:
                for t in trials:
                    if t.evals is not None:
                        t.evals.after_update(version, t.learner.policy_params(), t.env_steps)
        finished = True
    finally:
        consistent = _drain(pending, write, sync, version, synced)
        for t in trials:
            t.learner.close(None if consistent else False)
            if t.evals is not None:
                t.evals.finish(version, t.learner.policy_params(), t.env_steps, evaluate=finished and consistent)
            t.logger.close()
    result.state = trials[0].learner.state
    return result


class _Call(NamedTuple):
    """A call sent to the device: its outputs (futures until ready), iterations, updates owed per iteration, the
    exploration values it acted with, when it was sent."""

    outputs: Any
    n: int
    owed: list[int]
    explore: list[dict[str, float]]
    sent: float


def _drain(pending: _Call | None, write: Any, sync: Any, version: int, synced: bool) -> bool:
    """At the end, a stop or an error: the call in flight's lines, then every trial's state, so the final
    checkpoint holds the state its lines and episode window describe. False (no final checkpoint, no final
    evaluation) where the call in flight itself failed."""
    try:
        if pending is not None:
            write(pending)
        if pending is not None or not synced:
            sync(since=version)
        return True
    except Exception as error:  # a call or the state's copy failed: the states may not be those of the lines written
        print(f"the last call's state could not be taken ({type(error).__name__}: {error}); no final checkpoint",
              flush=True)
        return False
