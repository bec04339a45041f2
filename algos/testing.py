"""Random, correctly shaped data for tests and benchmarks of algorithms (no env needed)."""

from __future__ import annotations

import numpy as np

from srljax.types import EnvSpec, Trajectory


def random_trajectory(spec: EnvSpec, t: int, b: int, seed: int = 0) -> Trajectory:
    rng = np.random.default_rng(seed)
    if spec.obs_dtype == "uint8":
        obs = rng.integers(0, 256, (t + 1, b, *spec.obs_shape), dtype=np.uint8)
    else:
        obs = rng.normal(size=(t + 1, b, *spec.obs_shape)).astype(np.float32)
    if spec.action_kind == "discrete":
        action = rng.integers(0, spec.num_actions, (t + 1, b)).astype(np.int32)
    elif spec.action_kind == "multi_discrete":
        action = rng.integers(0, spec.action_nvec, (t + 1, b, len(spec.action_nvec))).astype(np.int32)
    else:
        action = rng.normal(size=(t + 1, b, *spec.action_shape)).astype(np.float32)
    return Trajectory(
        obs=obs,
        action=action,
        reward=rng.normal(size=(t + 1, b)).astype(np.float32),
        terminated=rng.random((t + 1, b)) < 0.02,
        truncated=rng.random((t + 1, b)) < 0.01,
        extras={"logp": np.full((t + 1, b), -0.7, np.float32), "value": rng.normal(size=(t + 1, b)).astype(np.float32),
                # the running return a SegmentBuilder keeps for reward normalisation (ignored without it)
                "ret_acc": rng.normal(size=(t + 1, b)).astype(np.float32)},
        policy_version=np.zeros((b,), np.int32),
    )
