"""The unit costs ``python -m launch.plan CFG --measure`` times on this machine, for one config.

    costs = measure(cfg, seconds=1.0, env_counts=[1, 4, 16, 64])   # a dict, ``srljax.sizing.Costs.from_dict``'s input

The actor's units (env, actor, act, inference) run in a process set up as an actor's (single-threaded XLA,
programs dispatched inline), the trainer's (update, ingest) in one set up as a trainer's, each started with
``srljax.parallel.devices.process_env`` as ``launch.local`` starts them. Each unit is timed alone, as wall time and as CPU time (the process's, all threads: envpool's and
XLA's included; the sockets' sides by thread), so the planner can tell a unit that waits (a slow
remote env) from one that computes. A call's wall time leaves out what its thread spent runnable but waiting
for a CPU (``/proc/thread-self/schedstat``): on a shared machine a sleeping unit woken late by a busy scheduler
is timed as on a quiet one, and so is a computing unit another job preempted:

* ``env``: one batch step of E envs with random actions (the config's env, ``batch_size=0``), per E;
* ``actor``: one batch step of an inline actor's loop as ``ActorWorker`` runs it (``recv``, ``Acting.act``,
  ``SegmentBuilder.add`` / ``pop``, ``send``), per E;
* ``act``: the jitted act on n rows (the E above, and the larger batches a policy worker forms);
* ``inference``: a request of E rows over a real ZeroMQ ``InferenceClient`` -> ``InferenceServer`` and its
  reply (round trip, each side's CPU), per E;
* ``update``: one ``Learner.step`` on a random batch of the config's size, of 4x that and of the smallest batch a
  plan weighs (one actor of the fewest ``env_counts`` envs), then of twice the last while it took under
  ``LARGER_UPDATE_S`` (up to ``LARGEST_UPDATE`` x the config's): a cheap update's line through batches of a few ms
  is no guide to the 100x larger batches a plan of many actors trains on;
* ``sample_bytes_per_step``: a segment's bytes on the wire (``comm/codec.py``) per env step;
* ``ingest``: (in the trainer's process) a ``SampleSender`` pushing segments of the config's ``env.num_envs`` columns as fast as it can
  over loopback TCP (through shared memory with ``layout.shared_memory=true``) to a ``SampleReceiver`` that checks
  them and cuts batches as the trainer does:
  samples/s, bytes/s and each side's CPU per sample;
* ``actor_process``: the real actor worker's CPU (and wall) per batch step of E envs, one actor beside a trainer
  in a short ``launch.local`` run (``launch/plan_calibrate.py``): what its process spends beyond ``actor``'s loop;
* ``actor_crowded``: the same run with as many actors as this machine's plan puts on its cores, where that is more
  than one per core: their mean CPU per batch step (``Costs.crowding``).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import threading
import time
from typing import Any

import jax
import numpy as np

import algos
import envs
from algos.testing import random_trajectory
from srljax.comm.codec import encode
from srljax.comm.inference import InferenceClient, InferenceServer
from srljax.comm.samples import SHM_SLOTS, SampleReceiver, SampleSender
from srljax.config import Experiment, apply_overrides
from srljax.layout import ACTOR, TRAINER
from srljax.learning.acting import Acting, jit_act
from srljax.learning.learner import Learner
from srljax.learning.rollout import SegmentBuilder, concat_segments
from srljax.system.acting.packing import ReplyPacking
from srljax.system.shell.common import checked_trajectory

TRIAL = "plan/measure"


def _runqueue_s() -> float | None:
    """Seconds this thread has spent runnable but waiting for a CPU (``/proc/thread-self/schedstat``'s second
    field), or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) * 1e-9
    except (OSError, ValueError, IndexError):
        return None


def _timed(fn, seconds: float, min_calls: int = 5) -> dict[str, float]:
    """Per call of ``fn``, over at least ``seconds`` and ``min_calls`` calls: the median wall time less the time
    the calling thread waited for a CPU during the call (run-queue wait: another job's process held the core), and
    the mean process-CPU time (every thread; CPU time does not grow when the machine is shared). A unit that
    sleeps (a remote env, a socket round trip) keeps its sleep, which is the machine's speed; one that another job
    kept from running does not keep that wait: a sleeper woken late on a loaded machine counts as woken on time
    (the wait between its wake-up and its next turn on a core is run-queue wait)."""
    walls, raw, waits, start, cpu = [], [], [], time.perf_counter(), 0.0
    while len(walls) < min_calls or time.perf_counter() - start < seconds:
        q0 = _runqueue_s()  # (reading it costs ~16 us of CPU: outside the CPU bracket)
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        t1, c1 = time.perf_counter(), time.process_time()
        cpu += c1 - c0
        q1 = _runqueue_s()
        waited = (q1 - q0) if q0 is not None and q1 is not None else 0.0
        raw.append(t1 - t0)
        waits.append(waited)
        walls.append(max(t1 - t0 - waited, 0.0))
    return {"wall_s": statistics.median(walls), "cpu_s": cpu / len(walls),
            "wall_mean_s": statistics.fmean(walls), "wall_raw_s": statistics.median(raw),
            "runqueue_mean_s": statistics.fmean(waits), "calls": len(walls)}


