"""VDN and QMIX (value decomposition) as an ``Algorithm`` over sequences of a multi-agent JAX env.

Shape letters: T transitions of a sequence, M sampled sequences, B envs, N agents, F packed row features
(``EnvSpec.agent_row()``), A actions per agent, H the GRU's width, S the mixer's state.

    algo = make_qmix(cfg, spec)                     # cfg.algo: QMixConfig or VDNConfig (algos/qmix_config.py)
    q, h = algo.q_values(pp, obs [B, N, F], h [B, N, H])                 # one row, masked Q [B, N, A]
    action, _, actor_state = algo.act(pp, obs, {"epsilon": [B], "h": [B, N, H]}, first [B], key)
    state, metrics = algo.update(state, Sequences)                      # one gradient step on [T+1, M] rows
    state, metrics, per_sample = algo.update(state, SequenceBatch)      # a worker graph's: [M, T+1] from a replay shard

The agent network (``AgentQ``: Dense + ReLU, a GRU cell, Dense to A) is shared by the agents, each seeing its own view
and (``agent_id``) a one-hot of its index; its GRU state is the actor state, zeroed on an episode's first row.
Illegal actions (``spec.action_mask``: the rows' legal-action flags) get ``MASKED``: never the greedy action, never
drawn by exploration (uniform over the legal ones), never the bootstrap action. ``Q_tot`` mixes the agents' chosen
Q-values: VDN sums them (``vdn_mix``); QMIX's ``QMixer`` is monotonic in each (non-negative hypernetwork weights) and
conditioned on the global state (``mixer_state``).

The loss (``sequence_td``): the stored sequence ``[T+1, M]`` is re-unrolled from its stored GRU state by the online
and the target networks (resets where an episode starts inside it, ``algos.recurrent.episode_starts``); transition t
(row t -> t+1) has the target ``r_{t+1} + gamma (1 - terminated_{t+1}) Q_tot^target(s_{t+1}, a*)`` with ``a*`` each
agent's legal argmax of the online network (double Q); a transition out of a done row (envpool's autoreset step) is
masked out; a time limit bootstraps from the final observation, which is the done row itself. Mean squared (or
Huber) error over the kept transitions; target network refreshed every ``target_update_every`` gradient steps
(``algos.dqn.apply_q_gradients``).

In a worker graph (``layout.mode=distributed``) the algorithm is a replay algorithm to Ape-X's workers: ``act``'s
extras are the GRU state each row was acted with (``h`` ``[B, N, H]``, stored with the row by the replay buffer
worker), ``exploration`` gives every actor the run's epsilon schedule at the trial's env steps, and ``update`` takes a
replay shard's ``SequenceBatch`` (batch-major, the start row's ``h`` in ``state``; each sequence weighted by its
importance weight) and returns each sequence's mean ``|td|`` as its priority.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from algos.base import Algorithm, Metrics, Params, TrainState
from algos.dqn import apply_q_gradients, linear_epsilon
from algos.networks import MASKED
from algos.recurrent import episode_starts
from srljax.config import Experiment
from srljax.types import EnvSpec, SequenceBatch

Array = jax.Array


class Sequences(NamedTuple):
    """Stored sequences: leaves ``[T+1, M, ...]`` (``action`` ``[T, M, N]``, ``h0`` ``[M, N, H]``). Row t holds the
    obs and the reward / flags of the transition that led to it (``TimeStep``'s convention); ``action[t]`` was taken at
    row t; ``h0`` is the GRU state row 0 was acted with (its reset already applied)."""

    obs: Array  # [T+1, M, N, F]
    action: Array  # [T, M, N] int32
    reward: Array  # [T+1, M] team reward
    terminated: Array  # [T+1, M]
    truncated: Array  # [T+1, M]
    h0: Array  # [M, N, H]


class AgentQ(nn.Module):
    """``(h [..., H], x [..., D]) -> (h' [..., H], q [..., A])``: Dense + ReLU, a GRU cell, Dense."""

    num_actions: int
    hidden_size: int

    @nn.compact
    def __call__(self, h: Array, x: Array) -> tuple[Array, Array]:
        x = nn.relu(nn.Dense(self.hidden_size, name="embed")(x))
        h, y = nn.GRUCell(self.hidden_size, name="gru")(h, x)
        return h, nn.Dense(self.num_actions, name="q")(y)


class QMixer(nn.Module):
    """``(q [..., N], state [..., S]) -> Q_tot [...]``, monotonic in each ``q`` (Rashid et al. 2018): hypernetworks
    of the state give the weights (absolute values: non-negative) and biases of an ELU layer and a linear output."""

    embed: int
    hypernet_hidden: int
    out_scale: float = 0.01
    """orthogonal init scale of the layers that emit the mixing weights and biases: a raw global state (SMAX's world
    state holds positions up to ~32) through default-scaled layers would start Q_tot in the tens, far from the
    targets (JaxMARL's mixer starts every layer at 0.001)."""

    @nn.compact
    def __call__(self, q: Array, state: Array) -> Array:
        n = q.shape[-1]
        out = lambda features, name: nn.Dense(features, kernel_init=nn.initializers.orthogonal(self.out_scale),  # noqa: E731
                                              bias_init=nn.initializers.zeros, name=name)

        def hyper(features: int, name: str) -> Array:
            x = nn.relu(nn.Dense(self.hypernet_hidden, name=f"{name}_0")(state))
            return out(features, f"{name}_1")(x)

        w1 = jnp.abs(hyper(n * self.embed, "w1")).reshape(*q.shape[:-1], n, self.embed)
        b1 = out(self.embed, "b1")(state)
        w2 = jnp.abs(hyper(self.embed, "w2"))
        b2 = out(1, "b2_1")(nn.relu(nn.Dense(self.embed, name="b2_0")(state)))[..., 0]
        hidden = nn.elu(jnp.einsum("...n,...ne->...e", q, w1) + b1)
        return jnp.sum(hidden * w2, axis=-1) + b2


def vdn_mix(q: Array) -> Array:
    """VDN: ``Q_tot = sum_i q_i`` over the last (agent) axis."""
    return jnp.sum(q, axis=-1)


def agent_inputs(spec: EnvSpec, obs: Array, agent_id: bool) -> Array:
    """Packed rows ``[..., N, F]`` -> each agent's network input ``[..., N, V (+ N)]``: its view (and its one-hot)."""
    view = obs[..., spec.agent_row()["view"]].astype(jnp.float32)
    if not agent_id:
        return view
    n = spec.num_agents
    return jnp.concatenate([view, jnp.broadcast_to(jnp.eye(n, dtype=jnp.float32), (*obs.shape[:-2], n, n))], axis=-1)


def legal_actions(spec: EnvSpec, obs: Array) -> Array:
    """``[..., N, A]`` bool: the rows' legal-action flags, or all True for an env without them."""
    if not spec.action_mask:
        return jnp.ones((*obs.shape[:-1], spec.num_actions), bool)
    return obs[..., spec.agent_row()["mask"]] > 0.5


def mixer_state(spec: EnvSpec, obs: Array) -> Array:
    """``[..., S]``: the global state the mixer is conditioned on: the env's (the same in every agent's row; agent
    0's), else every agent's view concatenated."""
    row = spec.agent_row()
    if spec.state_size:
        return obs[..., 0, row["state"]].astype(jnp.float32)
    view = obs[..., row["view"]].astype(jnp.float32)
    return view.reshape(*view.shape[:-2], -1)


def epsilon_greedy(q: Array, legal: Array, epsilon: Array, key: Array) -> Array:
    """Actions ``[B, N]``: each agent's legal argmax of ``q [B, N, A]``, a uniform legal action where a draw falls
    below its env's ``epsilon [B]``."""
    masked = jnp.where(legal, q, MASKED)
    greedy = jnp.argmax(masked, axis=-1)
    k_random, k_explore = jax.random.split(key)
    random = jax.random.categorical(k_random, jnp.where(legal, 0.0, -jnp.inf))
    explore = jax.random.uniform(k_explore, greedy.shape) < epsilon[:, None]
    return jnp.where(explore, random, greedy).astype(jnp.int32)


def double_q_pick(q_online: Array, q_target: Array, legal: Array) -> Array:
    """``[..., N]``: the target network's Q of each agent's legal argmax under the online network (double Q)."""
    best = jnp.argmax(jnp.where(legal, q_online, MASKED), axis=-1)
    return jnp.take_along_axis(q_target, best[..., None], axis=-1)[..., 0]


def td_errors(q_tot: Array, q_tot_next: Array, reward: Array, terminated: Array, gamma: float) -> Array:
    """``y - Q_tot`` with ``y = reward + gamma (1 - terminated) Q_tot_next`` (the target held constant)."""
    y = reward + gamma * (1.0 - terminated.astype(jnp.float32)) * lax.stop_gradient(q_tot_next)
    return y - q_tot


def sequence_td(q_online: Array, q_target: Array, batch: Sequences, legal: Array, mix_online: Callable[[Array], Array],
                mix_target: Callable[[Array], Array], gamma: float, reward_scale: float = 1.0) -> tuple[Array, Array]:
    """TD errors and their mask, both ``[T, M]``, from both networks' Q-values ``[T+1, M, N, A]`` on the sequences.

    ``mix_online(q [T, M, N]) -> [T, M]`` mixes rows 0..T-1 (the taken actions' Q), ``mix_target`` rows 1..T."""
    q_taken = jnp.take_along_axis(q_online[:-1], batch.action[..., None].astype(jnp.int32), axis=-1)[..., 0]
    q_next = double_q_pick(lax.stop_gradient(q_online[1:]), q_target[1:], legal[1:])
    td = td_errors(mix_online(q_taken), mix_target(q_next), reward_scale * batch.reward[1:], batch.terminated[1:], gamma)
    valid = ~(batch.terminated[:-1] | batch.truncated[:-1])  # out of a done row: envpool's autoreset step
    return td, valid


def sequences_of(batch: SequenceBatch) -> Sequences:
    """A replay shard's ``SequenceBatch`` (batch-major ``[M, T+1, ...]``, the start row's GRU state in ``state["h"]``)
    as ``Sequences`` (time-major ``[T+1, M, ...]``; the last row's action is not part of a transition)."""
    tm = lambda x: jnp.swapaxes(x, 0, 1)  # noqa: E731
    return Sequences(obs=tm(batch.obs), action=tm(batch.action)[:-1], reward=tm(batch.reward),
                     terminated=tm(batch.terminated), truncated=tm(batch.truncated),
                     h0=batch.state["h"].astype(jnp.float32))


@dataclass(frozen=True)
class QMixAlgorithm(Algorithm):
    """``Algorithm`` plus what the sequence program (``srljax/learning/anakin_qmix.py``) needs."""

    hidden_size: int = 0
    epsilon: Callable[[Array], Array] | None = None
    """``epsilon(env_steps) -> []``: the exploration schedule, traced inside the program."""
    learning_starts: int = 0
    batch_size: int = 32
    gradient_steps: int = 1
    """per iteration (``trainer.update_epochs``)."""
    q_values: Callable[[Params, Array, Array], tuple[Array, Array]] | None = None
    """``(policy_params, obs [B, N, F], h [B, N, H]) -> (masked q [B, N, A], h')``."""


def make_qmix(cfg: Experiment, spec: EnvSpec) -> QMixAlgorithm:
    """Build VDN or QMIX (``cfg.algo.mixer``) for ``spec`` (the agent axis, discrete actions)."""
    a, t = cfg.algo, cfg.trainer
    if spec.action_kind != "discrete" or spec.num_agents < 1 or len(spec.obs_shape) != 2:
        raise ValueError(f"algo={a.name} needs a multi-agent env with discrete actions and packed agent rows [N, F] "
                         f"(envs/multi_agent.py); {spec.id} has {spec.action_kind} actions and obs {spec.obs_shape}")
    n, num_actions, hidden = spec.num_agents, spec.num_actions, a.hidden_size
    net = AgentQ(num_actions, hidden)
    mixer = QMixer(a.mixer_embed, a.hypernet_hidden) if a.mixer == "qmix" else None
    graph = cfg.layout.mode == "distributed"  # Ape-X's workers: an update is one gradient step (one sampled batch)
    grad_steps = cfg.num_updates * (1 if graph else t.update_epochs)  # the learning rate anneals over the run's
    schedule = optax.linear_schedule(t.lr, 0.0, grad_steps) if t.anneal_lr else optax.constant_schedule(t.lr)
    adam = optax.adam(schedule, eps=t.adam_eps)
    tx = optax.chain(optax.clip_by_global_norm(t.max_grad_norm), adam) if t.max_grad_norm > 0 else adam
    gamma, scale, huber = a.gamma, a.reward_scale, a.loss == "huber"
    decay = max(a.exploration_fraction * cfg.total_env_steps, 1.0)

    def init(rng: Array) -> TrainState:
        rng, k_agent, k_mix = jax.random.split(rng, 3)
        obs = jnp.zeros((1, *spec.obs_shape), jnp.float32)
        online = {"agent": net.init(k_agent, jnp.zeros((1, n, hidden)), agent_inputs(spec, obs, a.agent_id))}
        if mixer is not None:
            online["mixer"] = mixer.init(k_mix, jnp.zeros((1, n)), mixer_state(spec, obs))
        return TrainState(params={"online": online, "target": jax.tree.map(jnp.copy, online)},
                          opt_state=tx.init(online), norm=(), step=jnp.zeros((), jnp.int32), rng=rng)

    def q_values(pp: Params, obs: Array, h: Array) -> tuple[Array, Array]:
        h, q = net.apply(pp["agent"], h, agent_inputs(spec, obs, a.agent_id))
        return jnp.where(legal_actions(spec, obs), q, MASKED), h

    def reset(h: Array, first: Array | None) -> Array:
        return h if first is None else jnp.where(first[:, None, None], 0.0, h)

    def act(pp: Params, obs: Array, actor_state: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        h0 = reset(actor_state["h"], first)
        q, h = q_values(pp, obs, h0)
        action = epsilon_greedy(q, legal_actions(spec, obs), actor_state["epsilon"], rng)
        return action, {"h": h0}, {**actor_state, "h": h}  # extras: the state this row was acted with

    def unroll(agent: Params, batch: Sequences) -> Array:
        """``[T+1, M, N, A]`` raw Q-values, the GRU reset where an episode starts inside the sequence."""
        first = episode_starts(batch.terminated, batch.truncated)
        x = agent_inputs(spec, batch.obs, a.agent_id)

        def step(h: Array, inp: tuple[Array, Array]) -> tuple[Array, Array]:
            x_t, first_t = inp
            h, q = net.apply(agent, jnp.where(first_t[:, None, None], 0.0, h), x_t)
            return h, q

        return lax.scan(step, batch.h0, (x, first))[1]

    def mix(params: Params, q: Array, state: Array) -> Array:
        return vdn_mix(q) if mixer is None else mixer.apply(params["mixer"], q, state)

    def loss_fn(online: Params, target: Params, batch: Sequences, weight: Array | None = None
                ) -> tuple[Array, dict[str, Array]]:
        """``weight [M]``: each sequence's importance weight (a replay shard's batch); None: 1."""
        q_online, q_target = unroll(online["agent"], batch), lax.stop_gradient(unroll(target["agent"], batch))
        state = mixer_state(spec, batch.obs)
        td, valid = sequence_td(q_online, q_target, batch, legal_actions(spec, batch.obs),
                                lambda q: mix(online, q, state[:-1]), lambda q: mix(target, q, state[1:]),
                                gamma, scale)
        per = optax.huber_loss(td, delta=1.0) if huber else jnp.square(td)
        w = valid.astype(jnp.float32)
        count = jnp.maximum(jnp.sum(w), 1.0)
        weighted = w if weight is None else w * weight[None, :].astype(jnp.float32)
        q_taken = jnp.take_along_axis(q_online[:-1], batch.action[..., None].astype(jnp.int32), axis=-1)[..., 0]
        abs_td = lax.stop_gradient(jnp.abs(td)) * w
        return jnp.sum(weighted * per) / count, {
            "td_abs_mean": jnp.sum(abs_td) / count,
            "q_mean": jnp.sum(w[..., None] * lax.stop_gradient(q_taken)) / (count * n),
            "priority": jnp.sum(abs_td, axis=0) / jnp.maximum(jnp.sum(w, axis=0), 1.0)}

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def update(state: TrainState, batch: Sequences) -> tuple[TrainState, Metrics]:
        (loss, aux), grads = grad_fn(state.params["online"], state.params["target"], batch)
        new_state = apply_q_gradients(state, grads, tx, a.target_update_every, a.tau)
        aux = {k: v for k, v in aux.items() if k != "priority"}
        return new_state, {"loss": loss, **aux, "grad_norm": optax.tree.norm(grads),
                           "lr": jnp.asarray(schedule(state.step), jnp.float32)}

    def update_sampled(state: TrainState, batch: SequenceBatch) -> tuple[TrainState, Metrics, dict[str, Array]]:
        """A replay shard's ``SequenceBatch`` ``[M, T+1]``: the same gradient step, importance-weighted, with each
        sequence's mean ``|td|`` (its priority, used where the replay is prioritized)."""
        seq = sequences_of(batch)
        (loss, aux), grads = grad_fn(state.params["online"], state.params["target"], seq, batch.weight)
        new_state = apply_q_gradients(state, grads, tx, a.target_update_every, a.tau)
        metrics = {"loss": loss, "td_abs_mean": aux["td_abs_mean"], "q_mean": aux["q_mean"],
                   "grad_norm": optax.tree.norm(grads), "lr": jnp.asarray(schedule(state.step), jnp.float32)}
        return new_state, metrics, {"priority": aux["priority"]}

    def exploration(env_steps: int, actor: int | None, num_actors: int) -> dict[str, float]:
        """Every actor: the run's epsilon at the trial's env steps (the Anakin loop's schedule)."""
        return {"epsilon": linear_epsilon(env_steps, a.eps_start, a.eps_end, decay)}

    def epsilon(env_steps: Array) -> Array:
        frac = jnp.clip(env_steps.astype(jnp.float32) / decay, 0.0, 1.0)
        return jnp.float32(a.eps_start) + (a.eps_end - a.eps_start) * frac

    def act_greedy(pp: Params, obs: Array, s: Any, first: Array | None, rng: Array) -> tuple[Array, dict, Any]:
        return act(pp, obs, {**s, "epsilon": jnp.zeros(obs.shape[:1])}, first, rng)

    return QMixAlgorithm(
        init=init,
        policy_params=lambda state: state.params["online"],
        initial_actor_state=lambda b: {"epsilon": np.full((b,), a.eps_start, np.float32),
                                       "h": np.zeros((b, n, hidden), np.float32)},
        act=act,
        act_deterministic=act_greedy,
        update=update_sampled if graph else update,
        extras_spec={"h": ((n, hidden), "float32")},
        consumes="replay" if graph else "sequences",
        exploration=exploration,
        hidden_size=hidden,
        epsilon=epsilon,
        learning_starts=a.learning_starts,
        batch_size=a.batch_size,
        gradient_steps=t.update_epochs,
        q_values=q_values,
    )
