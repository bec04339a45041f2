"""Running observation / reward normalisers as pure functions on pytrees.

Shape letters: T time, B envs, N samples, ``*S`` the shape being normalised.

Semantics follow gym's ``RunningMeanStd`` (count starts at epsilon=1e-4, mean 0, var 1,
parallel merge of batch moments, population variance) as used by CleanRL's
``NormalizeObservation`` / ``NormalizeReward`` wrappers. Unlike the wrappers, the stats live in
the learner's ``TrainState`` and are updated once per batch, so actors only ever read them.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array
VAR_EPS = 1e-8


@flax.struct.dataclass
class RunningMeanStd:
    mean: Array  # [*S] float32
    var: Array  # [*S] float32
    count: Array  # [] float32 (starts at epsilon, as in gym; integer-exact up to 2**24 samples)


@flax.struct.dataclass
class NormState:
    """Everything normalisation carries across updates; a field is None when disabled."""

    obs: RunningMeanStd | None
    ret: RunningMeanStd | None  # stats of the discounted return (scalar shape)


def rms_init(shape: tuple[int, ...], epsilon: float = 1e-4) -> RunningMeanStd:
    return RunningMeanStd(
        mean=jnp.zeros(shape, jnp.float32), var=jnp.ones(shape, jnp.float32), count=jnp.asarray(epsilon, jnp.float32)
    )


def rms_merge(rms: RunningMeanStd, batch_mean: Array, batch_var: Array, batch_count: Array) -> RunningMeanStd:
    """Chan et al. parallel merge of (mean, var, count) moments (gym ``update_from_moments``)."""
    delta = batch_mean - rms.mean
    total = rms.count + batch_count
    mean = rms.mean + delta * batch_count / total
    m2 = rms.var * rms.count + batch_var * batch_count + delta * delta * rms.count * batch_count / total
    return RunningMeanStd(mean=mean, var=m2 / total, count=total)


def rms_update(rms: RunningMeanStd, x: Array, mask: Array | None = None) -> RunningMeanStd:
    """Merge samples x [*N, *S] (mask [*N] of 0/1 selects which count) into ``rms``.

    An all-masked batch leaves ``rms`` unchanged (no division by zero).
    """
    assert x.ndim > rms.mean.ndim, "x needs at least one sample axis"
    x = x.reshape((-1, *rms.mean.shape)).astype(jnp.float32)
    w = jnp.ones(x.shape[:1], jnp.float32) if mask is None else mask.reshape(-1).astype(jnp.float32)
    w_b = w.reshape((-1,) + (1,) * rms.mean.ndim)
    count = jnp.sum(w)
    safe = jnp.maximum(count, 1.0)
    mean = jnp.sum(w_b * x, axis=0) / safe
    var = jnp.sum(w_b * jnp.square(x - mean), axis=0) / safe
    merged = rms_merge(rms, mean, var, count)
    return jax.tree.map(lambda new, old: jnp.where(count > 0, new, old), merged, rms)


def normalize(x: Array, rms: RunningMeanStd, clip: float) -> Array:
    """clip((x - mean) / sqrt(var + 1e-8), -clip, clip) in float32; x [..., *S]."""
    z = (x.astype(jnp.float32) - rms.mean) / jnp.sqrt(rms.var + VAR_EPS)
    return jnp.clip(z, -clip, clip)


def discounted_returns(ret_acc: Array, r_t: Array, valid_t: Array, gamma: float) -> tuple[Array, Array]:
    """Per-env running discounted return, reset at episode boundaries (gym ``NormalizeReward``).

    Args:
      ret_acc: [B] each column's accumulator at its row 0, kept by the shell that built the segment
        (``srljax.learning.rollout.SegmentBuilder``, per env of each actor, in the segment's ``ret_acc`` extra).
      r_t: [T, B] reward of transition t (Trajectory ``reward[1:]``).
      valid_t: [T, B] ``returns.valid_mask``.

    Returns:
      (ret [T, B] the accumulator after each transition, new ret_acc [B]).

    ret_t = valid_t * (ret_{t-1} * gamma + r_t): the envpool reset step (invalid) zeroes the
    accumulator, so the reset observation starts a fresh return. This is CleanRL's "add, then
    zero where done" without the reset step, carried across batch boundaries through row 0.
    """

    def step(acc: Array, xs: tuple[Array, Array]) -> tuple[Array, Array]:
        r, valid = xs
        acc = valid * (acc * gamma + r)
        return acc, acc

    acc, ret = lax.scan(step, ret_acc, (r_t.astype(jnp.float32), valid_t.astype(jnp.float32)))
    return ret, acc


def scale_rewards(norm: NormState, r_t: Array, valid_t: Array, ret_acc: Array, gamma: float,
                  clip: float) -> tuple[Array, NormState]:
    """r_t, valid_t [T, B], ret_acc [B] (each column's accumulator at row 0) -> (r_t / std(return)
    clipped to +-clip [T, B], updated norm).

    Updates the return stats with the valid transitions' returns (reset steps would add
    spurious zeros), then divides by the updated std, as gym does (update, then scale). The
    accumulator lives with the env that produced the column (the segment's ``ret_acc`` extra),
    not in the learner: columns of an asynchronous or multi-actor batch come in any order.
    """
    assert norm.ret is not None
    ret, _ = discounted_returns(ret_acc.astype(jnp.float32), r_t, valid_t, gamma)
    ret_rms = rms_update(norm.ret, ret, valid_t)
    scaled = jnp.clip(r_t.astype(jnp.float32) / jnp.sqrt(ret_rms.var + VAR_EPS), -clip, clip)
    return scaled, norm.replace(ret=ret_rms)


def init_norm(obs_shape: tuple[int, ...], *, obs: bool, reward: bool) -> NormState:
    return NormState(obs=rms_init(obs_shape) if obs else None, ret=rms_init(()) if reward else None)