def _random_actions(spec, n: int, rng: np.random.Generator) -> np.ndarray:
    if spec.action_kind == "discrete":
        return rng.integers(0, spec.num_actions, n).astype(np.int32)
    if spec.action_kind == "multi_discrete":
        return rng.integers(0, spec.action_nvec, (n, len(spec.action_nvec))).astype(np.int32)
    return rng.uniform(-1.0, 1.0, (n, *spec.action_shape)).astype(np.float32)


def _env_cfg(cfg: Experiment, n: int) -> Any:
    return dataclasses.replace(cfg.env, num_envs=n, batch_size=0)


def measure_env(cfg: Experiment, n: int, seconds: float) -> dict[str, float]:
    env = envs.make(_env_cfg(cfg, n), seed=cfg.seed)
    rng = np.random.default_rng(0)
    try:
        env.reset()
        actions = [_random_actions(env.spec, n, rng) for _ in range(8)]
        for a in actions:
            env.step(a)
        i = iter(range(1 << 62))
        return _timed(lambda: env.step(actions[next(i) % 8]), seconds)
    finally:
        env.close()


def measure_actor(cfg: Experiment, n: int, params: Any, seconds: float) -> dict[str, float]:
    """One batch step of the inline actor's loop (``ActorWorker._poll_inline`` without the sockets)."""
    env = envs.make(_env_cfg(cfg, n), seed=cfg.seed)
    try:
        spec = env.spec
        algo = algos.make(cfg, spec)
        acting = Acting(algo, n, jax.random.PRNGKey(cfg.seed), packing=ReplyPacking(spec, algo.extras_spec))
        acting.warm_up(params, spec)
        builder = SegmentBuilder(spec, cfg.algo.num_steps, algo.extras_spec, algo.return_gamma)
        env.async_reset()

        pops: list[float] = []

        def step() -> None:
            ts = env.recv()
            action, extras = acting.act(params, ts)
            builder.add(ts, action, extras, 0)
            if builder.ready(n):
                t0 = time.perf_counter()
                builder.pop(n)
                pops.append(time.perf_counter() - t0)
            env.send(action, ts.env_id)

        for _ in range(cfg.algo.num_steps + 2):
            step()
        pops.clear()
        timed = _timed(step, seconds, min_calls=2 * cfg.algo.num_steps)
        # the median step is not one that pops a segment (one in num_steps): add the pops' share
        timed["wall_s"] += sum(pops) / timed["calls"]
        return timed
    finally:
        env.close()


def measure_act(algo: Any, spec: Any, params: Any, n: int, seconds: float) -> dict[str, float]:
    act = jit_act(algo, ReplyPacking(spec, algo.extras_spec))
    obs = np.zeros((n, *spec.obs_shape), spec.obs_dtype)
    state = algo.initial_actor_state(n)
    first = np.ones(n, bool) if jax.tree.leaves(state) else None
    key = jax.random.PRNGKey(0)
    np.asarray(act(params, obs, state, first, key)[0])
    timed = _timed(lambda: np.asarray(act(params, obs, state, first, key)[0]), seconds)
    timed["wall_s"] = min(timed["wall_s"], timed["cpu_s"])  # pure compute, one thread: waiting is another job's
    return timed


