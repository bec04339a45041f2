"""AlphaZero: a policy-value network trained on the moves and outcomes of its own tree search (``mctx``).

    algo = make_alphazero(cfg, spec)                       # cfg.algo: AlphaZeroConfig
    logits, value = algo.predict(params, obs)              # legal moves only, value of the player to move
    action, policy, value = algo.search(params, key, obs, embedding, model, simulations, explore=True)
    state, metrics = algo.update(state, SearchBatch(obs, policy, value, weight))

The search's model is the env's own step, handed in by the shell (``srljax/learning/anakin_search.py``):
``model(key, embedding [B], action [B]) -> (obs, embedding, reward, terminated)`` with the reward of the mover. In a
game of two players taking turns (``EnvSpec.players == 2``) a child's value is the opponent's, so the search
discounts by -1 (mctx's convention for zero-sum turn-based games); otherwise by ``algo.gamma``. ``act`` (the
seam's) plays the network's most likely legal move without search: what ``launch.play`` and the generic
evaluation use; the bot evaluation searches (``srljax/selfplay/search_bots.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import optax

from algos import actor_critic
from algos.base import Algorithm, TrainState
from algos.networks import _dense, apply_torso, legal_slice, mask_illegal, torso_options
from algos.normalizers import init_norm
from srljax.config import Experiment
from srljax.types import EnvSpec

Array = jax.Array


class SearchBatch(NamedTuple):
    """Searched rows, leaves ``[N, ...]``: the observation, the search's move distribution, the value target (the
    outcome for the player to move, or an n-step target), and the row's weight (0: no move was searched there)."""

    obs: Array
    policy: Array
    value: Array
    weight: Array


class PolicyValue(nn.Module):
    """obs ``[B, D]`` -> (logits ``[B, A]`` with illegal moves masked, value ``[B]``): one trunk, two heads."""

    num_actions: int
    obs_ndim: int
    torso: str = "mlp"
    torso_options: tuple[tuple[str, Any], ...] = ()
    hidden_sizes: tuple[int, ...] = (256, 256, 256)
    activation: str = "relu"
    legal: tuple[int, ...] = ()
    bounded: bool = True
    """value in (-1, 1) (tanh): a two-player game's outcome."""

    @nn.compact
    def __call__(self, obs: Array) -> tuple[Array, Array]:
        h = apply_torso(self.torso, self.torso_options, obs, self.obs_ndim, name="torso", pixel_scale=1.0,
                        hidden_sizes=self.hidden_sizes, activation=self.activation)
        logits = mask_illegal(_dense(self.num_actions, 0.01, name="policy_head")(h), obs, self.legal)
        value = _dense(1, 1.0, name="value_head")(h)[..., 0]
        return logits, jnp.tanh(value) if self.bounded else value


@dataclass(frozen=True)
class SearchAlgorithm(Algorithm):
    """``Algorithm`` plus what a search shell needs (see the module docstring)."""

    predict: Callable[[Any, Array], tuple[Array, Array]] | None = None
    search: Callable[..., tuple[Array, Array, Array]] | None = None
    num_simulations: int = 0
    eval_simulations: int = 0
    replay_iterations: int = 1
    augment: bool = True
    opening_moves: int = 0


