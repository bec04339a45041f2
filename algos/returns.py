"""Return / advantage estimators on time-major arrays.

Shape letters: T transitions, B envs. A ``Trajectory`` has T + 1 rows; transition t goes from
row t to row t + 1, so the reward/flags *of transition t* are Trajectory rows 1..T and its
validity is decided by row t (envpool's lazy autoreset: the step after a done is a reset step).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

Array = jax.Array


def valid_mask(terminated: Array, truncated: Array) -> Array:
    """terminated/truncated [T+1, B] (Trajectory rows) -> float32 [T, B].

    1 where transition t starts at a non-done row; 0 for the reset step after a done, whose
    action was ignored by the env and whose reward is 0.
    """
    done = jnp.logical_or(terminated[:-1], truncated[:-1])
    return 1.0 - done.astype(jnp.float32)


def gae(
    v_t: Array,
    r_t: Array,
    terminated_t: Array,
    truncated_t: Array,
    gamma: float,
    lam: float,
) -> Array:
    """Generalised advantage estimation (Schulman et al. 2016), time-major.

    Args:
      v_t: [T+1, B] values of rows 0..T (row T is the bootstrap row).
      r_t: [T, B] reward of transition t (Trajectory ``reward[1:]``).
      terminated_t, truncated_t: [T, B] flags of transition t (Trajectory ``[1:]``).
      gamma, lam: discount and GAE lambda (plain floats).

    Returns:
      advantages [T, B] float32.

    delta_t = r_t + gamma (1 - terminated_t) v_{t+1} - v_t and
    A_t = delta_t + gamma lam (1 - done_t) A_{t+1}. A truncated transition still bootstraps
    from v_{t+1}: envpool returns the final observation on the done step, so v_{t+1} is the
    value of the state where time ran out. Either flag stops the recursion, so the next
    (reset) step never leaks into this episode; the reset step's own advantage is garbage
    and must be masked with ``valid_mask``.
    """
    v_t = v_t.astype(jnp.float32)
    not_term = 1.0 - terminated_t.astype(jnp.float32)
    not_done = 1.0 - jnp.logical_or(terminated_t, truncated_t).astype(jnp.float32)
    delta = r_t.astype(jnp.float32) + gamma * not_term * v_t[1:] - v_t[:-1]
    decay = gamma * lam * not_done

    def step(a_next: Array, xs: tuple[Array, Array]) -> tuple[Array, Array]:
        delta_t, decay_t = xs
        a_t = delta_t + decay_t * a_next
        return a_t, a_t

    _, adv = lax.scan(step, jnp.zeros_like(v_t[0]), (delta, decay), reverse=True)
    return adv
