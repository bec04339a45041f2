"""IMPALA (Espeholt et al. 2018): actor-critic on V-trace targets, as an ``Algorithm``.

Shape letters: T transitions, B env columns in the batch, b = B / M columns per minibatch,
M ``trainer.num_minibatches``, ``*O`` observation shape, ``*A`` action shape.

The loss follows Cleanba's ``cleanba_impala.py`` (itself rlax's IMPALA): each term is *summed*
over the valid transitions of a minibatch, not averaged, so the optimiser settings transfer from
Cleanba (RMSProp with eps 0.01 outside the square root, gradient norm clip 40)::

    loss = -sum(mask * log pi(a_t|x_t) * pg_adv_t) + vf_coef * 0.5 * sum(mask * (vs_t - V(x_t))^2)
           - ent_coef * sum(mask * H[pi(.|x_t)])

``vs`` and ``pg_adv`` come from ``algos.returns.vtrace`` on the learner's own values and
``log rho_t = log pi(a_t|x_t) - log mu(a_t|x_t)``, where mu's log-probabilities are the ones the
actor stored in the segment's extras (``"logp"``), whatever params version it acted with; both
are constants of the gradient. One pass per batch: M optimiser steps, one per group of whole env
columns (a column's V-trace needs its whole segment).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from jax import lax

from algos import actor_critic
from algos.actor_critic import ActorCriticPolicy
from algos.base import Algorithm, Metrics, Params, TrainState
from algos.distributions import Distribution
from algos.normalizers import rms_update
from algos.parallel import split_samples
from algos.ppo import explained_variance
from algos.recurrent import Recurrent, episode_starts, segment_carry
from algos.returns import valid_mask, vtrace
from srljax.config import Experiment, IMPALAConfig
from srljax.types import EnvSpec, Trajectory

Array = jax.Array
ApplyFn = Callable[[Params, Array], tuple[Any, Array]]


def impala_loss(
    params: Params,
    apply_fn: ApplyFn,
    mb: dict[str, Array],
    *,
    dist: Distribution,
    gamma: float,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
) -> tuple[Array, dict[str, Array]]:
    """IMPALA's loss on one minibatch of whole env columns, summed over valid transitions.

    ``mb``: obs [T+1, b, *O] (already normalised if enabled; row T bootstraps), action [T, b, *A],
    logp [T, b] (behaviour policy's), reward, terminated, truncated [T, b] (of transition t, i.e.
    Trajectory rows 1..T), mask [T, b] (``valid_mask``).
    ``apply_fn(params, obs) -> (policy params, value)`` over any leading dims (recurrent: ``obs`` is
    ``{obs, first [T+1, b], carry [1, b, H] x 2}`` and the network unrolls over T+1 from the carry).
    Returns (loss, aux): aux policy_loss, value_loss (the summed terms, before coefficients),
    entropy (mean per valid transition), rho_mean, rho_clipfrac, and vs [T, b] for diagnostics.
    """
    mask = mb["mask"].astype(jnp.float32)
    n = jnp.maximum(jnp.sum(mask), 1.0)
    pi, values = apply_fn(params, mb["obs"])  # [T+1, b, ...]
    pi_t = jax.tree.map(lambda x: x[:-1], pi)
    logp = dist.log_prob(pi_t, mb["action"])
    log_rho = lax.stop_gradient(logp) - mb["logp"]
    vs, pg_adv = vtrace(lax.stop_gradient(values), mb["reward"], mb["terminated"], mb["truncated"], log_rho,
                        gamma, rho_bar, c_bar)

    def total(x: Array) -> Array:
        return jnp.sum(jnp.where(mask > 0, x, 0.0))  # where(): masked rows cannot leak even as NaN

    pg_loss = -total(logp * pg_adv)
    v_loss = 0.5 * total(jnp.square(vs - values[:-1]))
    entropy = total(dist.entropy(pi_t))
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy
    rho = jnp.exp(log_rho)
    aux = {
        "policy_loss": pg_loss,
        "value_loss": v_loss,
        "entropy": entropy / n,
        "rho_mean": total(rho) / n,
        "rho_clipfrac": total((rho > rho_bar).astype(jnp.float32)) / n,
        "vs": vs,
        "value": lax.stop_gradient(values[:-1]),
    }
    return loss, aux


def make_impala(cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """Build IMPALA for ``spec`` from ``cfg.algo`` (an ``IMPALAConfig``) and ``cfg.trainer``."""
    a, t = cfg.algo, cfg.trainer
    assert isinstance(a, IMPALAConfig)
    ac = ActorCriticPolicy.build(a, spec, value_extra=False)
    rec, prep = ac.rec, ac.prep
    num_mb, norm_obs = t.num_minibatches, a.normalize_obs
    if t.anneal_lr:
        schedule = optax.linear_schedule(t.lr, 0.0, cfg.num_updates * num_mb)
    else:
        schedule = optax.constant_schedule(t.lr)
    if a.optimizer == "rmsprop":  # torch.optim.RMSprop: eps outside the square root (Cleanba)
        opt = optax.rmsprop(schedule, decay=a.rmsprop_decay, eps=a.rmsprop_eps, eps_in_sqrt=False)
    else:
        opt = optax.adam(schedule, eps=t.adam_eps)
    tx = optax.chain(optax.clip_by_global_norm(t.max_grad_norm), opt)
    loss_fn = functools.partial(impala_loss, apply_fn=ac.net.apply if rec is None else _unroll_apply(rec), dist=ac.dist,
                                gamma=a.gamma, rho_bar=a.rho_bar, c_bar=a.c_bar, ent_coef=a.ent_coef, vf_coef=a.vf_coef)
    sgd_step = actor_critic.sgd_step(jax.value_and_grad(lambda p, mb: loss_fn(p, mb=mb), has_aux=True), tx)

    def update(state: TrainState, traj: Trajectory) -> tuple[TrainState, Metrics]:
        mask = valid_mask(traj.terminated, traj.truncated)  # [T, B]
        batch = {
            "obs": prep(traj.obs, state.norm.obs),  # all T+1 rows: row T bootstraps
            "action": traj.action[:-1],
            "logp": traj.extras["logp"][:-1].astype(jnp.float32),
            "reward": traj.reward[1:].astype(jnp.float32),
            "terminated": traj.terminated[1:],
            "truncated": traj.truncated[1:],
            "mask": mask,
        }
        if rec is not None:  # each column unrolls from the carry its row 0 was acted with
            carry = jax.tree.map(lambda x: x[None], segment_carry(traj.extras))  # [1, B, H]: columns on axis 1
            batch["obs"] = {"obs": batch["obs"], "first": episode_starts(traj.terminated, traj.truncated), "carry": carry}
        width = mask.shape[1] // num_mb
        carry, stats = (state.params, state.opt_state), []
        for i in range(num_mb):  # M is small (Cleanba: 4); whole columns, in order
            mb = jax.tree.map(lambda x: x[:, i * width:(i + 1) * width], batch)
            carry, aux = sgd_step(carry, split_samples(mb, axis=1))
            stats.append(aux)
        params, opt_state = carry
        norm = state.norm
        if norm_obs:
            norm = norm.replace(obs=rms_update(norm.obs, traj.obs[:-1], mask))
        diag = {k: jnp.concatenate([s[k] for s in stats], axis=1) for k in ("vs", "value")}
        metrics = {k: jnp.mean(jnp.stack([s[k] for s in stats])) for k in stats[0] if k not in diag}
        metrics["explained_variance"] = explained_variance(diag["value"].reshape(-1), diag["vs"].reshape(-1),
                                                           mask.reshape(-1))
        metrics["lr"] = jnp.asarray(schedule(state.step * num_mb), jnp.float32)
        new_state = TrainState(params=params, opt_state=opt_state, norm=norm, step=state.step + 1, rng=state.rng)
        return new_state, metrics

    return Algorithm(
        init=lambda rng: ac.init_state(rng, tx, reward_norm=False),
        policy_params=ac.policy_params,
        initial_actor_state=ac.initial_actor_state,
        act=ac.act,
        act_deterministic=ac.act_deterministic,
        action_probs=ac.action_probs,
        update=update,
        extras_spec=ac.extras_spec,
    )


def _unroll_apply(rec: Recurrent) -> ApplyFn:
    """``apply_fn`` for ``impala_loss`` on a recurrent network: ``x = {obs [T+1, b, *O], first [T+1, b],
    carry ([1, b, H], [1, b, H])}`` -> (policy params, value [T+1, b]), unrolled from each column's carry."""

    def apply(params: Params, x: Any) -> tuple[Any, Array]:
        return rec.unroll(params, jax.tree.map(lambda c: c[0], x["carry"]), x["obs"], x["first"])

    return apply