def make_alphazero(cfg: Experiment, spec: EnvSpec) -> SearchAlgorithm:
    a, t = cfg.algo, cfg.trainer
    if spec.action_kind != "discrete":
        raise ValueError(f"algo=alphazero needs discrete moves; {spec.id} has {spec.action_kind} actions")
    legal = legal_slice(spec)
    two_player = spec.players == 2
    net = PolicyValue(num_actions=spec.num_actions, obs_ndim=len(spec.obs_shape), torso=a.network,
                      torso_options=torso_options(a), hidden_sizes=tuple(a.hidden_sizes), activation=a.activation,
                      legal=legal, bounded=two_player)
    sign = -1.0 if two_player else a.gamma
    steps = cfg.num_updates * t.update_epochs * t.num_minibatches
    schedule = optax.linear_schedule(t.lr, 0.0, max(steps, 1)) if t.anneal_lr else optax.constant_schedule(t.lr)
    adam = optax.adamw(schedule, eps=t.adam_eps, weight_decay=a.weight_decay)
    tx = optax.chain(optax.clip_by_global_norm(t.max_grad_norm), adam) if t.max_grad_norm > 0 else adam
    epochs, num_mb = t.update_epochs, t.num_minibatches

    def init(rng: Array) -> TrainState:
        rng, k = jax.random.split(rng)
        params = net.init(k, jnp.zeros((1, *spec.obs_shape), jnp.float32))
        return TrainState(params=params, opt_state=tx.init(params), norm=init_norm(spec.obs_shape, obs=False, reward=False),
                          step=jnp.int32(0), rng=rng)

    def predict(params: Any, obs: Array) -> tuple[Array, Array]:
        return net.apply(params, obs.astype(jnp.float32))

    def invalid(obs: Array) -> Array | None:
        """The illegal moves of each row (a row with none legal, a game's last, counts all legal)."""
        if not legal:
            return None
        flags = obs[..., legal[0]: legal[1]] > 0.5
        return ~(flags | ~jnp.any(flags, axis=-1, keepdims=True))

    def search(params: Any, key: Array, obs: Array, embedding: Any, model: Callable, simulations: int,
               explore: bool = True) -> tuple[Array, Array, Array]:
        """-> (the move to play [B], the policy target [B, A], the root's searched value [B])."""

        def recurrent_fn(params: Any, key: Array, action: Array, embedding: Any) -> Any:
            obs, embedding, reward, terminated = model(key, embedding, action)
            logits, value = predict(params, obs)
            value = jnp.where(terminated, 0.0, value)
            discount = jnp.where(terminated, 0.0, sign).astype(jnp.float32)
            return mctx.RecurrentFnOutput(reward=reward.astype(jnp.float32), discount=discount,
                                          prior_logits=logits, value=value), embedding

        logits, value = predict(params, obs)
        root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=embedding)
        if a.search == "gumbel":
            out = mctx.gumbel_muzero_policy(params, key, root, recurrent_fn, simulations, invalid_actions=invalid(obs),
                                            max_num_considered_actions=a.max_considered_actions,
                                            gumbel_scale=1.0 if explore else 0.0)
        else:
            out = mctx.muzero_policy(params, key, root, recurrent_fn, simulations, invalid_actions=invalid(obs),
                                     dirichlet_fraction=a.dirichlet_fraction if explore else 0.0,
                                     dirichlet_alpha=a.dirichlet_alpha, temperature=1.0 if explore else 0.0)
        searched = out.search_tree.summary().value
        return out.action, out.action_weights, searched

    def loss(params: Any, mb: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        logits, value = predict(params, mb["obs"])
        w = mb["weight"]
        norm = jnp.maximum(w.sum(), 1.0)
        logp = jax.nn.log_softmax(logits)
        policy_loss = -jnp.sum(mb["policy"] * jnp.where(mb["policy"] > 0, logp, 0.0), axis=-1)
        value_loss = jnp.square(value - mb["value"])
        total = jnp.sum(w * (policy_loss + a.value_coef * value_loss)) / norm
        entropy = -jnp.sum(jax.nn.softmax(logits) * jnp.where(logits > -1e8, logp, 0.0), axis=-1)
        return total, {"policy_loss": jnp.sum(w * policy_loss) / norm, "value_loss": jnp.sum(w * value_loss) / norm,
                       "entropy": jnp.sum(w * entropy) / norm}

    step = actor_critic.sgd_step(jax.value_and_grad(loss, has_aux=True), tx)

    def update(state: TrainState, batch: SearchBatch) -> tuple[TrainState, dict[str, Array]]:
        rng, k = jax.random.split(state.rng)
        (params, opt_state), stats = actor_critic.run_epochs(step, (state.params, state.opt_state), batch._asdict(),
                                                             jax.random.split(k, epochs), num_mb)
        metrics = jax.tree.map(jnp.mean, stats)
        w = batch.weight
        metrics |= {"value_target": jnp.sum(w * batch.value) / jnp.maximum(w.sum(), 1.0)}
        return dataclasses.replace(state, params=params, opt_state=opt_state, step=state.step + 1, rng=rng), metrics

    def act(params: Any, obs: Array, actor_state: Any, first: Any, rng: Array) -> tuple[Array, dict, Any]:
        logits, _ = predict(params, obs)
        return jnp.argmax(logits, axis=-1).astype(jnp.int32), {}, actor_state

    return SearchAlgorithm(
        init=init, policy_params=lambda s: s.params, initial_actor_state=lambda n: (), act=act, update=update,
        extras_spec={}, consumes="search", act_deterministic=act, predict=predict, search=search,
        num_simulations=a.num_simulations, eval_simulations=a.eval_simulations,
        replay_iterations=a.replay_iterations, augment=a.augment, opening_moves=a.opening_moves)
