"""DQN (Mnih et al. 2015) with double Q-learning, a dueling head and n-step returns, as an ``Algorithm``.

Shape letters: N sampled transitions, n the n-step window, A actions, ``*O`` observation shape.

    algo = make_dqn(cfg, spec)                       # cfg.algo: srljax.config.DQNConfig
    state, metrics, per_sample = algo.update(state, replay_batch)   # per_sample["priority"]: |TD error| [N]
    action, _, actor_state = algo.act(algo.policy_params(state), obs, {"epsilon": eps [B]}, None, key)

The update consumes ``ReplayBatch`` es (``consumes="replay"``), not segments. The target is the
n-step return of ``algos.returns.n_step_return`` bootstrapped with the target network's value of
the bootstrap row's action chosen by the online network (double Q) or its own max; the loss is
``mean(weight * huber(target - Q(s, a)))`` (or squared error), weights being the replay's
importance weights. The target network lives next to the online one in ``TrainState.params``
(``{"online", "target"}``) and is refreshed inside ``update`` every ``target_update_every`` steps
(copied, or Polyak-averaged with ``tau < 1``); published params are the online network only.

Exploration is the actor's, not the params': each env row's epsilon is its actor state
(``{"epsilon": [B]}``), so the single-process loop anneals it (``linear_epsilon``) and an Ape-X
actor i of N holds its own constant ``apex_epsilon(i, N)``, whatever params it is sent.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from algos.base import Algorithm, Metrics, Params, TrainState
from algos.networks import MASKED, make_q_network
from algos.returns import n_step_return
from srljax.config import DQNConfig, Experiment
from srljax.types import EnvSpec, ReplayBatch

Array = jax.Array
ApplyFn = Callable[[Params, Array], Array]
Bootstrap = Callable[[Array, "Array | None", ReplayBatch, float], Array]
"""``(q_next_target [N, A], q_next_online [N, A] or None, batch, gamma) -> targets [N]`` (``q_target``)."""


def linear_epsilon(env_steps: int, start: float, end: float, duration: float) -> float:
    """Epsilon after ``env_steps``: linear from ``start`` to ``end`` over ``duration`` env steps, then ``end``
    (CleanRL's ``linear_schedule``)."""
    return float(end + (start - end) * max(0.0, 1.0 - env_steps / max(duration, 1.0)))


def apex_epsilon(index: int, num_actors: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's constant epsilon of actor ``index`` of ``num_actors``: ``base ** (1 + alpha * i / (N - 1))``."""
    if not 0 <= index < num_actors:
        raise ValueError(f"actor index {index} must be in [0, {num_actors})")
    return base ** (1.0 + alpha * index / max(num_actors - 1, 1))


Q_EXTRAS = {"q_taken": ((), "float32"), "q_max": ((), "float32")}
"""``act``'s extras per row: Q of the action taken and the greedy value, for an Ape-X actor's initial priorities."""


def initial_priorities(q_taken: np.ndarray, q_max: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
                       truncated: np.ndarray, n_step: int, gamma: float) -> np.ndarray:
    """Ape-X's initial priorities, computed by the actor from its own Q-values (numpy, no target network).

        prio = initial_priorities(q_taken, q_max, reward, terminated, truncated, n_step=3, gamma=0.99)  # [R - n]

    Rows ``[R]`` of one env stream in order (row t: the obs, the reward and flags that led to it, and
    ``q_taken`` = Q(obs_t, a_t), ``q_max`` = max_a Q(obs_t, a)). Row t's priority is
    ``|G_t - Q(s_t, a_t)|`` with ``G_t`` the n-step return over rows t+1..t+n as ``n_step_return`` cuts
    it (a termination does not bootstrap, a time limit bootstraps from the final observation's
    ``q_max``); a done row (its transition is envpool's autoreset step) gets 0. Only the first
    ``R - n`` rows have their whole window.
    """
    r = len(reward) - n_step
    if r <= 0:
        return np.zeros(0, np.float32)
    window = np.arange(r)[:, None] + 1 + np.arange(n_step)  # [r, n] rows t+1..t+n
    term, trunc = terminated[window], truncated[window]
    done = term | trunc
    first_done = np.where(done.any(axis=1), done.argmax(axis=1), n_step - 1)  # [r]
    alive = np.arange(n_step)[None, :] <= first_done[:, None]
    g = (reward[window].astype(np.float64) * gamma ** np.arange(n_step) * alive).sum(axis=1)
    boot = np.arange(r) + 1 + first_done
    g += np.where(terminated[boot], 0.0, gamma ** (first_done + 1) * q_max[boot])
    prio = np.abs(g - q_taken[:r])
    return np.where(terminated[:r] | truncated[:r], 0.0, prio).astype(np.float32)


def q_target(q_next_target: Array, q_next_online: Array | None, batch: ReplayBatch, gamma: float) -> Array:
    """n-step targets [N]: the bootstrap row's value under the target network, of the online network's
    greedy action when ``q_next_online`` [N, A] is given (double Q), else of its own greedy action."""
    if q_next_online is None:
        v_boot = jnp.max(q_next_target, axis=-1)
    else:
        best = jnp.argmax(q_next_online, axis=-1)
        v_boot = jnp.take_along_axis(q_next_target, best[:, None], axis=-1)[:, 0]
    return n_step_return(batch.reward.T, batch.terminated.T, batch.truncated.T, v_boot, gamma)


def dqn_loss(online: Params, target: Params, apply_fn: ApplyFn, batch: ReplayBatch, *, gamma: float,
             double_q: bool = True, loss: str = "huber", bootstrap: Bootstrap = q_target) -> tuple[Array, dict[str, Array]]:
    """Weighted TD loss on a replay batch -> (loss, aux) with aux ``td`` [N], ``q_mean``, ``target_mean``;
    ``bootstrap`` makes the targets (``q_target``'s signature; a DQN variant passes its own)."""
    q = apply_fn(online, batch.obs)
    q_sa = jnp.take_along_axis(q, batch.action.astype(jnp.int32)[:, None], axis=-1)[:, 0]
    q_next_online = lax.stop_gradient(apply_fn(online, batch.next_obs)) if double_q else None
    y = lax.stop_gradient(bootstrap(apply_fn(target, batch.next_obs), q_next_online, batch, gamma))
    td = y - q_sa
    per_sample = optax.huber_loss(td, delta=1.0) if loss == "huber" else jnp.square(td)
    value = jnp.mean(batch.weight.astype(jnp.float32) * per_sample)
    return value, {"td": lax.stop_gradient(td), "q_mean": jnp.mean(lax.stop_gradient(q_sa)), "target_mean": jnp.mean(y)}


def q_optimizer(cfg: Experiment) -> tuple[optax.GradientTransformation, optax.Schedule]:
    """Adam with ``trainer.lr`` (annealed to 0 over the run if ``trainer.anneal_lr``), clipped to ``max_grad_norm``."""
    t = cfg.trainer
    schedule = optax.linear_schedule(t.lr, 0.0, cfg.num_updates) if t.anneal_lr else optax.constant_schedule(t.lr)
    adam = optax.adam(schedule, eps=t.adam_eps)
    return (optax.chain(optax.clip_by_global_norm(t.max_grad_norm), adam) if t.max_grad_norm > 0 else adam), schedule


def epsilon_exploration(cfg: Experiment) -> Callable[[int, int | None, int], dict[str, float]]:
    """``Algorithm.exploration`` of an epsilon-greedy config: one process, epsilon linear over the run's first
    ``exploration_fraction``; Ape-X actor i of N: its constant ``apex_epsilon``."""
    a = cfg.algo
    decay_steps = a.exploration_fraction * cfg.total_env_steps

    def exploration(env_steps: int, actor: int | None, num_actors: int) -> dict[str, float]:
        if actor is None:
            return {"epsilon": linear_epsilon(env_steps, a.eps_start, a.eps_end, decay_steps)}
        return {"epsilon": apex_epsilon(actor, num_actors)}

    return exploration


def epsilon_greedy(q: Array, epsilon: Array, rng: Array, masked: bool = False) -> Array:
    """Actions [B] int32: greedy in ``q`` [B, A], uniformly random where a draw falls below ``epsilon`` [B]; with
    ``masked`` (the network masks illegal actions, ``algos.networks.MASKED``) random among the legal ones."""
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    k_action, k_explore = jax.random.split(rng)
    if masked:
        random = jax.random.categorical(k_action, jnp.where(q > MASKED / 2, 0.0, -jnp.inf)).astype(jnp.int32)
    else:
        random = jax.random.randint(k_action, greedy.shape, 0, q.shape[-1], jnp.int32)
    return jnp.where(jax.random.uniform(k_explore, greedy.shape) < epsilon, random, greedy)


def apply_q_gradients(state: TrainState, grads: Params, tx: optax.GradientTransformation, every: int,
                      tau: float) -> TrainState:
    """One optimiser step on the online network, then the target refresh every ``every`` steps (Polyak ``tau``)."""
    online, target = state.params["online"], state.params["target"]
    updates, opt_state = tx.update(grads, state.opt_state, online)
    online = optax.apply_updates(online, updates)
    step = state.step + 1
    refresh = (step % every) == 0
    target = jax.tree.map(lambda o, g: jnp.where(refresh, tau * o + (1.0 - tau) * g, g), online, target)
    return TrainState(params={"online": online, "target": target}, opt_state=opt_state, norm=state.norm,
                      step=step, rng=state.rng)


def make_dqn(cfg: Experiment, spec: EnvSpec, bootstrap: Bootstrap | None = None) -> Algorithm:
    """Build DQN for ``spec`` (discrete actions) from ``cfg.algo`` (a ``DQNConfig``) and ``cfg.trainer``;
    ``bootstrap``: a variant's own targets instead of ``q_target`` (``examples/expected_sarsa.py``)."""
    bootstrap = bootstrap or q_target
    a = cfg.algo
    assert isinstance(a, DQNConfig)
    net = make_q_network(a, spec)
    gamma, double_q, loss_kind, n_step = a.gamma, a.double_q, a.loss, a.n_step
    tx, schedule = q_optimizer(cfg)

    def init(rng: Array) -> TrainState:
        rng, key = jax.random.split(rng)
        online = jax.jit(net.init)(key, jnp.zeros((1, *spec.obs_shape), spec.obs_dtype))
        return TrainState(params={"online": online, "target": jax.tree.map(jnp.copy, online)},
                          opt_state=tx.init(online), norm=(), step=jnp.zeros((), jnp.int32), rng=rng)

    def act(pp: Params, obs: Array, actor_state: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        q = net.apply(pp["params"], obs)
        action = epsilon_greedy(q, actor_state["epsilon"], rng, masked=bool(net.legal))
        # what an Ape-X actor needs for its initial priorities (``initial_priorities``)
        extras = {"q_taken": jnp.take_along_axis(q, action[:, None], axis=-1)[:, 0].astype(jnp.float32),
                  "q_max": jnp.max(q, axis=-1).astype(jnp.float32)}
        return action, extras, actor_state

    grad_fn = jax.value_and_grad(
        lambda p, target, batch: dqn_loss(p, target, net.apply, batch, gamma=gamma, double_q=double_q, loss=loss_kind,
                                          bootstrap=bootstrap),
        has_aux=True)

    def update(state: TrainState, batch: ReplayBatch) -> tuple[TrainState, Metrics, dict[str, Array]]:
        (loss, aux), grads = grad_fn(state.params["online"], state.params["target"], batch)
        new_state = apply_q_gradients(state, grads, tx, a.target_update_every, a.tau)
        metrics = {"loss": loss, "q_mean": aux["q_mean"], "target_mean": aux["target_mean"],
                   "td_abs_mean": jnp.mean(jnp.abs(aux["td"])), "grad_norm": optax.tree.norm(grads),
                   "lr": jnp.asarray(schedule(state.step), jnp.float32)}
        return new_state, metrics, {"priority": jnp.abs(aux["td"])}

    return Algorithm(
        init=init,
        policy_params=lambda state: {"params": state.params["online"]},
        initial_actor_state=lambda b: {"epsilon": np.full((b,), a.eps_start, np.float32)},
        act=act,
        act_deterministic=lambda pp, obs, s, first, rng: act(pp, obs, {"epsilon": jnp.zeros(obs.shape[:1])}, first, rng),
        update=update,
        extras_spec=Q_EXTRAS,
        consumes="replay",
        exploration=epsilon_exploration(cfg),
        initial_priorities=lambda rows: initial_priorities(rows["q_taken"], rows["q_max"], rows["reward"],
                                                           rows["terminated"], rows["truncated"], n_step, gamma),
        priority_lookahead=n_step,
    )
