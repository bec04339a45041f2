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
    return _reverse_accumulate(delta, gamma * lam * not_done)


def _reverse_accumulate(delta: Array, decay: Array) -> Array:
    """``acc_t = delta_t + decay_t acc_{t+1}`` over [T, B], ``acc_T = 0`` (GAE's and V-trace's recursion)."""

    def step(acc_next: Array, xs: tuple[Array, Array]) -> tuple[Array, Array]:
        delta_t, decay_t = xs
        acc_t = delta_t + decay_t * acc_next
        return acc_t, acc_t

    _, acc = lax.scan(step, jnp.zeros_like(delta[0]), (delta, decay), reverse=True)
    return acc


def vtrace(
    v_t: Array,
    r_t: Array,
    terminated_t: Array,
    truncated_t: Array,
    log_rho_t: Array,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    lam: float = 1.0,
) -> tuple[Array, Array]:
    """V-trace targets and policy-gradient advantages (Espeholt et al. 2018), time-major.

        vs, pg_adv = vtrace(values, r_t, traj.terminated[1:], traj.truncated[1:], logp_target - logp_behaviour, 0.99)

    Args:
      v_t: [T+1, B] values of rows 0..T under the value function being learnt (row T bootstraps).
      r_t, terminated_t, truncated_t: [T, B] reward and flags of transition t (Trajectory ``[1:]``).
      log_rho_t: [T, B] log importance ratio log pi(a_t|x_t) - log mu(a_t|x_t) of transition t
        (target policy pi, behaviour policy mu).
      gamma: discount; rho_bar, c_bar: clipping thresholds of the ratios in the TD terms (and the
        policy gradient) and in the trace (plain floats; 1.0 is the paper's choice); lam: the
        trace's lambda (the paper's remark 2, rlax's ``lambda_``): ``c_t = lam min(c_bar, rho_t)``.

    Returns:
      (vs [T, B], pg_adv [T, B]) float32: the value targets v_s and
      ``min(rho_bar, rho_t) (r_t + gamma (lam vs_{t+1} + (1 - lam) V(x_{t+1})) - V(x_t))`` (rlax's
      ``vtrace_td_error_and_advantage``; on-policy it is the GAE(lam) advantage).

    With rho_t' = min(rho_bar, rho_t), c_t = lam min(c_bar, rho_t):
    ``vs_t = V(x_t) + rho_t' delta_t + gamma c_t (vs_{t+1} - V(x_{t+1}))`` with
    ``delta_t = r_t + gamma (1 - terminated_t) V(x_{t+1}) - V(x_t)``, and ``vs_T = V(x_T)``. The
    conventions are ``gae``'s: a termination cuts the bootstrap, a truncation bootstraps from the
    final observation's value (row t+1), and either cuts the trace, so in the policy-gradient
    target ``vs_{t+1}`` is replaced by ``V(x_{t+1})`` after a done (row t+1's own v_s belongs to
    the masked reset step). The reset step's outputs are garbage: mask them with ``valid_mask``.
    No gradient is stopped here; losses take ``lax.stop_gradient`` of both outputs.
    """
    v_t = v_t.astype(jnp.float32)
    rho = jnp.exp(log_rho_t.astype(jnp.float32))
    rho_clipped = jnp.minimum(rho_bar, rho)
    c = lam * jnp.minimum(c_bar, rho)
    not_term = 1.0 - terminated_t.astype(jnp.float32)
    not_done = 1.0 - jnp.logical_or(terminated_t, truncated_t).astype(jnp.float32)
    discount = gamma * not_term
    delta = rho_clipped * (r_t.astype(jnp.float32) + discount * v_t[1:] - v_t[:-1])
    acc = _reverse_accumulate(delta, gamma * not_done * c)  # acc_t = vs_t - V(x_t)
    vs = v_t[:-1] + acc
    acc_next = jnp.concatenate([acc[1:], jnp.zeros_like(acc[:1])], axis=0) * not_done
    # rlax's vtrace_td_error_and_advantage: bootstrap from lam vs_{t+1} + (1 - lam) V(x_{t+1}), so on-policy
    # (rho = c = 1) the advantage is GAE(lam) and APPO at lag 0 is PPO
    pg_adv = rho_clipped * (r_t.astype(jnp.float32) + discount * (v_t[1:] + lam * acc_next) - v_t[:-1])
    return vs, pg_adv


def n_step_return(
    r_t: Array,
    terminated_t: Array,
    truncated_t: Array,
    v_bootstrap: Array,
    gamma: float,
) -> Array:
    """n-step bootstrapped return of the first transition of each window, time-major, truncation-aware.

        g = n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, q_next, 0.99)   # [N]

    Args:
      r_t: [n, B] rewards of the window's transitions 0..n-1 (transition j leads to row j+1).
      terminated_t, truncated_t: [n, B] flags of the same transitions.
      v_bootstrap: [B] value of the bootstrap row: the row after the window's first done
        transition k, or after its last (k = n-1) when nothing ends.
      gamma: discount (a plain float).

    Returns:
      [B] float32: ``sum_{j<=k} gamma^j r_j + gamma^(k+1) (1 - terminated_k) v_bootstrap``.

    Transitions after the first done belong to the next episode and are ignored. A truncation
    (time limit) bootstraps from ``v_bootstrap``, the value of the final observation envpool returns
    on the done step; a termination does not. With no flags set this is rlax's
    ``n_step_bootstrapped_returns`` with ``discount_t = gamma``.
    """
    r_t = r_t.astype(jnp.float32)
    done = jnp.logical_or(terminated_t, truncated_t).astype(jnp.float32)
    # alive_j = 1 while no earlier transition of the window ended: transitions 0..k count
    alive = jnp.cumprod(jnp.concatenate([jnp.ones_like(done[:1]), 1.0 - done[:-1]], axis=0), axis=0)
    powers = gamma ** jnp.arange(r_t.shape[0], dtype=jnp.float32)[:, None]
    rewards = jnp.sum(alive * powers * r_t, axis=0)
    steps = jnp.sum(alive, axis=0)  # k + 1
    not_term = 1.0 - jnp.sum(alive * terminated_t.astype(jnp.float32), axis=0)
    return rewards + gamma**steps * not_term * v_bootstrap.astype(jnp.float32)


def signed_hyperbolic(x: Array, eps: float = 1e-3) -> Array:
    """R2D2's value rescaling ``h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x`` (Pohlen et al. 2018)."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def signed_parabolic(x: Array, eps: float = 1e-3) -> Array:
    """The inverse of ``signed_hyperbolic``: ``sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1)``."""
    z = jnp.sqrt(1.0 + 4.0 * eps * (jnp.abs(x) + 1.0 + eps))
    return jnp.sign(x) * (jnp.square((z - 1.0) / (2.0 * eps)) - 1.0)
