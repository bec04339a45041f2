"""The half PPO, APPO and IMPALA share: the actor-critic network (feed-forward or LSTM), observation
preparation, ``act``, and one optimiser step.

    ac = ActorCriticPolicy.build(cfg.algo, spec, value_extra=True)   # PPO keeps the actor's value
    state = ac.init_state(rng, tx, reward_norm=False)
    action, extras, actor_state = ac.act(policy_params, obs, actor_state, first, rng)
    step = sgd_step(grad_fn, tx)                                      # (params, opt_state), mb -> ..., aux

``cfg`` needs ``network``, ``hidden_sizes``, ``activation``, ``init_log_std``, ``normalize_obs``,
``obs_clip`` and ``lstm_size`` (``PPOConfig``, ``IMPALAConfig``). Published params are
``{"params", "obs_norm"}`` for both algorithms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import optax
from jax import lax

from algos.base import Metrics, Params, TrainState
from algos.distributions import CATEGORICAL, DIAG_GAUSSIAN, Distribution, multi_categorical
from algos.networks import ActorCritic, make_actor_critic
from algos.normalizers import init_norm, normalize
from algos.parallel import split_samples
from algos.recurrent import Recurrent, carry_extras, carry_extras_spec
from srljax.types import EnvSpec

Array = jax.Array


@dataclass(frozen=True)
class ActorCriticPolicy:
    net: ActorCritic
    rec: Recurrent | None  # set when ``lstm_size > 0``
    dist: Distribution
    spec: EnvSpec
    norm_obs: bool
    obs_clip: float
    value_extra: bool  # store the actor's value in the extras (PPO's GAE uses it; IMPALA does not)

    @staticmethod
    def build(cfg: Any, spec: EnvSpec, *, value_extra: bool) -> ActorCriticPolicy:
        net = make_actor_critic(cfg, spec)
        rec = Recurrent.from_feedforward(net, cfg.lstm_size) if cfg.lstm_size else None
        dist = {"discrete": CATEGORICAL, "continuous": DIAG_GAUSSIAN}.get(spec.action_kind) \
            or multi_categorical(spec.action_nvec)
        return ActorCriticPolicy(net, rec, dist, spec, cfg.normalize_obs, cfg.obs_clip, value_extra)

    def init_params(self, key: Array) -> Params:
        # jit: eager orthogonal init of the CNN dispatches op by op and takes ~2x longer on CPU
        if self.rec is None:
            return jax.jit(self.net.init)(key, jnp.zeros((1, *self.spec.obs_shape), self.spec.obs_dtype))
        return jax.jit(lambda k: self.rec.init(k, self.spec))(key)

    def init_state(self, rng: Array, tx: optax.GradientTransformation, reward_norm: bool) -> TrainState:
        """A fresh ``TrainState``: network params, ``tx``'s state, normaliser stats."""
        rng, key = jax.random.split(rng)
        params = self.init_params(key)
        norm = init_norm(self.spec.obs_shape, obs=self.norm_obs, reward=reward_norm)
        return TrainState(params=params, opt_state=tx.init(params), norm=norm, step=jnp.zeros((), jnp.int32), rng=rng)

    @staticmethod
    def policy_params(state: TrainState) -> Params:
        """What actors need: the network params and the observation-normaliser stats."""
        return {"params": state.params, "obs_norm": state.norm.obs}

    def prep(self, obs: Array, obs_norm: Any) -> Array:
        """Observations as the network takes them: normalised (``normalize_obs``), except the legal-action flags,
        which the network reads as they came (``algos.networks.mask_illegal``)."""
        if not self.norm_obs:
            return obs
        out = normalize(obs, obs_norm, self.obs_clip)
        if legal := self.spec.legal_actions:
            out = out.at[..., legal[0]: legal[1]].set(obs[..., legal[0]: legal[1]].astype(out.dtype))
        return out

    def initial_actor_state(self, batch: int) -> Any:
        return () if self.rec is None else self.rec.initial_state(batch)

    def act(self, pp: Params, obs: Array, actor_state: Any, first: Array, rng: Array,
            deterministic: bool = False) -> tuple[Array, dict[str, Array], Any]:
        obs = self.prep(obs, pp["obs_norm"])
        if self.rec is None:  # feed-forward: no state, ``first`` unused
            pi, value = self.net.apply(pp["params"], obs)
            extras: dict[str, Array] = {}
        else:
            pi, value, carry_in, actor_state = self.rec.step(pp["params"], obs, actor_state, first)
            extras = carry_extras(carry_in)
        action = self.dist.mode(pi) if deterministic else self.dist.sample(rng, pi)
        extras = {"logp": self.dist.log_prob(pi, action), **({"value": value} if self.value_extra else {}), **extras}
        return action, extras, actor_state

    def act_deterministic(self, pp: Params, obs: Array, actor_state: Any, first: Array,
                          rng: Array) -> tuple[Array, dict[str, Array], Any]:
        """``act`` with the distribution's mode (greedy / mean action): evaluation."""
        return self.act(pp, obs, actor_state, first, rng, deterministic=True)

    @property
    def action_probs(self) -> Callable[[Params, Array], Array] | None:
        """``(pp, obs [B, *O]) -> [B, A]`` for a feed-forward discrete policy (``Algorithm.action_probs``), else None."""
        if self.rec is not None or self.spec.action_kind != "discrete":
            return None

        def probs(pp: Params, obs: Array) -> Array:
            logits, _ = self.net.apply(pp["params"], self.prep(obs, pp["obs_norm"]))
            return jax.nn.softmax(logits, axis=-1)

        return probs

    @property
    def extras_spec(self) -> dict[str, tuple[tuple[int, ...], str]]:
        out = {"logp": ((), "float32")}
        if self.value_extra:
            out["value"] = ((), "float32")
        if self.rec is not None:
            out |= carry_extras_spec(self.rec.lstm_size)
        return out


