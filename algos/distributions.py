"""Action distributions as plain jnp functions on their parameters.

Shape letters: B batch, A number of discrete actions or action dimensions.

A distribution is a ``Distribution`` of four pure functions over a parameter pytree ``p``:
categorical ``p = logits [B, A]``; multi-categorical (``multi_categorical(nvec)``, MultiDiscrete actions) ``p = logits
[B, sum(nvec)]``, K independent categoricals side by side; diagonal Gaussian ``p = (mean [B, A], log_std [B, A])``.
Written directly in jnp (no distrax / tfp dependency) so the maths is visible and testable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp

Array = jax.Array
_LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Distribution:
    """``sample(rng, p) -> a``, ``log_prob(p, a) -> [B]``, ``entropy(p) -> [B]``, ``mode(p) -> a``."""

    sample: Callable[[Array, Any], Array]
    log_prob: Callable[[Any, Array], Array]
    entropy: Callable[[Any], Array]
    mode: Callable[[Any], Array]


# -- categorical -------------------------------------------------------------------------


def categorical_sample(rng: Array, logits: Array) -> Array:
    """logits [B, A] -> action [B] int32."""
    return jax.random.categorical(rng, logits, axis=-1).astype(jnp.int32)


def categorical_log_prob(logits: Array, action: Array) -> Array:
    """logits [B, A], action [B] int -> log pi(a) [B]."""
    log_p = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(log_p, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: Array) -> Array:
    """logits [B, A] -> H [B] (nats)."""
    log_p = jax.nn.log_softmax(logits, axis=-1)
    # where(): 0 * log 0 must be 0 even for -inf logits (masked actions).
    return -jnp.sum(jnp.where(log_p > -jnp.inf, jnp.exp(log_p) * log_p, 0.0), axis=-1)


def categorical_mode(logits: Array) -> Array:
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


CATEGORICAL = Distribution(categorical_sample, categorical_log_prob, categorical_entropy, categorical_mode)


def multi_categorical(nvec: tuple[int, ...]) -> Distribution:
    """K independent categoricals over ``logits [B, sum(nvec)]`` (sub-action k's logits the k-th slice) -> actions
    ``[B, K]`` int32; log-probabilities and entropies add over the K."""
    bounds = [0]
    for n in nvec:
        bounds.append(bounds[-1] + int(n))
    parts = list(zip(bounds[:-1], bounds[1:]))

    def split(logits: Array) -> list[Array]:
        return [logits[..., a:b] for a, b in parts]

    def sample(rng: Array, logits: Array) -> Array:
        keys = jax.random.split(rng, len(parts))
        return jnp.stack([categorical_sample(k, x) for k, x in zip(keys, split(logits))], axis=-1)

    def log_prob(logits: Array, action: Array) -> Array:
        return sum(categorical_log_prob(x, action[..., i]) for i, x in enumerate(split(logits)))

    def entropy(logits: Array) -> Array:
        return sum(categorical_entropy(x) for x in split(logits))

    def mode(logits: Array) -> Array:
        return jnp.stack([categorical_mode(x) for x in split(logits)], axis=-1)

    return Distribution(sample, log_prob, entropy, mode)


# -- diagonal Gaussian -------------------------------------------------------------------


def gaussian_sample(rng: Array, p: tuple[Array, Array]) -> Array:
    """(mean [B, A], log_std [B, A]) -> action [B, A] float32, unclipped (the env adapter clips)."""
    mean, log_std = p
    return mean + jnp.exp(log_std) * jax.random.normal(rng, mean.shape, mean.dtype)


def gaussian_log_prob(p: tuple[Array, Array], action: Array) -> Array:
    """Sum over the A independent dimensions -> [B]."""
    mean, log_std = p
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z * z - log_std - 0.5 * _LOG_2PI, axis=-1)


def gaussian_entropy(p: tuple[Array, Array]) -> Array:
    _, log_std = p
    return jnp.sum(log_std + 0.5 * (1.0 + _LOG_2PI), axis=-1)


def gaussian_mode(p: tuple[Array, Array]) -> Array:
    return p[0]


DIAG_GAUSSIAN = Distribution(gaussian_sample, gaussian_log_prob, gaussian_entropy, gaussian_mode)


# -- tanh-squashed Gaussian (SAC) --------------------------------------------------------


def squashed_gaussian_sample(rng: Array, mean: Array, log_std: Array, scale: Array,
                             bias: Array) -> tuple[Array, Array]:
    """``a = bias + scale * tanh(x)``, ``x ~ N(mean, exp(log_std))`` (all ``[B, A]``; scale, bias ``[A]``: the env's
    half-range and centre) -> (action [B, A], log_prob [B]). The density of ``a`` by change of variables:
    ``log N(x) - sum log(scale * (1 - tanh(x)^2))``, with ``log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x))``,
    exact where CleanRL's ``log(scale * (1 - y^2) + 1e-6)`` saturates (|x| > ~4)."""
    x = mean + jnp.exp(log_std) * jax.random.normal(rng, mean.shape, mean.dtype)
    log_det = jnp.log(scale) + 2.0 * (math.log(2.0) - x - jax.nn.softplus(-2.0 * x))
    return bias + scale * jnp.tanh(x), gaussian_log_prob((mean, log_std), x) - jnp.sum(log_det, axis=-1)