def measure_inference(spec: Any, reply_bytes: int, n: int, seconds: float) -> dict[str, float]:
    """A request of ``n`` observations and its packed reply, over real sockets (the act itself excluded)."""
    server = InferenceServer("tcp://127.0.0.1:*", trial=TRIAL)
    client = InferenceClient(server.address, trial=TRIAL)
    obs = np.zeros((n, *spec.obs_shape), spec.obs_dtype)
    rows = np.zeros((n, reply_bytes), np.uint8)
    stop, server_cpu = threading.Event(), [0.0, 0]

    def serve() -> None:
        start = time.thread_time()
        while not stop.is_set():
            for req in server.poll_requests(timeout_ms=20):
                server.reply(req, {"rows": rows}, version=0)
                server_cpu[1] += 1
        server_cpu[0] = time.thread_time() - start

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        i = iter(range(1 << 62))

        def round_trip() -> None:
            client.send(request_id=next(i), tree={"obs": obs})
            if client.recv(timeout_ms=5000) is None:
                raise RuntimeError("the inference server did not answer within 5 s")

        for _ in range(5):
            round_trip()
        cpu0 = time.thread_time()
        timed = _timed(round_trip, seconds)
        client_cpu = (time.thread_time() - cpu0) / timed["calls"]
    finally:
        stop.set()
        thread.join(5)
        client.close()
        server.close()
    return {"rtt_s": timed["wall_s"], "client_cpu_s": client_cpu, "server_cpu_s": server_cpu[0] / max(server_cpu[1], 1)}


LARGER_UPDATE_S = 0.25
"""An update faster than this is measured again at twice the batch (issue 42: the synthetic 10 ms plan trained on
30,720 samples, and the line through 256-1,024 put its update's CPU at 2x what the trainer spent)."""
LARGEST_UPDATE = 256  # x the config's batch: the most columns an update is measured on


def measure_update(cfg: Experiment, spec: Any, columns: int, repeats: int = 5) -> dict[str, float]:
    """One ``Learner.step`` on ``columns`` columns (a learner compiled for that batch, as a trainer's is)."""
    learner = Learner(apply_overrides(cfg, [f"trainer.batch_envs={columns}"]), spec, checkpoints=False)
    try:
        traj = random_trajectory(spec, cfg.algo.num_steps, columns)
        learner.step(traj)
        jax.block_until_ready(learner.policy_params())
        walls, cpus = [], []  # the fastest of the repeats: a shared machine only ever adds to an update's time
        for _ in range(repeats):
            wall0, cpu0 = time.perf_counter(), time.process_time()
            learner.step(traj)
            jax.block_until_ready(learner.policy_params())
            walls.append(time.perf_counter() - wall0)
            cpus.append(time.process_time() - cpu0)
    finally:
        learner.close(final_checkpoint=False)
    # pure compute: on a machine of its own it takes no longer than its CPU time (more threads: less)
    return {"samples": columns * cfg.algo.num_steps, "wall_s": min(min(walls), min(cpus)), "cpu_s": min(cpus),
            "wall_measured_s": min(walls)}