def sgd_step(grad_fn: Callable, tx: optax.GradientTransformation) -> Callable:
    """One optimiser step on a minibatch: ``((params, opt_state), mb) -> ((params, opt_state), aux)``;
    ``aux`` gains ``loss`` and ``grad_norm`` (before clipping)."""

    def step(carry: tuple[Params, Any], mb: dict[str, Array]) -> tuple[tuple[Params, Any], Metrics]:
        params, opt_state = carry
        (loss, aux), grads = grad_fn(params, mb)
        updates, opt_state = tx.update(grads, opt_state, params)
        aux = {**aux, "loss": loss, "grad_norm": optax.tree.norm(grads)}
        return (optax.apply_updates(params, updates), opt_state), aux

    return step


def shuffled_minibatches(key: Array, flat: dict[str, Any], num_mb: int) -> dict[str, Any]:
    """``flat`` leaves ``[S, ...]`` -> shuffled ``[M, S // M, ...]``; a remainder (``S % M``) sits out this
    epoch. On a multi-device trainer each device computes the loss of its share of every minibatch."""
    s = jax.tree.leaves(flat)[0].shape[0]
    size = s // num_mb
    perm = jax.random.permutation(key, s)[: num_mb * size]
    mbs = jax.tree.map(lambda x: jnp.take(x, perm, axis=0).reshape((num_mb, size, *x.shape[1:])), flat)
    return split_samples(mbs, axis=1)


def run_epochs(step: Callable, carry: Any, flat: dict[str, Any], keys: Array, num_mb: int,
               loop: str = "scan") -> tuple[Any, Metrics]:
    """``len(keys)`` epochs of ``step`` over shuffled minibatches of ``flat`` -> (carry, stats ``[E, M]`` or
    ``[E * M]``). ``loop="scan"`` compiles one loop; ``"unroll"`` unrolls it (faster for a CNN on XLA:CPU,
    ``bench/update_loop.py``)."""
    if loop == "scan":
        return lax.scan(lambda c, k: lax.scan(step, c, shuffled_minibatches(k, flat, num_mb)), carry, keys)
    stats = []
    for e in range(keys.shape[0]):
        mbs = shuffled_minibatches(keys[e], flat, num_mb)
        for i in range(num_mb):
            carry, aux = step(carry, jax.tree.map(lambda x: x[i], mbs))
            stats.append(aux)
    return carry, jax.tree.map(lambda *xs: jnp.stack(xs), *stats)

