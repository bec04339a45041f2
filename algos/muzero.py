"""MuZero: a tree search (``mctx``) over a learned model, trained on windows of its own searched trajectories.

    algo = make_muzero(cfg, spec)                          # cfg.algo: MuZeroConfig
    action, policy, value = algo.search(params, key, obs, None, None, simulations)   # no env model: its own
    batch = unroll_targets(window, unroll_steps, td_steps, gamma)                     # pure: the loss's targets
    state, metrics = algo.update(state, batch)

Three MLPs: the representation ``obs -> s`` (flattened observation), the dynamics ``(s, a) -> (s', reward)`` and the
prediction ``s -> (policy logits, value)``; each hidden state is min-max normalised to [0, 1]. Value and reward are
categorical over ``-S..S`` on the scale ``h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x`` (``scalar_transform``; targets
two-hot, ``to_support``). The search's root embedding is ``s = representation(obs)`` and its model the dynamics, so
the shell hands it no model (``srljax/learning/anakin_muzero.py`` keeps the replay and samples the windows). The
loss unrolls the dynamics ``K`` steps with the stored moves from each window's first row, halving the gradient
through each hidden state, and averages the ``K`` unrolled steps' losses (MuZero's 1 / K). ``act`` is the search
itself, for the worker graph's actors and policy workers (the move, with the search's value and move distribution as
the extras ``search_value`` / ``search_policy`` a segment carries); ``act_deterministic`` plays the prediction's most
likely move without search (``launch.play``, evaluation). ``reanalyse`` (pure) searches stored windows again with
newer params (the buffer workers' reanalyse, ``srljax/system/staging/search_buffer.py``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import optax

from algos import actor_critic
from algos.alphazero import SearchAlgorithm
from algos.base import TrainState
from algos.networks import MLP
from algos.normalizers import init_norm
from srljax.config import Experiment
from srljax.types import EnvSpec

Array = jax.Array
EPS = 1e-3


def scalar_transform(x: Array, eps: float = EPS) -> Array:
    """h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x (Pohlen et al. 2018)."""
    return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1) - 1) + eps * x


def inverse_scalar_transform(y: Array, eps: float = EPS) -> Array:
    """h^-1(y) = sign(y)(((sqrt(1 + 4 eps (|y| + 1 + eps)) - 1) / (2 eps))^2 - 1)."""
    root = (jnp.sqrt(1 + 4 * eps * (jnp.abs(y) + 1 + eps)) - 1) / (2 * eps)
    return jnp.sign(y) * (jnp.square(root) - 1)


def to_support(x: Array, size: int) -> Array:
    """Scalars ``[...]`` -> two-hot ``[..., 2 size + 1]`` over ``-size..size`` of ``h(x)`` (clipped to the ends):
    the two neighbouring integers get weights whose mean is ``h(x)``."""
    y = jnp.clip(scalar_transform(x), -size, size)
    low = jnp.floor(y)
    frac = y - low
    idx = (low + size).astype(jnp.int32)
    n = 2 * size + 1
    return (jax.nn.one_hot(idx, n) * (1 - frac)[..., None]
            + jax.nn.one_hot(jnp.minimum(idx + 1, n - 1), n) * frac[..., None])


def from_support(logits: Array, size: int) -> Array:
    """Logits ``[..., 2 size + 1]`` -> scalars: ``h^-1`` of the distribution's mean."""
    return inverse_scalar_transform(jnp.sum(jax.nn.softmax(logits) * jnp.arange(-size, size + 1), axis=-1))


def scale_gradient(x: Array, scale: float) -> Array:
    """``x`` forward, ``scale`` x its gradient backward."""
    return x * scale + jax.lax.stop_gradient(x) * (1 - scale)


class Window(NamedTuple):
    """``W = K + n + 1`` consecutive rows of one env from the replay, leaves ``[N, W, ...]`` (``obs`` only the first
    ``K + 1`` rows', ``[N, K + 1, *O]``). Row j: the move searched there, the reward and termination of stepping with it, the search's
    value and move distribution, ``searched`` (False: a game's last row, whose step resets the env)."""

    obs: Array
    action: Array
    reward: Array
    terminated: Array
    searched: Array
    value: Array
    policy: Array


SEARCH_VALUE, SEARCH_POLICY = "search_value", "search_policy"  # act's extras: what a segment row's search found


def reanalyse(algo: SearchAlgorithm, params: Any, key: Array, obs: Array, w: Window, simulations: int) -> Window:
    """Windows ``w`` (leaves ``[M, W, ...]``) with every row searched again from its observation ``obs``
    ``[M, W, *O]`` with ``params``: fresh ``value`` and ``policy``, the rest as stored (pure; MuZero Reanalyse)."""
    m, width = w.value.shape
    _, policy, value = algo.search(params, key, obs.reshape(m * width, *obs.shape[2:]), None, None, simulations)
    return w._replace(value=value.reshape(m, width).astype(w.value.dtype),
                      policy=policy.reshape(m, width, -1).astype(w.policy.dtype))


