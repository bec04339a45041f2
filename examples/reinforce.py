"""A user-written algorithm: REINFORCE with a learnt value baseline, plugged in through the seam.

Nothing in ``srljax/`` or ``algos/`` knows about this file. It provides the two things the seam asks
for (``docs/architecture.md``, "Adding your own algorithm"):

1. a frozen config dataclass with ``name`` (its own ``"module:Class"`` path, so the JSON round trip
   and ``algo=examples.reinforce:ReinforceConfig`` on the command line find it), ``factory`` (the
   ``"module:function"`` ``algos.make`` calls), ``num_steps`` and ``gamma``; optionally
   ``problems(cfg)`` for its own config errors;
2. ``make_reinforce(cfg, spec) -> algos.Algorithm``: pure ``init``/``policy_params``/``act``/``update``.

    python -m launch.local examples/cartpole_reinforce.py

Shape letters: T transitions, B envs, ``*O`` observation shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import optax

from algos.base import Algorithm, TrainState
from algos.distributions import CATEGORICAL, DIAG_GAUSSIAN
from algos.networks import ActorCritic
from algos.normalizers import init_norm
from algos.returns import gae, valid_mask

Array = jax.Array


@dataclass(frozen=True)
class ReinforceConfig:
    name: str = "examples.reinforce:ReinforceConfig"
    factory: str = "examples.reinforce:make_reinforce"
    num_steps: int = 64
    """segment length T; returns bootstrap from the value at the segment's end."""
    gamma: float = 0.99
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    hidden_sizes: tuple[int, ...] = (64, 64)

    def problems(self, cfg: Any) -> list[str]:
        out = []
        if not 0.0 < self.gamma <= 1.0:
            out.append(f"algo.gamma={self.gamma} must be in (0, 1]")
        if cfg.trainer.update_epochs != 1 or cfg.trainer.num_minibatches != 1:
            out.append("REINFORCE takes one gradient step per batch: set trainer.update_epochs=1 and "
                       "trainer.num_minibatches=1")
        return out


def reinforce_loss(params: Any, net: ActorCritic, dist: Any, batch: dict[str, Array], vf_coef: float,
                   ent_coef: float) -> tuple[Array, dict[str, Array]]:
    """-E[log pi(a|x) (G - V(x))] + vf_coef * 0.5 E[(G - V(x))^2] - ent_coef * E[H], over valid [T, B]."""
    pi, value = net.apply(params, batch["obs"])
    mask = batch["mask"]
    n = jnp.maximum(jnp.sum(mask), 1.0)
    adv = jax.lax.stop_gradient(batch["ret"] - value)
    policy_loss = -jnp.sum(mask * dist.log_prob(pi, batch["action"]) * adv) / n
    value_loss = 0.5 * jnp.sum(mask * jnp.square(batch["ret"] - value)) / n
    entropy = jnp.sum(mask * dist.entropy(pi)) / n
    loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
    return loss, {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy}


def make_reinforce(cfg: Any, spec: Any) -> Algorithm:
    """``algo.factory``: called by ``algos.make(cfg, spec)`` with the whole ``Experiment``."""
    a, t = cfg.algo, cfg.trainer
    discrete = spec.action_kind == "discrete"
    net = ActorCritic(action_kind=spec.action_kind, obs_ndim=len(spec.obs_shape), hidden_sizes=tuple(a.hidden_sizes),
                      action_dim=spec.num_actions if discrete else int(spec.action_shape[0]))
    dist = CATEGORICAL if discrete else DIAG_GAUSSIAN
    tx = optax.chain(optax.clip_by_global_norm(t.max_grad_norm), optax.adam(t.lr, eps=t.adam_eps))
    grad_fn = jax.value_and_grad(reinforce_loss, has_aux=True)

    def init(rng: Array) -> TrainState:
        rng, key = jax.random.split(rng)
        params = net.init(key, jnp.zeros((1, *spec.obs_shape), spec.obs_dtype))
        # no normalisation here, but TrainState carries a NormState: the empty one
        norm = init_norm(spec.obs_shape, obs=False, reward=False)
        return TrainState(params=params, opt_state=tx.init(params), norm=norm, step=jnp.zeros((), jnp.int32), rng=rng)

    def act(params: Any, obs: Array, actor_state: Any, first: Array, rng: Array) -> tuple[Array, dict, Any]:
        pi, value = net.apply(params, obs)
        return dist.sample(rng, pi), {"value": value}, actor_state

    def update(state: TrainState, traj: Any) -> tuple[TrainState, dict[str, Array]]:
        values = traj.extras["value"].astype(jnp.float32)  # [T+1, B]; row T bootstraps the return
        # lambda = 1: G_t - V(x_t), the discounted return to the episode's end (or the segment's,
        # bootstrapped), with gae's handling of terminations, truncations and the reset step
        ret = gae(values, traj.reward[1:], traj.terminated[1:], traj.truncated[1:], a.gamma, 1.0) + values[:-1]
        batch = {"obs": traj.obs[:-1], "action": traj.action[:-1], "ret": ret,
                 "mask": valid_mask(traj.terminated, traj.truncated)}
        (loss, aux), grads = grad_fn(state.params, net, dist, batch, a.vf_coef, a.ent_coef)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        new = state.replace(params=optax.apply_updates(state.params, updates), opt_state=opt_state,
                            step=state.step + 1)
        return new, {"loss": loss, **aux}

    return Algorithm(init=init, policy_params=lambda state: state.params, initial_actor_state=lambda batch: (),
                     act=act, update=update, extras_spec={"value": ((), "float32")})
