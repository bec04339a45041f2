"""R2D2 (Kapturowski et al. 2019): recurrent Q-learning on stored sequences with burn-in, as an ``Algorithm``.

Shape letters: N sequences, R = ``sequence_length + n_step`` rows per sequence, U = ``sequence_length - burn_in``
trained rows, n the n-step window, A actions, H ``lstm_size``, ``*O`` observation shape.

    algo = make_r2d2(cfg, spec)                               # cfg.algo: algos.r2d2_config.R2D2Config
    state, metrics, per_sample = algo.update(state, batch)    # batch: SequenceBatch [N, R]; per_sample["priority"] [N]
    action, extras, actor_state = algo.act(params, obs, actor_state, first, key)   # extras: the carry acted with

**Acting.** The actor state holds each env row's epsilon and LSTM carry ``lstm_c``/``lstm_h`` [B, H]; the carry
is zeroed where ``first`` (an episode starts) and the carry each row was acted with goes out as its extras,
which the replay stores with the row (``R2D2Config.replay_extras``).

**Update** (``sequence_loss``): online and target networks unroll from the sequence's stored carry over the first
``burn_in`` rows (no gradient), then over the remaining rows, resetting where an episode starts inside the
sequence (``algos.recurrent.episode_starts``). Each trained row t (rows ``burn_in .. sequence_length - 1``) has
the target ``h(G_t)``, ``G_t`` the n-step return over rows t+1..t+n as ``algos.returns.n_step_return`` cuts it at
a done, bootstrapped with ``h^-1`` of the target network's Q at the bootstrap row of the online network's greedy
action there (double Q), ``h`` the value rescaling (``signed_hyperbolic``; the identity with
``value_rescaling=false``). Done rows (their transition is envpool's autoreset step) are not trained. The loss
is the importance-weighted mean over sequences of each sequence's mean squared (or Huber) error over its
trained rows; the priority is ``eta max |td| + (1 - eta) mean |td|``. Target refresh and optimiser: DQN's.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from algos.base import Algorithm, Metrics, Params, TrainState
from algos.dqn import apply_q_gradients, epsilon_exploration, epsilon_greedy, q_optimizer
from algos.networks import RecurrentQNetwork, make_recurrent_q_network, reset_carry
from algos.r2d2_config import R2D2Config
from algos.recurrent import carry_extras_spec, episode_starts
from algos.returns import n_step_return, signed_hyperbolic, signed_parabolic
from srljax.config import Experiment
from srljax.types import EnvSpec, SequenceBatch

Array = jax.Array


def sequence_targets(q_online: Array, q_target: Array, reward: Array, terminated: Array, truncated: Array, *,
                     trained: int, n_step: int, gamma: float, double_q: bool = True,
                     rescale_eps: float | None = 1e-3) -> Array:
    """n-step double-Q targets of the first ``trained`` rows, time-major.

        y = sequence_targets(q_online, q_target, reward, terminated, truncated, trained=U, n_step=5, gamma=0.997)

    Args:
      q_online, q_target: [U + n, N, A] Q-values of rows 0..U+n-1 (online: picks the bootstrap action when
        ``double_q``; target: values it).
      reward, terminated, truncated: [U + n, N] the rows' ``TimeStep`` fields (row t's led to it from t-1).
      rescale_eps: the value rescaling's epsilon (``signed_hyperbolic``), None for plain targets.

    Returns:
      [U, N] float32: row t's target ``h(G_t)`` with ``G_t`` over rows t+1..t+n, cut at the first done
      (``n_step_return``; the bootstrap row is the row after the window's first done transition, a
      truncation bootstrapping from the final observation, a termination not at all).
    """
    window = jnp.arange(trained)[:, None] + 1 + jnp.arange(n_step)  # [U, n] rows t+1..t+n
    r_w, term_w, trunc_w = reward[window], terminated[window], truncated[window]  # [U, n, N]
    done = jnp.logical_or(term_w, trunc_w)
    first_done = jnp.where(done.any(axis=1), jnp.argmax(done, axis=1), n_step - 1)  # [U, N]
    boot = jnp.arange(trained)[:, None] + 1 + first_done  # [U, N]
    take = lambda q: jnp.take_along_axis(q, boot[:, :, None], axis=0)  # noqa: E731  [U, N, A]
    q_boot_target = take(q_target)
    chooser = take(q_online) if double_q else q_boot_target
    best = jnp.argmax(chooser, axis=-1)
    v_boot = jnp.take_along_axis(q_boot_target, best[..., None], axis=-1)[..., 0]  # [U, N]
    if rescale_eps is not None:
        v_boot = signed_parabolic(v_boot, rescale_eps)
    n = r_w.shape[-1]
    flat = lambda x: jnp.moveaxis(x, 1, 0).reshape(n_step, trained * n)  # noqa: E731  [n, U*N]
    g = n_step_return(flat(r_w), flat(term_w), flat(trunc_w), v_boot.reshape(-1), gamma).reshape(trained, n)
    return signed_hyperbolic(g, rescale_eps) if rescale_eps is not None else g


def _unroll(net: RecurrentQNetwork, params: Params, carry: Any, obs: Array, first: Array, burn_in: int) -> Array:
    """Q-values [R - burn_in, N, A] of the rows after the burn-in; the burn-in only moves the carry (no gradient)."""
    if burn_in:
        carry, _ = net.apply(params, carry, obs[:burn_in], first[:burn_in])
        carry = lax.stop_gradient(carry)
    _, q = net.apply(params, carry, obs[burn_in:], first[burn_in:])
    return q


def sequence_loss(online: Params, target: Params, net: RecurrentQNetwork, batch: SequenceBatch, cfg: R2D2Config
                  ) -> tuple[Array, dict[str, Array]]:
    """R2D2's loss on a ``SequenceBatch`` [N, R] -> (loss, aux) with aux ``priority`` [N], ``q_mean``,
    ``target_mean``, ``td_abs_mean`` (see the module docstring)."""
    burn, trained = cfg.burn_in, cfg.sequence_length - cfg.burn_in
    time_major = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    obs, action = time_major(batch.obs), time_major(batch.action).astype(jnp.int32)
    reward, term, trunc = time_major(batch.reward), time_major(batch.terminated), time_major(batch.truncated)
    first = episode_starts(term, trunc)  # row 0's carry was stored after its reset
    carry = (batch.state["lstm_c"].astype(jnp.float32), batch.state["lstm_h"].astype(jnp.float32))
    q = _unroll(net, online, carry, obs, first, burn)  # [U + n, N, A]
    q_tgt = lax.stop_gradient(_unroll(net, target, carry, obs, first, burn))
    y = lax.stop_gradient(sequence_targets(
        lax.stop_gradient(q), q_tgt, reward[burn:], term[burn:], trunc[burn:], trained=trained, n_step=cfg.n_step,
        gamma=cfg.gamma, double_q=cfg.double_q, rescale_eps=cfg.rescale_eps if cfg.value_rescaling else None))
    q_sa = jnp.take_along_axis(q[:trained], action[burn: burn + trained, :, None], axis=-1)[..., 0]  # [U, N]
    td = y - q_sa
    valid = 1.0 - jnp.logical_or(term, trunc)[burn: burn + trained].astype(jnp.float32)  # done rows: not trained
    count = jnp.maximum(valid.sum(axis=0), 1.0)
    per_row = optax.huber_loss(td, delta=1.0) if cfg.loss == "huber" else 0.5 * jnp.square(td)
    per_sequence = (per_row * valid).sum(axis=0) / count
    value = jnp.mean(batch.weight.astype(jnp.float32) * per_sequence)
    abs_td = lax.stop_gradient(jnp.abs(td)) * valid
    priority = cfg.priority_eta * abs_td.max(axis=0) + (1.0 - cfg.priority_eta) * abs_td.sum(axis=0) / count
    mean = lambda x: (x * valid).sum() / jnp.maximum(valid.sum(), 1.0)  # noqa: E731
    return value, {"priority": priority, "q_mean": mean(lax.stop_gradient(q_sa)), "target_mean": mean(y),
                   "td_abs_mean": mean(abs_td)}


def make_r2d2(cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """Build R2D2 for ``spec`` (discrete actions) from ``cfg.algo`` (an ``R2D2Config``) and ``cfg.trainer``."""
    a = cfg.algo
    assert isinstance(a, R2D2Config)
    net = make_recurrent_q_network(a, spec)
    tx, schedule = q_optimizer(cfg)

    def init(rng: Array) -> TrainState:
        rng, key = jax.random.split(rng)
        obs = jnp.zeros((1, 1, *spec.obs_shape), spec.obs_dtype)
        online = jax.jit(net.init)(key, net.initial_carry(1), obs, jnp.zeros((1, 1), bool))
        return TrainState(params={"online": online, "target": jax.tree.map(jnp.copy, online)},
                          opt_state=tx.init(online), norm=(), step=jnp.zeros((), jnp.int32), rng=rng)

    def initial_actor_state(b: int) -> dict[str, Any]:
        zeros = np.zeros((b, a.lstm_size), np.float32)
        return {"epsilon": np.full((b,), a.eps_start, np.float32), "lstm_c": zeros, "lstm_h": zeros.copy()}

    def act(pp: Params, obs: Array, actor_state: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        carry = (actor_state["lstm_c"], actor_state["lstm_h"])
        if first is not None:
            carry = reset_carry(carry, first)
        carry_out, q = net.apply(pp["params"], carry, obs[None], jnp.zeros((1, obs.shape[0]), bool))
        action = epsilon_greedy(q[0], actor_state["epsilon"], rng, masked=bool(net.legal))
        extras = {"lstm_c": carry[0], "lstm_h": carry[1]}  # the carry this row was acted with: stored in the replay
        return action, extras, {"epsilon": actor_state["epsilon"], "lstm_c": carry_out[0], "lstm_h": carry_out[1]}

    def act_greedy(pp: Params, obs: Array, actor_state: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        return act(pp, obs, {**actor_state, "epsilon": jnp.zeros(obs.shape[:1])}, first, rng)

    grad_fn = jax.value_and_grad(lambda p, target, batch: sequence_loss(p, target, net, batch, a), has_aux=True)

    def update(state: TrainState, batch: SequenceBatch) -> tuple[TrainState, Metrics, dict[str, Array]]:
        (loss, aux), grads = grad_fn(state.params["online"], state.params["target"], batch)
        new_state = apply_q_gradients(state, grads, tx, a.target_update_every, a.tau)
        metrics = {"loss": loss, "q_mean": aux["q_mean"], "target_mean": aux["target_mean"],
                   "td_abs_mean": aux["td_abs_mean"], "priority_mean": jnp.mean(aux["priority"]),
                   "grad_norm": optax.tree.norm(grads), "lr": jnp.asarray(schedule(state.step), jnp.float32)}
        return new_state, metrics, {"priority": aux["priority"]}

    return Algorithm(
        init=init,
        policy_params=lambda state: {"params": state.params["online"]},
        initial_actor_state=initial_actor_state,
        act=act,
        act_deterministic=act_greedy,
        update=update,
        extras_spec=carry_extras_spec(a.lstm_size),
        consumes="replay",
        exploration=epsilon_exploration(cfg),
    )
