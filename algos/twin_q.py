"""What SAC and TD3 share (``algos/sac.py``, ``algos/td3.py``): an actor, twin critics, targets, random starts.

Shape letters: N sampled transitions, B env rows, A action dimensions, ``*O`` observation shape.

    nets = make_networks(cfg.algo, spec, stochastic=True)    # nets.actor, nets.critic (twin: Q [2, N])
    scale, bias = action_bounds(spec)                         # the env's half-range and centre, [A] each
    q = nets.critic.apply(critic_params, obs, action)         # [2, N]
    y = n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, v_next [N], gamma)

Actors act in ``[-1, 1]`` (``tanh``) and ``bias + scale * u`` maps that onto the env's bounds; critics see actions in
the env's units, as stored in the replay. Twin critics are one ``nn.vmap`` of a critic over two parameter sets
(one batched matmul per layer instead of two). Exploration is the actor's (``Algorithm.exploration``): every env
row carries ``random`` (1: a uniformly random action, before ``learning_starts``, CleanRL) and, for TD3, ``noise``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import numpy as np
import optax

from algos.base import Params, TrainState
from algos.networks import MLP, apply_torso, check_fit, torso_name, torso_options
from srljax.types import EnvSpec, ReplayBatch

Array = jax.Array


@flax.struct.dataclass
class TwinQState(TrainState):
    """``TrainState`` plus the delayed actor step's last metrics: every update reports them (CleanRL logs the last
    actor loss likewise), so a log line that falls between two actor steps is not blank."""

    actor_metrics: dict[str, Array]


class Critic(nn.Module):
    """``(obs [B, *O], action [B, A]) -> Q [B]``: an MLP on the flattened observation and the action side by side
    (``torso="mlp"``), or a CNN / a user's torso on the observation, then the MLP on its features and the action."""

    obs_ndim: int
    torso: str = "mlp"
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    pixel_scale: float = 1.0 / 255.0
    channels_last: bool = False

    @nn.compact
    def __call__(self, obs: Array, action: Array) -> Array:
        lead = obs.shape[: obs.ndim - self.obs_ndim]
        if self.torso == "mlp":
            h = obs.reshape((*lead, -1)).astype(jnp.float32)
        else:
            h = apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name="torso",
                            pixel_scale=self.pixel_scale, channels_last=self.channels_last)
        h = MLP(self.hidden_sizes, self.activation, name="mlp")(jnp.concatenate([h, action.astype(jnp.float32)], -1))
        return nn.Dense(1, name="q_head")(h)[..., 0]


TwinCritic = nn.vmap(Critic, variable_axes={"params": 0}, split_rngs={"params": True}, in_axes=None, out_axes=0,
                     axis_size=2)
"""``Critic`` twice, parameters stacked on a leading axis of 2: ``(obs, action) -> Q [2, B]``."""


class Actor(nn.Module):
    """``obs [B, *O] ->`` ``(mean, log_std)`` ``[B, A]`` each, log std squashed into ``[log_std_min, log_std_max]``
    (``stochastic``, SAC), or ``tanh(mu)`` ``[B, A]`` in ``[-1, 1]`` (TD3). Torso as ``Critic``'s."""

    action_dim: int
    obs_ndim: int
    stochastic: bool
    torso: str = "mlp"
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    pixel_scale: float = 1.0 / 255.0
    channels_last: bool = False
    log_std_min: float = -5.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, obs: Array) -> Any:
        h = apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name="torso", pixel_scale=self.pixel_scale,
                        channels_last=self.channels_last, hidden_sizes=self.hidden_sizes, activation=self.activation)
        if self.torso != "mlp":
            h = MLP(self.hidden_sizes, self.activation, name="mlp")(h)
        if not self.stochastic:
            return jnp.tanh(nn.Dense(self.action_dim, name="mu")(h))
        mean = nn.Dense(self.action_dim, name="mean")(h)
        log_std = jnp.tanh(nn.Dense(self.action_dim, name="log_std")(h))
        return mean, self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (log_std + 1.0)