def measure_ingest(cfg: Experiment, spec: Any, extras_spec: Any, seconds: float) -> dict[str, float]:
    """A sender thread pushing segments as fast as it can; this thread receives, checks and cuts batches."""
    t, b = cfg.algo.num_steps, cfg.env.num_envs
    segment = random_trajectory(spec, t, b)
    segment = segment._replace(extras={k: np.zeros((t + 1, b, *shape), dtype) for k, (shape, dtype) in extras_spec.items()})
    nbytes = sum(len(memoryview(f)) if not isinstance(f, bytes) else len(f) for f in encode("sample", TRIAL, segment))
    shared = cfg.layout.shared_memory  # as the run will: through rings in /dev/shm, a descriptor on the socket
    receiver = SampleReceiver("tcp://127.0.0.1:*", trial=TRIAL, hwm=4, shared_memory=shared)
    sender = SampleSender(receiver.address, trial=TRIAL, hwm=4, shared_memory=shared,
                          slots=SHM_SLOTS + -(-cfg.batch_envs // b))
    stop, sent = threading.Event(), [0.0, 0]

    def push() -> None:
        start = time.thread_time()
        while not stop.is_set():
            if sender.send(segment, timeout_ms=20, version=0, meta={ACTOR: 0}):
                sent[1] += 1
        sent[0] = time.thread_time() - start

    thread = threading.Thread(target=push, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            receiver.recv(timeout_ms=5000)
        pending, received, batch_columns = [], 0, cfg.batch_envs
        cpu0, wall0 = time.thread_time(), time.perf_counter()
        sent_before = sent[1]
        while time.perf_counter() - wall0 < seconds:
            msg = receiver.recv(timeout_ms=1000)
            if msg is None:
                continue
            pending.append(checked_trajectory(msg.tree, spec, t, extras_spec))
            received += 1
            if sum(p.reward.shape[1] for p in pending) >= batch_columns:
                concat_segments(pending)
                pending = []
        wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
        pushed = sent[1] - sent_before
    finally:
        stop.set()
        thread.join(5)
        sender.close()
        receiver.close()
        if shared:  # the sender's ring, if descriptors were still on their way when it closed
            from srljax.comm.shm import remove_dead_rings

            remove_dead_rings(TRIAL, also_pid=os.getpid())
    samples = received * t * b
    if not samples:
        raise RuntimeError("no segment arrived over loopback TCP in the ingest measurement")
    return {"samples_per_s": samples / wall, "bytes_per_s": received * nbytes / wall,
            "recv_cpu_s_per_sample": cpu / samples, "send_cpu_s_per_sample": sent[0] / max(sent[1] * t * b, 1),
            "segment_bytes": nbytes, "segments": received, "pushed_in_window": pushed}


def other_cores(seconds: float = 1.0) -> float:
    """Cores the machine's other jobs keep busy, over ``seconds`` in which this process only sleeps (``/proc/stat``:
    busy over all jiffies, times the cores); 0 where ``/proc/stat`` is missing. The load average is no guide here:
    it still holds the previous unit's own processes for a minute."""
    def busy() -> tuple[int, int]:
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle, iowait
        return sum(fields) - idle, sum(fields)

    try:
        b0, t0 = busy()
        time.sleep(seconds)
        b1, t1 = busy()
    except OSError:
        return 0.0
    return (b1 - b0) / max(t1 - t0, 1) * (os.cpu_count() or 1)


def measure(cfg: Experiment, seconds: float = 1.0, env_counts: list[int] | None = None,
            act_rows: list[int] | None = None, log=print) -> dict[str, Any]:
    """Every unit cost of ``cfg`` on this machine (see the module docstring), as JSON-ready dicts. The actor's
    units run in a process set up as an actor's is, the trainer's in one set up as a trainer's is
    (``srljax.parallel.devices.process_env``: XLA threads, device; ``dispatch.run_cpu_inline`` for the actor)."""
    import json
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from launch.plan_calibrate import crowded_choice, measure_actor_process
    from srljax.config.tree import to_dict
    from srljax.parallel.devices import process_env

    env_counts = sorted(set(env_counts or [1, 4, 16, 64]))
    out: dict[str, Any] = {"num_steps": cfg.algo.num_steps,
                           "machine": {"host": platform.node(), "cores": os.cpu_count(),
                                       "load_avg_1m": os.getloadavg()[0], "other_cores": other_cores()}}
    with tempfile.TemporaryDirectory(prefix="plan_measure_") as tmp:
        cfg_path = Path(tmp) / "config.json"
        cfg_path.write_text(json.dumps(to_dict(cfg)))
        for part, role in ((ACTOR, ACTOR), (TRAINER, TRAINER)):
            environ = dict(os.environ)
            for key, value in process_env(cfg, role).items():
                if value is None:
                    environ.pop(key, None)
                else:
                    environ[key] = value
            result = Path(tmp) / f"{part}.json"
            cmd = [sys.executable, "-m", "launch.plan_measure", part, str(cfg_path), str(result), str(seconds),
                   ",".join(map(str, env_counts)), ",".join(map(str, act_rows or [256, 1024]))]
            done = subprocess.run(cmd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for line in done.stdout.splitlines():
                if line.startswith("  "):
                    log(line)
            if done.returncode or not result.exists():
                raise RuntimeError(f"measuring the {part}'s units failed (exit {done.returncode}):\n"
                                   + done.stdout[-3000:])
            out.update(json.loads(result.read_text()))
        # the real actor process beside a trainer: what it spends per step beyond the loop timed above
        out["actor_process"] = {str(n): measure_actor_process(cfg_path, n, max(4.0 * seconds, 4.0), Path(tmp), log)
                                for n in env_counts}
        # and as many actors as this machine's plan puts on its cores, where that is more than one per core
        crowd = crowded_choice(out, cfg.trainer.max_policy_lag)
        if crowd is not None:
            out["actor_crowded"] = measure_actor_process(cfg_path, crowd.envs, max(4.0 * seconds, 4.0), Path(tmp),
                                                         log, actors=crowd.actors)
    out["machine"]["other_cores_end"] = other_cores()
    return out


def measure_actor_units(cfg: Experiment, seconds: float, env_counts: list[int], act_rows: list[int],
                        log=print) -> dict[str, Any]:
    """The env, the inline actor's step, the act, a policy worker's request (run in an actor-like process)."""
    from srljax.parallel import dispatch

    dispatch.run_cpu_inline()  # as every role but the trainer (srljax/system/shell/run.py)
    spec_env = envs.make(_env_cfg(cfg, cfg.env.num_envs), seed=cfg.seed)
    spec = spec_env.spec
    spec_env.close()
    algo = algos.make(cfg, spec)
    params = _policy_params(cfg, spec)
    out: dict[str, Any] = {"device": jax.default_backend(), "env": {}, ACTOR: {}, "act": {}, "inference": {}}
    reply_bytes = ReplyPacking(spec, algo.extras_spec).width  # a policy worker's packed reply row
    for n in env_counts:
        out["env"][str(n)] = measure_env(cfg, n, seconds)
        out[ACTOR][str(n)] = measure_actor(cfg, n, params, seconds)
        out["inference"][str(n)] = measure_inference(spec, reply_bytes, n, seconds / 2)
        log(f"  {n:5d} envs: env step {_ms(out['env'][str(n)])}, actor step {_ms(out[ACTOR][str(n)])}, "
            f"inference round trip {out['inference'][str(n)]['rtt_s'] * 1e3:.2f} ms")
    for n in sorted(set(env_counts) | set(act_rows)):
        out["act"][str(n)] = measure_act(algo, spec, params, n, seconds / 2)
        log(f"  act on {n:5d} rows: {_ms(out['act'][str(n)])}")
    return out


def _policy_params(cfg: Experiment, spec: Any) -> Any:
    learner = Learner(cfg, spec, checkpoints=False)
    try:
        return jax.device_get(learner.policy_params())
    finally:
        learner.close(final_checkpoint=False)


def measure_trainer_units(cfg: Experiment, seconds: float, log=print, env_counts: list[int] | None = None) -> dict[str, Any]:
    """The update at the config's batch, at 4x it and at the smallest batch a plan weighs (one actor of the fewest
    envs: an update's cost is not proportional to its batch, so a line through larger batches is no guide below
    them), and the ingest over loopback TCP (run in a trainer-like process)."""
    spec_env = envs.make(_env_cfg(cfg, cfg.env.num_envs), seed=cfg.seed)
    spec = spec_env.spec
    spec_env.close()
    algo = algos.make(cfg, spec)
    out: dict[str, Any] = {"update": []}
    sizes = sorted({min(env_counts or [cfg.batch_envs]), cfg.batch_envs, 4 * cfg.batch_envs})
    while sizes:
        columns = sizes.pop(0)
        out["update"].append(measure_update(cfg, spec, columns))
        u = out["update"][-1]
        log(f"  update on {u['samples']:,} samples: {u['wall_s'] * 1e3:.1f} ms wall, {u['cpu_s'] * 1e3:.1f} ms CPU")
        if not sizes and u["wall_s"] < LARGER_UPDATE_S and 2 * columns <= LARGEST_UPDATE * cfg.batch_envs:
            sizes.append(2 * columns)  # a cheap update: on to the batches a plan of many actors trains on
    ingest = measure_ingest(cfg, spec, algo.extras_spec, seconds)
    out["ingest"] = ingest
    out["sample_bytes_per_step"] = ingest["segment_bytes"] / (cfg.algo.num_steps * cfg.env.num_envs)
    log(f"  ingest: {ingest['samples_per_s']:,.0f} samples/s, {ingest['bytes_per_s'] / 1e6:,.1f} MB/s, "
        f"{out['sample_bytes_per_step']:.0f} bytes per env step")
    return out


def main(argv: list[str]) -> int:
    """``python -m launch.plan_measure actor|trainer CONFIG_JSON OUT_JSON SECONDS ENV_COUNTS ACT_ROWS`` (``measure``
    starts these, in the role's process environment)."""
    import json
    from pathlib import Path

    from srljax.config import from_dict

    part, cfg_path, out_path, seconds, counts, rows = argv
    cfg = from_dict(json.loads(Path(cfg_path).read_text()))
    log = lambda line: print(line, flush=True)  # noqa: E731
    if part == ACTOR:
        out = measure_actor_units(cfg, float(seconds), [int(x) for x in counts.split(",")],
                                  [int(x) for x in rows.split(",")], log)
    else:
        out = measure_trainer_units(cfg, float(seconds), log, [int(x) for x in counts.split(",")])
    Path(out_path).write_text(json.dumps(out))
    return 0


def _ms(unit: dict[str, float]) -> str:
    return f"{unit['wall_s'] * 1e3:.3f} ms wall / {unit['cpu_s'] * 1e3:.3f} ms CPU"


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
