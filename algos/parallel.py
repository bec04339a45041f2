"""The one thing the math knows about data parallelism: which axis holds independent samples.

    mbs = split_samples(minibatches, axis=1)   # inside a jitted update, e.g. PPO's [M, N/M, ...]

The trainer's mesh (``srljax/parallel/sharding.py``) has one axis, ``BATCH``; algorithm code never names
it beyond this call, and outside a mesh (one device, actors, tests) the call does nothing.
"""

from __future__ import annotations

from typing import Any, TypeVar

import jax
from jax.sharding import PartitionSpec as P

BATCH = "batch"
"""The one mesh axis: data parallel over env columns / samples."""

T = TypeVar("T")


def split_samples(tree: T, axis: int = 0) -> T:
    """Tell the compiler that ``axis`` of every leaf holds independent samples it may split over devices.

    Called from inside jitted algorithm code (e.g. on PPO minibatches ``[M, N/M, ...]`` with
    ``axis=1``). Without it XLA is free to all-gather a shuffled minibatch and run the whole
    gradient on every device, which is correct but not parallel. A no-op outside a trainer's
    mesh (one device, actors, tests) and for leaves whose axis does not divide evenly.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty or BATCH not in mesh.axis_names or mesh.shape[BATCH] == 1:
        return tree
    num = mesh.shape[BATCH]
    spec = P(*([None] * axis), BATCH)

    def one(x: Any) -> Any:
        if getattr(x, "ndim", 0) <= axis or x.shape[axis] % num:
            return x
        return jax.lax.with_sharding_constraint(x, spec)

    return jax.tree.map(one, tree)
