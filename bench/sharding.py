"""Atari PPO update throughput per trainer device count (GPU), or 1-vs-N correctness (CPU).

    python bench/sharding.py                          # everything this machine can do, one command
    python bench/sharding.py --envs 8 64 --repeats 10 # batch = envs x 128 steps per update

On accelerators: for every device count 1, 2, 4, ... up to those present, the median seconds of
one jitted PPO update (CleanRL Atari: Nature CNN, 4 epochs x 4 minibatches) on random Pong-shaped
batches, fed the way a trainer worker does (``Learner.put`` of the next batch while the current
update runs), printed as samples/s and samples/s per device; with several devices also the
largest param difference from 1 device (see ``correctness``). On CPU (no accelerator) it runs only the correctness
check, on 4 fake CPU devices: timings there say nothing about accelerators. Results are recorded
in ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

# Fake CPU devices for the CPU correctness check; the flag only touches the host platform, so it
# changes nothing on a GPU machine. It must be set before JAX starts.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import describe  # bench/machine.py, next to this script

from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig
from srljax.learner import Learner
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


def correctness(envs: int, counts: list[int], epochs: int = 1, updates: int = 2) -> dict[int, float]:
    """Largest |param difference| from 1 device after ``updates`` updates on the same batches.

    One epoch by default: this CNN's PPO update amplifies rounding chaotically (ReLU kinks times
    Adam's per-coordinate scaling). On one device, scaling the initial params by (1 + 1e-7) moved
    them by 5e-4 after one 4-epoch update, so a longer check would measure that chaos, not the
    sharding. Over 8 SGD steps 1 and N devices agree to ~1e-8.
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


def throughput(envs: int, devices: int, epochs: int, repeats: int) -> tuple[float, float]:
    """(compile seconds, median seconds per update), the next batch's copy overlapping each update."""
    learner = make_learner(envs, devices, epochs)
    batches = [random_trajectory(envs, seed=s) for s in range(2)]
    start = time.perf_counter()
    jax.block_until_ready(learner.step(batches[0]))  # compiles
    compile_s = time.perf_counter() - start
    times = []
    placed = learner.put(batches[1])
    for i in range(repeats):
        start = time.perf_counter()
        metrics = learner.step(placed)
        placed = learner.put(batches[i % 2])  # copied while the update runs
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - start)
    return compile_s, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[8, 64], help="env columns B per batch")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    print(f"machine: {describe()}", flush=True)
    available = len(jax.devices())
    counts = [n for n in (1, 2, 4, 8, 16) if n <= available]
    if jax.default_backend() == "cpu":
        envs = args.envs[0]
        print(f"CPU: correctness only (Atari PPO, {envs} envs x {STEPS} steps, 1 epoch x 4 minibatches, 2 updates)")
        diffs = correctness(envs, [n for n in counts if n > 1])
        for n, diff in diffs.items():
            verdict = "ok" if diff < 1e-4 else "MISMATCH"
            print(f"  {n} devices vs 1: max |param diff| {diff:.2e}  {verdict}", flush=True)
        sys.exit(0 if all(d < 1e-4 for d in diffs.values()) else 1)
    for envs in args.envs:
        samples = envs * STEPS
        print(f"Atari PPO update, batch {envs} envs x {STEPS} steps = {samples} samples, {args.epochs} epochs x 4 mb")
        for n in counts:
            if envs % n:
                print(f"  {n} devices: skipped ({envs} envs do not split {n} ways)")
                continue
            compile_s, step_s = throughput(envs, n, args.epochs, args.repeats)
            print(
                f"  {n} device(s): {samples / step_s:10,.0f} samples/s  ({samples / step_s / n:,.0f} per device; "
                f"{step_s * 1e3:.1f} ms/update, compile {compile_s:.1f} s)",
                flush=True,
            )
        if len(counts) > 1:
            diffs = correctness(envs, counts[1:])
            print("  max |param diff| vs 1 device (1 epoch, 2 updates): " + ", ".join(f"{n}: {d:.1e}" for n, d in diffs.items()))


if __name__ == "__main__":
    main()