@dataclass(frozen=True)
class Networks:
    actor: Actor
    critic: nn.Module  # TwinCritic


def make_networks(cfg: Any, spec: EnvSpec, stochastic: bool) -> Networks:
    """The actor and twin critics a ``TwinQConfig`` asks for, sized for ``spec`` (continuous actions ``(A,)``)."""
    check_fit(cfg, spec)
    shared = dict(obs_ndim=len(spec.obs_shape), torso=torso_name(cfg, spec), torso_options=torso_options(cfg),
                  hidden_sizes=tuple(cfg.hidden_sizes), activation=cfg.activation,
                  channels_last=spec.channels == "last")
    bounds = dict(log_std_min=cfg.log_std_min, log_std_max=cfg.log_std_max) if stochastic else {}
    return Networks(Actor(action_dim=int(spec.action_shape[0]), stochastic=stochastic, **shared, **bounds),
                    TwinCritic(**shared))


def action_bounds(spec: EnvSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, bias)`` ``[A]`` float32: the half-range and centre of the env's action box (``a = bias + scale * u``
    for ``u`` in ``[-1, 1]``)."""
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    if low.shape != tuple(spec.action_shape) or not np.all(np.isfinite(low) & np.isfinite(high) & (high > low)):
        raise ValueError(f"{spec.id}: SAC and TD3 need finite action bounds low < high for each of the "
                         f"{spec.action_shape} action dimensions; this env has low={spec.action_low}, "
                         f"high={spec.action_high}")
    return (high - low) / 2.0, (high + low) / 2.0


def random_actions(key: Array, shape: tuple[int, ...], scale: Array, bias: Array) -> Array:
    """Uniform actions ``[B, A]`` in the env's box."""
    return bias + scale * jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0)


def polyak(online: Params, target: Params, tau: float) -> Params:
    """``tau * online + (1 - tau) * target``, leaf by leaf."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def make_optimizer(lr: float, trainer: Any, steps: int) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam with ``lr`` (annealed to 0 over ``steps`` optimiser steps if ``trainer.anneal_lr``), ``trainer.adam_eps``,
    gradients clipped to ``trainer.max_grad_norm`` unless it is 0."""
    schedule = optax.linear_schedule(lr, 0.0, max(steps, 1)) if trainer.anneal_lr else optax.constant_schedule(lr)
    adam = optax.adam(schedule, eps=trainer.adam_eps)
    return (optax.chain(optax.clip_by_global_norm(trainer.max_grad_norm), adam) if trainer.max_grad_norm > 0
            else adam), schedule


def critic_loss(params: Params, critic: nn.Module, batch: ReplayBatch, y: Array) -> tuple[Array, dict[str, Array]]:
    """Both critics' weighted squared TD errors against the targets ``y`` [N], summed over the twins (CleanRL's
    ``qf1_loss + qf2_loss``); aux: ``q`` [2, N] and ``td`` [2, N]."""
    q = critic.apply(params, batch.obs, batch.action)
    td = y[None] - q
    return jnp.sum(jnp.mean(batch.weight.astype(jnp.float32) * jnp.square(td), axis=-1)), {"q": q, "td": td}


def critic_metrics(loss: Array, aux: dict[str, Array], y: Array, grads: Params) -> dict[str, Array]:
    """What every update reports about the critics."""
    q = aux["q"]
    return {"qf_loss": loss / 2.0, "q1_mean": jnp.mean(q[0]), "q2_mean": jnp.mean(q[1]), "target_mean": jnp.mean(y),
            "critic_grad_norm": optax.tree.norm(grads)}


def exploration_values(learning_starts: int, **rest: float) -> Any:
    """``Algorithm.exploration``: ``random`` 1 for the run's first ``learning_starts`` env steps (the single-process
    loop's count; an Ape-X actor's reckoning of the trial's, ``srljax/system/acting/apex_actor.py``), else 0, plus ``rest``
    (TD3's ``noise``) for every actor."""

    def exploration(env_steps: int, actor: int | None, num_actors: int) -> dict[str, float]:
        return {"random": float(env_steps < learning_starts), **rest}

    return exploration
