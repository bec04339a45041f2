"""Soft Actor-Critic (Haarnoja et al. 2018) with twin critics and automatic entropy tuning, as an ``Algorithm``.

Shape letters: N sampled transitions, n the n-step window, B env rows, A action dimensions, ``*O`` observation shape.

    algo = make_sac(cfg, spec)                                  # cfg.algo: algos.sac_config.SACConfig
    state, metrics, per_sample = algo.update(state, replay_batch)   # per_sample["priority"]: |TD error| [N]
    action, _, _ = algo.act(algo.policy_params(state), obs, {"random": [B]}, None, key)

CleanRL's ``sac_continuous_action.py`` step by step, as one pure ``update`` on a ``ReplayBatch``:

1. Critics: ``y = n_step_return(r, terminated, truncated, min_i Q_i'(s', a') - alpha * log pi(a' | s'))`` with
   ``a' ~ pi(. | s')`` (``soft_target``: a termination does not bootstrap, a time limit does, from the final
   observation), loss ``sum_i mean(w * (y - Q_i(s, a))^2)``.
2. Every ``policy_frequency``-th update, ``policy_frequency`` actor steps on the batch's observations (CleanRL's
   delayed-but-compensated actor): ``mean(alpha * log pi(a | s) - min_i Q_i(s, a))``, ``a ~ pi(. | s)``
   reparameterised; with ``autotune`` each is followed by a temperature step on
   ``mean(-exp(log_alpha) * (log pi + target_entropy))`` (the actor step's log-probs, not a second sample).
3. Every ``target_update_every`` updates the target critics move ``tau`` of the way (Polyak).

The state's params are ``{"actor", "critic", "critic_target", "log_alpha"}``; actors are sent ``{"actor"}``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from algos.base import Algorithm, Metrics, Params
from algos.distributions import squashed_gaussian_sample
from algos.returns import n_step_return
from algos.sac_config import SACConfig
from algos.twin_q import (
    TwinQState,
    action_bounds,
    critic_loss,
    critic_metrics,
    exploration_values,
    make_networks,
    make_optimizer,
    polyak,
    random_actions,
)
from srljax.config import Experiment
from srljax.types import EnvSpec, ReplayBatch

Array = jax.Array


def soft_target(q_next: Array, next_log_prob: Array, alpha: Array, batch: ReplayBatch, gamma: float) -> Array:
    """Soft n-step targets [N]: ``q_next`` [2, N] the target critics at ``(s', a')``, ``next_log_prob`` [N] of
    ``a' ~ pi(. | s')``, bootstrap ``min(q_next) - alpha * next_log_prob``."""
    v_next = jnp.min(q_next, axis=0) - alpha * next_log_prob
    return n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, v_next, gamma)


def make_sac(cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """Build SAC for ``spec`` (continuous actions ``(A,)`` in a finite box) from ``cfg.algo`` (a ``SACConfig``)."""
    a, t = cfg.algo, cfg.trainer
    assert isinstance(a, SACConfig)
    nets = make_networks(a, spec, stochastic=True)
    scale, bias = (jnp.asarray(x) for x in action_bounds(spec))
    target_entropy = a.target_entropy_per_dim * int(spec.action_shape[0])
    gamma, pf, tau, every = a.gamma, a.policy_frequency, a.tau, a.target_update_every
    critic_tx, schedule = make_optimizer(t.lr, t, cfg.num_updates)
    actor_tx, _ = make_optimizer(a.policy_lr, t, cfg.num_updates)
    alpha_tx = optax.adam(t.lr, eps=t.adam_eps)  # CleanRL: the critics' learning rate, not annealed, not clipped

    def sample(actor: Params, obs: Array, key: Array) -> tuple[Array, Array]:
        mean, log_std = nets.actor.apply(actor, obs)
        return squashed_gaussian_sample(key, mean, log_std, scale, bias)

    def init(rng: Array) -> TwinQState:
        rng, k_actor, k_critic = jax.random.split(rng, 3)
        obs = jnp.zeros((1, *spec.obs_shape), spec.obs_dtype)
        actor = nets.actor.init(k_actor, obs)
        critic = nets.critic.init(k_critic, obs, jnp.zeros((1, *spec.action_shape), jnp.float32))
        log_alpha = jnp.zeros((), jnp.float32) if a.autotune else jnp.log(jnp.asarray(a.alpha, jnp.float32))
        params = {"actor": actor, "critic": critic, "critic_target": jax.tree.map(jnp.copy, critic),
                  "log_alpha": log_alpha}
        zero = jnp.zeros((), jnp.float32)
        return TwinQState(params=params, opt_state={"actor": actor_tx.init(actor), "critic": critic_tx.init(critic),
                                                    "alpha": alpha_tx.init(log_alpha)},
                          norm=(), step=jnp.zeros((), jnp.int32), rng=rng,
                          actor_metrics={"actor_loss": zero, "alpha_loss": zero, "entropy": zero})

    def act(pp: Params, obs: Array, actor_state: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        k_policy, k_random = jax.random.split(rng)
        action, _ = sample(pp["actor"], obs, k_policy)
        random = random_actions(k_random, action.shape, scale, bias)
        return jnp.where(actor_state["random"][:, None] > 0.5, random, action), {}, actor_state

    def act_deterministic(pp: Params, obs: Array, actor_state: Any, first: Array | None,
                          rng: Array) -> tuple[Array, dict, Any]:
        mean, _ = nets.actor.apply(pp["actor"], obs)
        return bias + scale * jnp.tanh(mean), {}, actor_state

    def actor_loss(actor: Params, critic: Params, alpha: Array, obs: Array, key: Array) -> tuple[Array, Array]:
        action, log_prob = sample(actor, obs, key)
        q = jnp.min(nets.critic.apply(critic, obs, action), axis=0)
        return jnp.mean(alpha * log_prob - q), log_prob

    def actor_steps(params: Params, opt_state: Any, obs: Array, key: Array) -> tuple[Params, Any, Metrics]:
        """``policy_frequency`` actor (and temperature) steps on ``obs``."""

        def one(i: Array, carry: Any) -> Any:
            actor, log_alpha, opt_actor, opt_alpha, _ = carry
            (loss, log_prob), grads = jax.value_and_grad(actor_loss, has_aux=True)(
                actor, params["critic"], jnp.exp(log_alpha), obs, jax.random.fold_in(key, i))
            updates, opt_actor = actor_tx.update(grads, opt_actor, actor)
            actor = optax.apply_updates(actor, updates)
            log_prob = lax.stop_gradient(log_prob)
            alpha_loss, alpha_grad = jax.value_and_grad(
                lambda la: jnp.mean(-jnp.exp(la) * (log_prob + target_entropy)))(log_alpha)
            if a.autotune:
                updates, opt_alpha = alpha_tx.update(alpha_grad, opt_alpha, log_alpha)
                log_alpha = optax.apply_updates(log_alpha, updates)
            metrics = {"actor_loss": loss, "alpha_loss": alpha_loss, "entropy": -jnp.mean(log_prob)}
            return actor, log_alpha, opt_actor, opt_alpha, metrics

        zero = jnp.zeros((), jnp.float32)
        carry = (params["actor"], params["log_alpha"], opt_state["actor"], opt_state["alpha"],
                 {"actor_loss": zero, "alpha_loss": zero, "entropy": zero})
        actor, log_alpha, opt_actor, opt_alpha, metrics = lax.fori_loop(0, pf, one, carry)
        return ({**params, "actor": actor, "log_alpha": log_alpha},
                {**opt_state, "actor": opt_actor, "alpha": opt_alpha}, metrics)

    def update(state: TwinQState, batch: ReplayBatch) -> tuple[TwinQState, Metrics, dict[str, Array]]:
        params, opt_state = state.params, state.opt_state
        rng, k_next, k_actor = jax.random.split(state.rng, 3)
        alpha = jnp.exp(params["log_alpha"])
        next_action, next_log_prob = sample(params["actor"], batch.next_obs, k_next)
        q_next = nets.critic.apply(params["critic_target"], batch.next_obs, next_action)
        y = lax.stop_gradient(soft_target(q_next, next_log_prob, alpha, batch, gamma))
        (loss, aux), grads = jax.value_and_grad(critic_loss, has_aux=True)(params["critic"], nets.critic, batch, y)
        updates, critic_opt = critic_tx.update(grads, opt_state["critic"], params["critic"])
        params = {**params, "critic": optax.apply_updates(params["critic"], updates)}
        opt_state = {**opt_state, "critic": critic_opt}
        step = state.step + 1
        params, opt_state, actor_metrics = lax.cond(
            step % pf == 0, lambda: actor_steps(params, opt_state, batch.obs, k_actor),
            lambda: (params, opt_state, state.actor_metrics))
        refresh = step % every == 0
        target = jax.tree.map(lambda new, old: jnp.where(refresh, new, old),
                              polyak(params["critic"], params["critic_target"], tau), params["critic_target"])
        params = {**params, "critic_target": target}
        metrics = {**critic_metrics(loss, aux, y, grads), **actor_metrics, "alpha": jnp.exp(params["log_alpha"]),
                   "lr": jnp.asarray(schedule(state.step), jnp.float32)}
        new_state = TwinQState(params=params, opt_state=opt_state, norm=state.norm, step=step, rng=rng,
                               actor_metrics=actor_metrics)
        return new_state, metrics, {"priority": jnp.mean(jnp.abs(aux["td"]), axis=0)}

    return Algorithm(
        init=init,
        policy_params=lambda state: {"actor": state.params["actor"]},
        initial_actor_state=lambda b: {"random": np.zeros((b,), np.float32)},
        act=act,
        act_deterministic=act_deterministic,
        update=update,
        extras_spec={},
        consumes="replay",
        exploration=exploration_values(a.learning_starts),
    )
