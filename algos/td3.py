"""TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing, delayed actor and targets, as an ``Algorithm``.

Shape letters: N sampled transitions, n the n-step window, B env rows, A action dimensions, ``*O`` observation shape.

    algo = make_td3(cfg, spec)                                  # cfg.algo: algos.td3_config.TD3Config
    state, metrics, per_sample = algo.update(state, replay_batch)   # per_sample["priority"]: |TD error| [N]
    action, _, _ = algo.act(algo.policy_params(state), obs, {"random": [B], "noise": [B]}, None, key)

CleanRL's ``td3_continuous_action.py`` as one pure ``update`` on a ``ReplayBatch``:

1. Critics: ``y = n_step_return(r, terminated, truncated, min_i Q_i'(s', a'))`` with the target actor's smoothed
   action ``a' = bias + scale * clip(mu'(s') + clip(eps, -noise_clip, noise_clip), -1, 1)``,
   ``eps ~ N(0, policy_noise)`` (``smoothed_target``; noise in half-ranges of the action box), loss
   ``sum_i mean(w * (y - Q_i(s, a))^2)``.
2. Every ``policy_frequency``-th update: one actor step on ``-mean(Q_1(s, mu(s)))``, then the target actor and
   both target critics move ``tau`` of the way (Polyak); in between the actor and all targets stay as they are.

Acting adds ``N(0, noise x scale)`` to the actor's action and clips to the box (``noise``: each row's actor state,
``exploration_noise`` by default). Params ``{"actor", "actor_target", "critic", "critic_target"}``; actors are sent
``{"actor"}``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from algos.base import Algorithm, Metrics, Params
from algos.returns import n_step_return
from algos.td3_config import TD3Config
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


def smoothed_action(u_next: Array, noise: Array, noise_clip: float, scale: Array, bias: Array) -> Array:
    """The target policy's smoothed action in the env's units: ``u_next`` [N, A] the target actor's tanh output,
    ``noise`` [N, A] ``N(0, policy_noise)`` in half-ranges, clipped to ``+- noise_clip``, the sum clipped to the box."""
    return bias + scale * jnp.clip(u_next + jnp.clip(noise, -noise_clip, noise_clip), -1.0, 1.0)


def smoothed_target(q_next: Array, batch: ReplayBatch, gamma: float) -> Array:
    """Clipped double-Q n-step targets [N] from ``q_next`` [2, N], the target critics at the smoothed action."""
    return n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, jnp.min(q_next, axis=0), gamma)


def make_td3(cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """Build TD3 for ``spec`` (continuous actions ``(A,)`` in a finite box) from ``cfg.algo`` (a ``TD3Config``)."""
    a, t = cfg.algo, cfg.trainer
    assert isinstance(a, TD3Config)
    nets = make_networks(a, spec, stochastic=False)
    scale, bias = (jnp.asarray(x) for x in action_bounds(spec))
    gamma, pf, tau = a.gamma, a.policy_frequency, a.tau
    policy_noise, noise_clip = a.policy_noise, a.noise_clip
    critic_tx, schedule = make_optimizer(t.lr, t, cfg.num_updates)
    actor_tx, _ = make_optimizer(a.policy_lr, t, cfg.num_updates // pf)

    def init(rng: Array) -> TwinQState:
        rng, k_actor, k_critic = jax.random.split(rng, 3)
        obs = jnp.zeros((1, *spec.obs_shape), spec.obs_dtype)
        actor = nets.actor.init(k_actor, obs)
        critic = nets.critic.init(k_critic, obs, jnp.zeros((1, *spec.action_shape), jnp.float32))
        copy = lambda tree: jax.tree.map(jnp.copy, tree)  # noqa: E731
        params = {"actor": actor, "actor_target": copy(actor), "critic": critic, "critic_target": copy(critic)}
        return TwinQState(params=params, opt_state={"actor": actor_tx.init(actor), "critic": critic_tx.init(critic)},
                          norm=(), step=jnp.zeros((), jnp.int32), rng=rng,
                          actor_metrics={"actor_loss": jnp.zeros((), jnp.float32)})

    def act(pp: Params, obs: Array, actor_state: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        k_noise, k_random = jax.random.split(rng)
        action = bias + scale * nets.actor.apply(pp["actor"], obs)
        noise = jax.random.normal(k_noise, action.shape) * scale * actor_state["noise"][:, None]
        action = jnp.clip(action + noise, bias - scale, bias + scale)
        random = random_actions(k_random, action.shape, scale, bias)
        return jnp.where(actor_state["random"][:, None] > 0.5, random, action), {}, actor_state

    def act_deterministic(pp: Params, obs: Array, actor_state: Any, first: Array | None,
                          rng: Array) -> tuple[Array, dict, Any]:
        return bias + scale * nets.actor.apply(pp["actor"], obs), {}, actor_state

    def actor_step(params: Params, opt_state: Any, obs: Array) -> tuple[Params, Any, Metrics]:
        """One actor step on ``obs``, then every target network moves towards its online one."""

        def loss_fn(actor: Params) -> Array:
            q = nets.critic.apply(params["critic"], obs, bias + scale * nets.actor.apply(actor, obs))
            return -jnp.mean(q[0])

        loss, grads = jax.value_and_grad(loss_fn)(params["actor"])
        updates, actor_opt = actor_tx.update(grads, opt_state["actor"], params["actor"])
        actor = optax.apply_updates(params["actor"], updates)
        params = {"actor": actor, "critic": params["critic"],
                  "actor_target": polyak(actor, params["actor_target"], tau),
                  "critic_target": polyak(params["critic"], params["critic_target"], tau)}
        return params, {**opt_state, "actor": actor_opt}, {"actor_loss": loss}

    def update(state: TwinQState, batch: ReplayBatch) -> tuple[TwinQState, Metrics, dict[str, Array]]:
        params, opt_state = state.params, state.opt_state
        rng, k_noise = jax.random.split(state.rng)
        u_next = nets.actor.apply(params["actor_target"], batch.next_obs)
        noise = jax.random.normal(k_noise, u_next.shape) * policy_noise
        q_next = nets.critic.apply(params["critic_target"], batch.next_obs,
                                   smoothed_action(u_next, noise, noise_clip, scale, bias))
        y = lax.stop_gradient(smoothed_target(q_next, batch, gamma))
        (loss, aux), grads = jax.value_and_grad(critic_loss, has_aux=True)(params["critic"], nets.critic, batch, y)
        updates, critic_opt = critic_tx.update(grads, opt_state["critic"], params["critic"])
        params = {**params, "critic": optax.apply_updates(params["critic"], updates)}
        opt_state = {**opt_state, "critic": critic_opt}
        step = state.step + 1
        params, opt_state, actor_metrics = lax.cond(
            step % pf == 0, lambda: actor_step(params, opt_state, batch.obs),
            lambda: (params, opt_state, state.actor_metrics))
        metrics = {**critic_metrics(loss, aux, y, grads), **actor_metrics,
                   "lr": jnp.asarray(schedule(state.step), jnp.float32)}
        new_state = TwinQState(params=params, opt_state=opt_state, norm=state.norm, step=step, rng=rng,
                               actor_metrics=actor_metrics)
        return new_state, metrics, {"priority": jnp.mean(jnp.abs(aux["td"]), axis=0)}

    return Algorithm(
        init=init,
        policy_params=lambda state: {"actor": state.params["actor"]},
        initial_actor_state=lambda b: {"random": np.zeros((b,), np.float32),
                                       "noise": np.full((b,), a.exploration_noise, np.float32)},
        act=act,
        act_deterministic=act_deterministic,
        update=update,
        extras_spec={},
        consumes="replay",
        exploration=exploration_values(a.learning_starts, noise=a.exploration_noise),
    )
