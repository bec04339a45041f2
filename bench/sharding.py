"""Atari PPO update throughput per trainer device count (GPU), or 1-vs-N correctness (CPU).

    python bench/sharding.py                          # everything this machine can do, one command
    python bench/sharding.py --envs 8 64 --repeats 10 # batch = envs x 128 steps per update
    python bench/sharding.py --throughput --envs 4 --epochs 1 --repeats 3 --devices 1 2   # the timed path on CPU

On accelerators: for every device count 1, 2, 4, ... up to those present, the median seconds of
one PPO update (CleanRL Atari: Nature CNN, 4 epochs x 4 minibatches) on random Pong-shaped
batches, measured through the trainer's real path: a ``TrainerWorker`` (the distributed trainer,
``srljax/system/training/trainer.py``) receives the batches as actor segments over its ZeroMQ sample
socket (``--segments`` per batch, pushed by a feeder thread with a ``SampleSender``, at most two
batches ahead of the updates as the actors' lag throttle keeps them), checks and
cuts them into batches, copies the next batch to the devices while the current update runs,
publishes params and writes its metrics line after every update. The time is that between update
completions after the first ones (``--skip``), printed as samples/s and samples/s per device; with
several devices also the largest param difference from 1 device (see ``correctness``). On CPU (no
accelerator) it runs only the correctness check, on 4 fake CPU devices: timings there say nothing
about accelerators; ``--throughput`` runs the timed path there too (to check it works). Results
are recorded in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

# Fake CPU devices for the CPU correctness check; the flag only touches the host platform, so it
# changes nothing on a GPU machine. It must be set before JAX starts.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import describe  # bench/machine.py, next to this script

from srljax.comm import MemoryNames, SampleSender
from srljax.config import CheckpointConfig, EnvConfig, Experiment, LayoutConfig, LogConfig, PPOConfig, TrainerConfig
from srljax.learning.learner import Learner
from srljax.learning.rollout import split_segments
from srljax.system.shell.common import trial_name
from srljax.system.training.trainer import TrainerWorker
from srljax.types import EnvSpec, Trajectory

SPEC = EnvSpec(id="Pong-v5", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6)
STEPS = 128


def random_trajectory(envs: int, seed: int) -> Trajectory:
    """Random Pong-shaped data: frames, actions, rewards, occasional episode ends."""
    rng = np.random.default_rng(seed)
    return Trajectory(
        obs=rng.integers(0, 256, (STEPS + 1, envs, *SPEC.obs_shape), dtype=np.uint8),
        action=rng.integers(0, SPEC.num_actions, (STEPS + 1, envs)).astype(np.int32),
        reward=rng.choice(np.array([-1.0, 0.0, 1.0], np.float32), (STEPS + 1, envs), p=[0.02, 0.96, 0.02]),
        terminated=rng.random((STEPS + 1, envs)) < 0.01,
        truncated=np.zeros((STEPS + 1, envs), bool),
        extras={
            "logp": np.full((STEPS + 1, envs), -np.log(SPEC.num_actions), np.float32),  # a uniform policy's
            "value": rng.normal(0.0, 0.1, (STEPS + 1, envs)).astype(np.float32),
        },
        policy_version=np.zeros((envs,), np.int32),
    )


def experiment(envs: int, devices: int, epochs: int) -> Experiment:
    return Experiment(
        total_env_steps=1000 * envs * STEPS,
        env=EnvConfig(id="Pong-v5", num_envs=envs),
        algo=PPOConfig(num_steps=STEPS),
        trainer=TrainerConfig(devices=devices, num_minibatches=4, update_epochs=epochs),
    )


def make_learner(envs: int, devices: int, epochs: int) -> Learner:
    spec = dataclasses.replace(SPEC, num_envs=envs, batch_size=envs)
    return Learner(experiment(envs, devices, epochs), spec, checkpoints=False)


def params_diff(a: Learner, b: Learner) -> float:
    pa, pb = jax.device_get(a.policy_params()), jax.device_get(b.policy_params())
    return max(float(np.max(np.abs(x - y))) for x, y in zip(jax.tree.leaves(pa), jax.tree.leaves(pb)))


def correctness(envs: int, counts: list[int], epochs: int = 1, updates: int = 1) -> dict[int, float]:
    """Largest |param difference| from 1 device after ``updates`` updates on the same batches.

    One epoch of one update by default: this CNN's PPO update amplifies rounding chaotically (ReLU
    kinks times Adam's per-coordinate scaling). On one device, scaling the initial params by
    (1 + 1e-7) moved them by 5e-4 after one 4-epoch update, so a longer check would measure that
    chaos, not the sharding. With the strided convs as matmuls (``algos.networks.Conv``), 1 and 4
    devices differed after the first update (4 SGD steps) in one nearly dead channel of the second
    conv only (6.7e-6: a gradient near Adam's eps, summed in another order), and the second update
    spread that to 4e-4; before, the 8 steps agreed to ~2e-8. A sharding bug (a device's gradient
    from its share of the minibatch alone) moves most coordinates by ~lr = 2.5e-4 in the first step.
    """
    batches = [random_trajectory(envs, seed=s) for s in range(updates)]
    ref = make_learner(envs, 1, epochs)
    for batch in batches:
        ref.step(batch)
    out = {}
    for n in counts:
        other = make_learner(envs, n, epochs)
        for batch in batches:
            other.step(batch)
        out[n] = params_diff(ref, other)
    return out


def trainer_experiment(envs: int, devices: int, epochs: int, segments: int, updates: int, run_root: str) -> Experiment:
    """The distributed config a trainer of ``devices`` devices runs: ``envs`` columns per batch from
    ``segments`` actors of ``envs / segments`` envs each; nothing is dropped as stale (the feeder stamps
    segments with the newest version, and queued ones must not be lost to the lag bound here)."""
    base = experiment(envs, devices, epochs)
    return dataclasses.replace(
        base,
        name="bench_sharding",
        trial=f"d{devices}-b{envs}-{os.getpid()}-{time.monotonic_ns()}",
        total_env_steps=updates * envs * STEPS,
        env=dataclasses.replace(base.env, num_envs=envs // segments),
        trainer=dataclasses.replace(base.trainer, batch_envs=envs, max_policy_lag=1_000_000),
        layout=LayoutConfig(mode="distributed", num_actors=segments, inference="inline"),
        log=LogConfig(run_root=run_root, wandb="disabled", progress="lines"),
        checkpoint=CheckpointConfig(final=False),
    )


class Feeder(threading.Thread):
    """Pushes the ``parts`` round robin to the trainer's sample socket, each stamped with the trainer's
    current params version (as actors acting on the newest params do), at most ``ahead`` batches
    beyond the updates dispatched (as the actors' lag throttle keeps them): a feeder faster than the
    updates would otherwise pile segments up in the trainer, and every batch cut would copy them all."""

    def __init__(self, address: str, trial: str, parts: list[Trajectory], per_batch: int,
                 version: Callable[[], int], ahead: int = 2):
        super().__init__(daemon=True, name="feeder")
        self.address, self.trial, self.parts, self.version = address, trial, parts, version
        self.per_batch, self.ahead = per_batch, ahead
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.sent = 0

    def run(self) -> None:
        try:
            with SampleSender(self.address, self.trial, hwm=2) as sender:  # a socket is used by one thread only
                while not self.done.is_set():
                    version = self.version()
                    if self.sent >= (version + 1 + self.ahead) * self.per_batch:
                        time.sleep(0.002)
                        continue
                    part = self.parts[self.sent % len(self.parts)]
                    segment = part._replace(policy_version=np.full_like(part.policy_version, version))
                    if sender.send(segment, timeout_ms=50, version=version):
                        self.sent += 1
        except BaseException as err:  # reported by the main thread
            self.error = err


def throughput(envs: int, devices: int, epochs: int, repeats: int, segments: int = 2,
               skip: int = 2) -> tuple[float, float]:
    """(setup seconds including compile, median seconds per update) of a ``TrainerWorker`` fed over the wire."""
    if envs % segments:
        raise SystemExit(f"--envs {envs} does not split into --segments {segments}")
    with tempfile.TemporaryDirectory(prefix="srljax-sharding-") as tmp, contextlib.redirect_stdout(io.StringIO()):
        cfg = trainer_experiment(envs, devices, epochs, segments, repeats + skip + 1, tmp)
        worker = TrainerWorker(cfg, 0, MemoryNames())
        worker.spec = dataclasses.replace(SPEC, num_envs=envs // segments, batch_size=envs // segments)  # what configure carries
        start = time.perf_counter()
        worker.setup()  # compiles the update for this batch
        setup_s = time.perf_counter() - start
        batches = [random_trajectory(envs, seed=s) for s in range(2)]
        parts = [part for batch in batches for part in split_segments(batch, envs // segments)]
        feeder = Feeder(worker.receiver.address, trial_name(cfg), parts, segments, lambda: worker.learner.version)
        feeder.start()
        ends: list[float] = []  # when each update completed (the worker read its metrics)
        try:
            deadline = time.monotonic() + 600 + 60 * repeats
            while worker.stats.counters["updates"] < cfg.num_updates:
                done = worker.stats.counters["updates"]
                worker.poll()
                if worker.stats.counters["updates"] > done:
                    ends.append(time.perf_counter())
                if feeder.error is not None:
                    raise RuntimeError("the feeder thread failed") from feeder.error
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {done} of {cfg.num_updates} updates before the deadline")
        finally:
            feeder.done.set()
            feeder.join(timeout=10)
            worker.close()
        dropped = worker.dropped_stale
    if dropped:
        raise RuntimeError(f"{dropped} columns were dropped as stale: the timing would not be the update's")
    times = np.diff(ends[skip:])
    return setup_s, statistics.median(times.tolist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 64], help="env columns B per batch")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10, help="timed updates per device count")
    parser.add_argument("--segments", type=int, default=2, help="actor segments a batch arrives in")
    parser.add_argument("--devices", type=int, nargs="+", help="device counts to time (default: 1, 2, 4, ... present)")
    parser.add_argument("--throughput", action="store_true", help="time the trainer on CPU too (a check of the code path)")
    args = parser.parse_args()
    print(f"machine: {describe()}", flush=True)
    available = len(jax.devices())
    counts = [n for n in (args.devices or (1, 2, 4, 8, 16)) if n <= available]
    if jax.default_backend() == "cpu" and not args.throughput:
        envs = args.envs[0]
        print(f"CPU: correctness only (Atari PPO, {envs} envs x {STEPS} steps, 1 epoch x 4 minibatches, 1 update)")
        diffs = correctness(envs, [n for n in counts if n > 1])
        for n, diff in diffs.items():
            verdict = "ok" if diff < 1e-4 else "MISMATCH"
            print(f"  {n} devices vs 1: max |param diff| {diff:.2e}  {verdict}", flush=True)
        sys.exit(0 if all(d < 1e-4 for d in diffs.values()) else 1)
    for envs in args.envs:
        samples = envs * STEPS
        print(f"Atari PPO update through a TrainerWorker, batch {envs} envs x {STEPS} steps = {samples} samples "
              f"(arriving as {args.segments} segments), {args.epochs} epochs x 4 mb, on {jax.default_backend()}")
        for n in counts:
            if envs % n:
                print(f"  {n} devices: skipped ({envs} envs do not split {n} ways)")
                continue
            setup_s, step_s = throughput(envs, n, args.epochs, args.repeats, args.segments)
            print(
                f"  {n} device(s): {samples / step_s:10,.0f} samples/s  ({samples / step_s / n:,.0f} per device; "
                f"{step_s * 1e3:.1f} ms/update, trainer setup with compile {setup_s:.1f} s)",
                flush=True,
            )
        if len(counts) > 1:
            diffs = correctness(envs, counts[1:])
            print("  max |param diff| vs 1 device (1 epoch, 1 update): " + ", ".join(f"{n}: {d:.1e}" for n, d in diffs.items()))


if __name__ == "__main__":
    main()