class UnrollBatch(NamedTuple):
    """What the loss reads, leaves ``[N, ...]``: the first row's obs, the next ``K`` rows' obs (the consistency
    loss's targets), the ``K`` moves unrolled, the targets of the ``K + 1`` positions (value, policy) and ``K`` steps
    (reward) and their masks (0 past a game's end)."""

    obs: Array
    next_obs: Array  # [N, K, *O]
    action: Array  # [N, K]
    reward: Array  # [N, K]
    value: Array  # [N, K + 1]
    policy: Array  # [N, K + 1, A]
    reward_mask: Array  # [N, K]
    value_mask: Array  # [N, K + 1]
    policy_mask: Array  # [N, K + 1]


def unroll_targets(w: Window, unroll_steps: int, td_steps: int, gamma: float) -> UnrollBatch:
    """The targets of a window's ``K + 1`` positions (pure). Position k's value is the n-step return
    ``sum_{i<n} gamma^i r[k+i] + gamma^n v[k+n]``, cut at a game's last row: 0 there if the game terminated, the
    search's value there if a time limit cut it. Position k counts (``value_mask``, ``reward_mask`` for the step into
    it) while rows ``0..k-1`` are all searched, i.e. it is in the first row's game (the game's last row included);
    its policy counts where it was searched too. A window whose first row was not searched counts nothing."""
    k1 = unroll_steps + 1
    searched = w.searched.astype(jnp.float32)
    # row j is a game's last row after a termination: its value is 0 (row 0 is searched wherever anything counts)
    terminal = jnp.concatenate([jnp.zeros_like(w.terminated[:, :1]), w.terminated[:, :-1]], axis=1)
    boot = jnp.where(terminal, 0.0, w.value)
    z = jnp.zeros(w.value.shape[:1] + (k1,), jnp.float32)
    alive = jnp.ones_like(z)
    for i in range(td_steps):
        done = 1.0 - searched[:, i: i + k1]
        z = z + alive * done * gamma**i * boot[:, i: i + k1]
        alive = alive * (1.0 - done)
        z = z + alive * gamma**i * w.reward[:, i: i + k1]
    z = z + alive * gamma**td_steps * boot[:, td_steps: td_steps + k1]
    # in the first row's game: every row before k searched
    before = jnp.concatenate([jnp.ones_like(searched[:, :1]), jnp.cumprod(searched[:, :unroll_steps], axis=1)], axis=1)
    value_mask = before * searched[:, :1]
    return UnrollBatch(obs=w.obs[:, 0], next_obs=w.obs[:, 1:k1], action=w.action[:, :unroll_steps], reward=w.reward[:, :unroll_steps], value=z,
                       policy=w.policy[:, :k1], reward_mask=value_mask[:, 1:], value_mask=value_mask,
                       policy_mask=value_mask * searched[:, :k1])


class MuZeroNets(nn.Module):
    """The three networks; ``__call__`` (init) runs each once."""

    num_actions: int
    state_size: int
    support_size: int
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    projection_size: int = 0
    """> 0: a projection and a predictor head (``project``, ``consistency``) for the consistency loss."""

    def setup(self) -> None:
        support = 2 * self.support_size + 1
        mlp = lambda: MLP(hidden_sizes=self.hidden_sizes, activation=self.activation)  # noqa: E731
        self.repr_torso, self.repr_out = mlp(), nn.Dense(self.state_size)
        self.dyn_torso, self.dyn_out, self.reward_head = mlp(), nn.Dense(self.state_size), nn.Dense(support)
        self.pred_torso = mlp()
        self.policy_head = nn.Dense(self.num_actions, kernel_init=nn.initializers.orthogonal(0.01))
        self.value_head = nn.Dense(support, kernel_init=nn.initializers.zeros)
        if self.projection_size:
            p = self.projection_size
            self.projector = MLP(hidden_sizes=(p,), activation="relu")
            self.projector_out = nn.Dense(p)
            self.predictor = MLP(hidden_sizes=(p,), activation="relu")
            self.predictor_out = nn.Dense(p)

    @staticmethod
    def _normalise(s: Array) -> Array:
        lo, hi = s.min(axis=-1, keepdims=True), s.max(axis=-1, keepdims=True)
        return (s - lo) / jnp.maximum(hi - lo, 1e-5)

    def represent(self, obs: Array) -> Array:
        return self._normalise(self.repr_out(self.repr_torso(obs.reshape(obs.shape[0], -1).astype(jnp.float32))))

    def dynamics(self, s: Array, action: Array) -> tuple[Array, Array]:
        h = self.dyn_torso(jnp.concatenate([s, jax.nn.one_hot(action, self.num_actions)], axis=-1))
        return self._normalise(self.dyn_out(h)), self.reward_head(h)

    def predict(self, s: Array) -> tuple[Array, Array]:
        h = self.pred_torso(s)
        return self.policy_head(h), self.value_head(h)

    def project(self, s: Array) -> Array:
        return self.projector_out(self.projector(s))

    def consistency(self, s: Array) -> Array:
        """The online branch: the predictor on the projection of a hidden state."""
        return self.predictor_out(self.predictor(self.project(s)))

    def __call__(self, obs: Array, action: Array) -> Any:
        s = self.represent(obs)
        out = self.predict(s), self.dynamics(s, action)
        return (*out, self.consistency(s)) if self.projection_size else out


@dataclass(frozen=True)
class MuZeroAlgorithm(SearchAlgorithm):
    """``SearchAlgorithm`` plus what its program (``srljax/learning/anakin_muzero.py``) needs to build windows."""

    unroll_steps: int = 5
    td_steps: int = 10
    gamma: float = 0.99
    windows: int = 256
    """windows sampled per update."""
    fresh_values: bool = False
    """the program replaces the stored search values of each window's bootstrap rows with the current network's
    (``MuZeroConfig.value_bootstrap="fresh"``)."""


def make_muzero(cfg: Experiment, spec: EnvSpec) -> MuZeroAlgorithm:
    a, t = cfg.algo, cfg.trainer
    if spec.action_kind != "discrete":
        raise ValueError(f"algo=muzero needs discrete moves; {spec.id} has {spec.action_kind} actions")
    size, num_actions = a.support_size, spec.num_actions
    net = MuZeroNets(num_actions=num_actions, state_size=a.state_size, support_size=size,
                     hidden_sizes=tuple(a.hidden_sizes), activation=a.activation,
                     projection_size=a.projection_size if a.consistency_coef > 0 else 0)
    steps = cfg.num_updates * t.update_epochs * t.num_minibatches
    schedule = optax.linear_schedule(t.lr, 0.0, max(steps, 1)) if t.anneal_lr else optax.constant_schedule(t.lr)
    adam = optax.adamw(schedule, eps=t.adam_eps, weight_decay=a.weight_decay)
    tx = optax.chain(optax.clip_by_global_norm(t.max_grad_norm), adam) if t.max_grad_norm > 0 else adam
    epochs, num_mb, K = t.update_epochs, t.num_minibatches, a.unroll_steps

    def init(rng: Array) -> TrainState:
        rng, k = jax.random.split(rng)
        params = net.init(k, jnp.zeros((1, *spec.obs_shape), jnp.float32), jnp.zeros((1,), jnp.int32))
        return TrainState(params=params, opt_state=tx.init(params), norm=init_norm(spec.obs_shape, obs=False, reward=False),
                          step=jnp.int32(0), rng=rng)

    def root(params: Any, obs: Array) -> tuple[Array, Array, Array]:
        s = net.apply(params, obs, method=MuZeroNets.represent)
        logits, value = net.apply(params, s, method=MuZeroNets.predict)
        return s, logits, from_support(value, size)

    def predict(params: Any, obs: Array) -> tuple[Array, Array]:
        return root(params, obs)[1:]

    def recurrent_fn(params: Any, key: Array, action: Array, s: Array) -> Any:
        s, reward = net.apply(params, s, action, method=MuZeroNets.dynamics)
        logits, value = net.apply(params, s, method=MuZeroNets.predict)
        return mctx.RecurrentFnOutput(reward=from_support(reward, size), discount=jnp.full(action.shape, a.gamma),
                                      prior_logits=logits, value=from_support(value, size)), s

    def search(params: Any, key: Array, obs: Array, embedding: Any, model: Any, simulations: int,
               explore: bool = True) -> tuple[Array, Array, Array]:
        """-> (the move to play [B], the policy target [B, A], the root's searched value [B]); ``embedding`` and
        ``model`` are the env's and unused: the model is learned."""
        s, logits, value = root(params, obs)
        rootout = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=s)
        if a.search == "gumbel":
            qtransform = functools.partial(mctx.qtransform_completed_by_mix_value, rescale_values=a.rescale_values)
            out = mctx.gumbel_muzero_policy(params, key, rootout, recurrent_fn, simulations,
                                            max_num_considered_actions=a.max_considered_actions,
                                            gumbel_scale=1.0 if explore else 0.0, qtransform=qtransform)
        else:
            out = mctx.muzero_policy(params, key, rootout, recurrent_fn, simulations,
                                     dirichlet_fraction=a.dirichlet_fraction if explore else 0.0,
                                     dirichlet_alpha=a.dirichlet_alpha, temperature=1.0 if explore else 0.0)
        return out.action, out.action_weights, out.search_tree.summary().value

    def cosine(x: Array, y: Array) -> Array:
        unit = lambda v: v / jnp.maximum(jnp.linalg.norm(v, axis=-1, keepdims=True), 1e-8)  # noqa: E731
        return jnp.sum(unit(x) * unit(y), axis=-1)

    def xent(target: Array, logits: Array) -> Array:
        return -jnp.sum(target * jax.nn.log_softmax(logits), axis=-1)

    def loss(params: Any, mb: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        s = net.apply(params, mb["obs"], method=MuZeroNets.represent)
        parts = {"policy_loss": 0.0, "value_loss": 0.0, "reward_loss": 0.0}
        if a.consistency_coef > 0:
            parts["consistency_loss"] = 0.0
            nxt = mb["next_obs"]
            real = net.apply(params, nxt.reshape(-1, *nxt.shape[2:]), method=MuZeroNets.represent)
            target = jax.lax.stop_gradient(net.apply(params, real, method=MuZeroNets.project)).reshape(*nxt.shape[:2], -1)
        for k in range(K + 1):
            if k:
                s, reward = net.apply(params, s, mb["action"][:, k - 1], method=MuZeroNets.dynamics)
                if a.consistency_coef > 0:  # the dynamics' state against the representation of the real row k
                    online = net.apply(params, s, method=MuZeroNets.consistency)
                    parts["consistency_loss"] -= mb["reward_mask"][:, k - 1] * cosine(online, target[:, k - 1]) / K
                s = scale_gradient(s, 0.5)
                parts["reward_loss"] += mb["reward_mask"][:, k - 1] * xent(to_support(mb["reward"][:, k - 1], size),
                                                                           reward) / K
            logits, value = net.apply(params, s, method=MuZeroNets.predict)
            scale = 1.0 / K if k else 1.0
            parts["policy_loss"] += scale * mb["policy_mask"][:, k] * xent(mb["policy"][:, k], logits)
            parts["value_loss"] += scale * mb["value_mask"][:, k] * xent(to_support(mb["value"][:, k], size), value)
        n = jnp.maximum(mb["value_mask"][:, 0].sum(), 1.0)
        parts = {name: jnp.sum(x) / n for name, x in parts.items()}
        total = parts["policy_loss"] + a.value_coef * parts["value_loss"] + parts["reward_loss"]
        if a.consistency_coef > 0:
            total = total + a.consistency_coef * parts["consistency_loss"]
        return total, parts

    step = actor_critic.sgd_step(jax.value_and_grad(loss, has_aux=True), tx)

    def update(state: TrainState, batch: UnrollBatch) -> tuple[TrainState, dict[str, Array]]:
        rng, k = jax.random.split(state.rng)
        (params, opt_state), stats = actor_critic.run_epochs(step, (state.params, state.opt_state), batch._asdict(),
                                                             jax.random.split(k, epochs), num_mb)
        metrics = jax.tree.map(jnp.mean, stats)
        w = batch.value_mask[:, 0]
        metrics |= {"value_target": jnp.sum(w * batch.value[:, 0]) / jnp.maximum(w.sum(), 1.0),
                    "windows_used": jnp.mean(w)}
        return dataclasses.replace(state, params=params, opt_state=opt_state, step=state.step + 1, rng=rng), metrics

    def act_greedy(params: Any, obs: Array, actor_state: Any, first: Any, rng: Array) -> tuple[Array, dict, Any]:
        logits, _ = predict(params, obs)
        return jnp.argmax(logits, axis=-1).astype(jnp.int32), {}, actor_state

    def act(params: Any, obs: Array, actor_state: Any, first: Any, rng: Array) -> tuple[Array, dict, Any]:
        """The worker graph's acting: the search's move, its value and move distribution as extras."""
        action, policy, value = search(params, rng, obs, None, None, a.num_simulations)
        return action.astype(jnp.int32), {SEARCH_VALUE: value, SEARCH_POLICY: policy}, actor_state

    return MuZeroAlgorithm(
        init=init, policy_params=lambda s: s.params, initial_actor_state=lambda n: (), act=act, update=update,
        extras_spec={SEARCH_VALUE: ((), "float32"), SEARCH_POLICY: ((num_actions,), "float32")}, consumes="search",
        act_deterministic=act_greedy, predict=predict, search=search,
        num_simulations=a.num_simulations, eval_simulations=a.num_simulations, replay_iterations=1, augment=False,
        unroll_steps=K, td_steps=a.td_steps, gamma=a.gamma, windows=num_mb * a.batch_size,
        fresh_values=a.value_bootstrap == "fresh")
