"""MAPPO and IPPO (Yu et al. 2022; de Witt et al. 2020) as an ``Algorithm``: PPO over agent samples.

Shape letters: T transitions, B envs, N agents, F packed row features (``EnvSpec.agent_row()``),
A actions per agent, S samples (T * B * N).

The env gives obs ``[B, N, F]`` and takes actions ``[B, N]`` (``envs/multi_agent.py``); segments are
``[T+1, B, N, ...]`` and pass through every shell unchanged. Here each agent of each env is one PPO
sample: one actor and one critic, shared by all agents (parameter sharing, optionally told the agent's
index as a one-hot), the loss is ``algos.ppo.ppo_loss`` on the ``S`` samples, GAE runs per agent
column (``[T, B*N]``) with the team reward (or each agent's own, ``spec.agent_rewards``) and the env's
episode flags. Illegal actions (``spec.action_mask``) get a logit of ``MASKED_LOGIT``: probability 0 in
sampling, log-probabilities and entropy.

Recurrent (``lstm_size > 0``): the actor is torso -> cell (``rnn_cell``: LSTM or GRU) -> ``post_rnn_sizes`` dense
layers -> policy head, one carry ``[B, N, H]`` per agent of each env (the actor state), zeroed where the shell's
``first [B]`` marks an env's reset row; the critic is feed-forward on its input, or with ``recurrent_critic`` the same
shape as the actor (its own cell and carry). The carry each row was acted with is stored as extras ``[N, H]``
(``lstm_c`` / ``lstm_h``, ``gru_h``, the critic's with a ``critic_`` prefix: ``cell_keys``), and the update's
minibatches are whole agent columns ``[T]`` (``B * N`` of them), each unrolled from its stored row-0 carry and
reset after every done row inside the segment, so the first epoch's ratio is 1 as in recurrent PPO.

Critic inputs (``MAPPOConfig.critic``): ``central`` (MAPPO) the env's global state, or all agents'
views concatenated (the same vector for every agent) when it has none; ``local`` (IPPO) the agent's own
view. ``value_norm``: the critic predicts targets standardised by a running mean / std of the returns,
updated from each batch's returns before the value loss (the paper's ValueNorm); the values the
actors stored are de-normalised with the stats before the update for GAE.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from algos import actor_critic
from algos.base import RETURN_ACC, Algorithm, Metrics, Params, TrainState
from algos.distributions import CATEGORICAL, categorical_log_prob, categorical_sample
from algos.networks import _dense, apply_torso, reset_carry, torso_options
from algos.normalizers import VAR_EPS, RunningMeanStd, normalize, rms_init, rms_update, scale_rewards
from algos.ppo import explained_variance, ppo_loss
from algos.recurrent import CARRY_KEYS, episode_starts
from algos.returns import gae, valid_mask
from srljax.config import Experiment, MAPPOConfig
from srljax.types import EnvSpec, Trajectory

Array = jax.Array
MASKED_LOGIT = -1e9
"""The logit of an illegal action: finite, so log-softmax and the entropy stay free of NaN, and
exp(-1e9 - max) is exactly 0 in float32."""


@flax.struct.dataclass
class MultiAgentNorm:
    """Normaliser stats of MAPPO's ``TrainState.norm``; a field is None when disabled."""

    obs: RunningMeanStd | None  # [N, F] the packed rows
    ret: RunningMeanStd | None  # [] the team's discounted return (``normalize_reward``)
    value: RunningMeanStd | None  # [] value targets (``value_norm``)


class MultiAgentActorCritic(nn.Module):
    """``{"actor" [..., Da], "critic" [..., Dc], "mask" [..., A] bool}`` -> (masked logits [..., A], value [...])."""

    num_actions: int
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    torso: str = "mlp"
    """``mlp`` or a user's ``"package.module:Class"`` (``algos.networks.apply_torso``), one for the actor and one
    for the critic, each on an agent's row ``[D]``."""
    torso_options: tuple[tuple[str, Any], ...] = ()

    @nn.compact
    def __call__(self, x: dict[str, Array]) -> tuple[Array, Array]:
        pi_h, v_h = (apply_torso(self.torso, self.torso_options, x[part], 1, name=part, hidden_sizes=self.hidden_sizes,
                                 activation=self.activation) for part in ("actor", "critic"))
        logits = _dense(self.num_actions, 0.01, name="policy_head")(pi_h)
        return jnp.where(x["mask"], logits, MASKED_LOGIT), _dense(1, 1.0, name="value_head")(v_h)[..., 0]


class _ResetCellStep(nn.Module):
    """One time step of a cell: ``(carry tuple, (x [R, D], first [R])) -> (carry, h [R, H])``, the carry zeroed first
    on the rows whose ``first`` is set. ``lstm``: carry ``(c, h)``; ``gru``: carry ``(h,)``."""

    features: int
    cell: str = "lstm"

    @nn.compact
    def __call__(self, carry: tuple[Array, ...], inputs: tuple[Array, Array]) -> tuple[tuple[Array, ...], Array]:
        x, first = inputs
        carry = reset_carry(carry, first)
        if self.cell == "gru":
            h, y = nn.GRUCell(self.features, name="cell")(carry[0], x)
            return (h,), y
        return nn.OptimizedLSTMCell(self.features, name="cell")(carry, x)


def cell_keys(cell: str, part: str = "actor") -> tuple[str, ...]:
    """The extras holding one cell's carry: the actor's LSTM ``lstm_c``, ``lstm_h`` (``algos/recurrent.py``), its GRU
    ``gru_h``; the critic's the same names after ``critic_``."""
    keys = CARRY_KEYS if cell == "lstm" else ("gru_h",)
    return keys if part == "actor" else tuple(f"critic_{k}" for k in keys)


class MultiAgentRecurrentActorCritic(nn.Module):
    """``(carry tuple of [R, H], x {"actor" [T, R, Da], "critic" [T, R, Dc], "mask" [T, R, A]}, first [T, R])`` ->
    ``(carry, (masked logits [T, R, A], value [T, R]))`` for R agent rows: the actor's torso feeds a cell (``lstm`` or
    ``gru``, ``lstm_size`` units) unrolled over T (carry zeroed before each row whose ``first`` is set), then the
    ``post_sizes`` dense layers and the policy head. The critic is the same shape when ``recurrent_critic`` (its own
    cell and post layers on its torso), else ``MultiAgentActorCritic``'s feed-forward one. The carry is the flat tuple
    of the actor's cell state, then the critic's (``carry_keys`` names them). Acting is the case T = 1."""

    num_actions: int
    lstm_size: int
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    torso: str = "mlp"
    torso_options: tuple[tuple[str, Any], ...] = ()
    cell: str = "lstm"
    recurrent_critic: bool = False
    post_sizes: tuple[int, ...] = ()

    def carry_keys(self) -> tuple[str, ...]:
        return cell_keys(self.cell) + (cell_keys(self.cell, "critic") if self.recurrent_critic else ())

    def initial_carry(self, rows: int) -> tuple[Array, ...]:
        return tuple(jnp.zeros((rows, self.lstm_size), jnp.float32) for _ in self.carry_keys())

    @nn.compact
    def __call__(self, carry: Any, x: dict[str, Array], first: Array) -> tuple[Any, tuple[Array, Array]]:
        pi_h, v_h = (apply_torso(self.torso, self.torso_options, x[part], 1, name=part, hidden_sizes=self.hidden_sizes,
                                 activation=self.activation) for part in ("actor", "critic"))
        act_fn = nn.relu if self.activation == "relu" else nn.tanh
        k = len(cell_keys(self.cell))
        scan = nn.scan(_ResetCellStep, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)

        def recur(h: Array, part_carry: tuple[Array, ...], prefix: str) -> tuple[tuple[Array, ...], Array]:
            part_carry, h = scan(self.lstm_size, self.cell, name=f"{prefix}{self.cell}")(part_carry, (h, first))
            for j, size in enumerate(self.post_sizes):
                h = act_fn(_dense(size, 2.0 ** 0.5, name=f"{prefix}post_{j}")(h))
            return part_carry, h

        actor_carry, h = recur(pi_h, tuple(carry[:k]), "")
        critic_carry: tuple[Array, ...] = ()
        if self.recurrent_critic:
            critic_carry, v_h = recur(v_h, tuple(carry[k:]), "critic_")
        logits = _dense(self.num_actions, 0.01, name="policy_head")(h)
        value = _dense(1, 1.0, name="value_head")(v_h)[..., 0]
        return actor_carry + critic_carry, (jnp.where(x["mask"], logits, MASKED_LOGIT), value)


CRITIC_PARTS = ("critic", "value_head")
"""The critic's parameter groups in ``MultiAgentActorCritic`` / ``MultiAgentRecurrentActorCritic`` (with its
``critic_``-named cell and post layers, ``is_critic``); the rest is the actor's."""


def is_critic(name: str) -> bool:
    return name in CRITIC_PARTS or name.startswith("critic_")


def network_parts(params: Any) -> Any:
    """``params`` -> the same tree of labels, ``"critic"`` under ``CRITIC_PARTS``, else ``"actor"``
    (``MAPPOConfig.clip_per_network``)."""
    return {"params": {k: jax.tree.map(lambda _, k=k: "critic" if is_critic(k) else "actor", v)
                       for k, v in params["params"].items()}}


def gradient_clip(a: MAPPOConfig, max_norm: float) -> optax.GradientTransformation:
    """Clipping by the global norm of all gradients, or with ``clip_per_network`` of the actor's (its torso, LSTM,
    policy head) and the critic's apart."""
    clip = optax.clip_by_global_norm(max_norm)
    return optax.multi_transform({"actor": clip, "critic": clip}, network_parts) if a.clip_per_network else clip


def agent_columns(x: Array) -> Array:
    """Time-major per-agent data ``[T, B, N, ...]`` -> one column per agent of each env ``[B * N, T, ...]`` (env b's
    agent i at ``b * N + i``, the order of ``jnp.repeat(env_data, N, axis=1)``)."""
    x = jnp.moveaxis(x, 0, 2)  # [B, N, T, ...]
    return x.reshape((-1, *x.shape[2:]))


def network_inputs(spec: EnvSpec, a: MAPPOConfig, obs: Array, obs_norm: RunningMeanStd | None) -> dict[str, Array]:
    """Packed rows ``obs [..., N, F]`` (raw) -> the network's inputs, each ``[..., N, D]``."""
    n, row = spec.num_agents, spec.agent_row()
    x = normalize(obs, obs_norm, a.obs_clip) if obs_norm is not None else obs.astype(jnp.float32)
    lead = obs.shape[:-2]
    view = x[..., row["view"]]
    if a.critic == "local":
        critic = view
    elif spec.state_size:
        critic = x[..., row["state"]]
    else:  # no global state: every agent's critic sees all views, in agent order
        critic = jnp.broadcast_to(view.reshape((*lead, 1, n * spec.agent_obs_size)), (*lead, n, n * spec.agent_obs_size))
    actor = view
    if a.agent_id:
        one_hot = jnp.broadcast_to(jnp.eye(n, dtype=jnp.float32), (*lead, n, n))
        actor, critic = jnp.concatenate([actor, one_hot], -1), jnp.concatenate([critic, one_hot], -1)
    if spec.action_mask:
        mask = obs[..., row["mask"]] > 0.5
    else:
        mask = jnp.ones((*lead, n, spec.num_actions), bool)
    return {"actor": actor, "critic": critic, "mask": mask}


def spec_problems(spec: EnvSpec, a: MAPPOConfig, min_agents: int = 2) -> list[str]:
    """What stops MAPPO on ``spec`` (known only once an env exists; ``MAPPOConfig.problems`` checks the ids).
    ``min_agents=1``: ``spec`` is one policy's share of a multi-agent env (``algos/multi_policy.py``)."""
    out = []
    if spec.num_agents < min_agents or spec.action_kind != "discrete" or spec.obs_shape[:1] != (spec.num_agents,):
        out.append(f"algo=mappo needs a multi-agent env with discrete actions (obs [B, N, F], EnvSpec.num_agents "
                   f"> 1, envs/multi_agent.py); {spec.id} has num_agents={spec.num_agents}, {spec.action_kind} actions")
    elif a.critic == "central" and not spec.state_size and not spec.agent_obs_size:
        out.append(f"algo.critic='central' on {spec.id}: the env gives no global state and no agent views to "
                   "concatenate into one; give the env a state (EnvSpec.state_size) or use algo.critic='local' (IPPO)")
    if a.normalize_reward and spec.agent_rewards:
        out.append(f"algo.normalize_reward=True: {spec.id} rewards each agent separately and reward scaling keeps one "
                   "running return per env; set algo.normalize_reward=False (algo.value_norm scales the critic)")
    return out


def make_mappo(cfg: Experiment, spec: EnvSpec, min_agents: int = 2) -> Algorithm:
    """Build MAPPO / IPPO (``cfg.algo``, a ``MAPPOConfig``) for the multi-agent ``spec`` (``min_agents=1``: one
    policy's agents of a multi-agent env, ``algos/multi_policy.py``)."""
    a, t = cfg.algo, cfg.trainer
    assert isinstance(a, MAPPOConfig)
    problems = spec_problems(spec, a, min_agents)
    if problems:
        raise ValueError("; ".join(problems))
    n, row = spec.num_agents, spec.agent_row()
    torso = "mlp" if a.network == "auto" else a.network
    net = MultiAgentActorCritic(spec.num_actions, tuple(a.hidden_sizes), a.activation, torso=torso,
                                torso_options=torso_options(a))
    rec = MultiAgentRecurrentActorCritic(
        spec.num_actions, a.lstm_size, tuple(a.hidden_sizes), a.activation, torso=torso, torso_options=torso_options(a),
        cell=a.rnn_cell, recurrent_critic=a.recurrent_critic, post_sizes=tuple(a.post_rnn_sizes)) if a.lstm_size else None
    keys = rec.carry_keys() if rec is not None else ()
    epochs, num_mb = t.update_epochs, t.num_minibatches
    steps_per_update = epochs * num_mb
    gamma, lam, norm_rew = a.gamma, a.gae_lambda, a.normalize_reward
    if t.anneal_lr:
        schedule = optax.linear_schedule(t.lr, 0.0, cfg.num_updates * steps_per_update)
    else:
        schedule = optax.constant_schedule(t.lr)
    tx = optax.chain(gradient_clip(a, t.max_grad_norm), optax.adam(schedule, eps=t.adam_eps))
    def column_apply(params: Params, x: dict[str, Any]) -> tuple[Array, Array]:
        """Recurrent minibatch ``{inputs [b, T, D], first [b, T], carry [b, H]}`` -> (logits [b, T, A], value [b, T]),
        each column unrolled over T from the carry it was acted with."""
        time_major = jax.tree.map(lambda y: jnp.swapaxes(y, 0, 1), x["inputs"])
        _, (logits, value) = rec.apply(params, x["carry"], time_major, jnp.swapaxes(x["first"], 0, 1))
        return jnp.swapaxes(logits, 0, 1), jnp.swapaxes(value, 0, 1)

    loss = jax.value_and_grad(
        lambda p, mb: ppo_loss(p, net.apply if rec is None else column_apply, mb, dist=CATEGORICAL, clip_coef=a.clip_coef, clip_vloss=a.clip_vloss,
                               ent_coef=a.ent_coef, vf_coef=a.vf_coef, norm_adv=a.norm_adv), has_aux=True)
    sgd_step = actor_critic.sgd_step(loss, tx)

    def init(rng: Array) -> TrainState:
        rng, key = jax.random.split(rng)
        example = network_inputs(spec, a, jnp.zeros((1, *spec.obs_shape), jnp.float32), None)  # [1, N, D]
        if rec is None:
            params = jax.jit(net.init)(key, example)
        else:  # T = 1, the N agents as rows
            params = jax.jit(rec.init)(key, rec.initial_carry(n), example, jnp.zeros((1, n), bool))
        norm = MultiAgentNorm(obs=rms_init(spec.obs_shape) if a.normalize_obs else None,
                              ret=rms_init(()) if norm_rew else None, value=rms_init(()) if a.value_norm else None)
        return TrainState(params=params, opt_state=tx.init(params), norm=norm, step=jnp.zeros((), jnp.int32), rng=rng)

    def initial_actor_state(batch: int) -> Any:
        """Feed-forward: none; recurrent: zeros ``(c, h)`` ``[B, N, H]``, one carry per agent of each env."""
        return () if rec is None else jax.tree.map(lambda z: z.reshape((batch, n, -1)), rec.initial_carry(batch * n))

    def act(pp: Params, obs: Array, actor_state: Any, first: Any, rng: Array) -> tuple[Array, dict[str, Array], Any]:
        x = network_inputs(spec, a, obs, pp["obs_norm"])  # leaves [B, N, D]
        if rec is None:
            logits, value = net.apply(pp["params"], x)  # [B, N, A], [B, N]
            carry_in, extras = actor_state, {}
        else:  # one step of the B * N agent rows, each from its env's carry, zeroed on the env's reset row
            b = obs.shape[0]
            rows = jax.tree.map(lambda z: z.reshape((b * n, -1)), actor_state)
            carry_in = reset_carry(rows, jnp.repeat(first, n))
            carry_out, (logits, value) = rec.apply(pp["params"], carry_in, jax.tree.map(lambda y: y.reshape(
                (1, b * n, *y.shape[2:])), x), jnp.zeros((1, b * n), bool))
            logits, value = logits.reshape((b, n, -1)), value.reshape((b, n))
            carry_in, actor_state = (jax.tree.map(lambda z: z.reshape((b, n, -1)), c) for c in (carry_in, carry_out))
            extras = dict(zip(keys, carry_in))  # the carry each row was acted with: row 0 of a segment starts its unroll
        action = categorical_sample(rng, logits)
        return action, {"logp": categorical_log_prob(logits, action), "value": value, **extras}, actor_state

    def update(state: TrainState, traj: Trajectory) -> tuple[TrainState, Metrics]:
        def per_agent(x: Array) -> Array:  # env data [R, B] -> agent columns [R, B*N]
            return jnp.repeat(x, n, axis=1)

        norm = state.norm
        mask_env = valid_mask(traj.terminated, traj.truncated)  # [T, B]
        if spec.agent_rewards:
            r_t = traj.obs[1:, :, :, row["reward"]][..., 0].reshape(mask_env.shape[0], -1)  # [T, B*N]
        else:
            r_t = traj.reward[1:]
            if norm_rew:
                r_t, norm = scale_rewards(norm, r_t, mask_env, traj.extras[RETURN_ACC][0], gamma, a.reward_norm_clip)
            r_t = per_agent(r_t)
        mask = per_agent(mask_env)  # [T, B*N]
        stored = traj.extras["value"].astype(jnp.float32).reshape(traj.reward.shape[0], -1)  # [T+1, B*N]
        values = stored * jnp.sqrt(norm.value.var + VAR_EPS) + norm.value.mean if a.value_norm else stored
        adv = gae(values, r_t, per_agent(traj.terminated[1:]), per_agent(traj.truncated[1:]), gamma, lam)
        ret = adv + values[:-1]
        if a.value_norm:  # targets in the critic's units with the stats updated from this batch
            norm = norm.replace(value=rms_update(norm.value, ret, mask))
            ret = (ret - norm.value.mean) / jnp.sqrt(norm.value.var + VAR_EPS)
        inputs = network_inputs(spec, a, traj.obs[:-1], state.norm.obs)  # the stats the actors used
        per_sample = {  # [T, B, N] (env-major agent columns as ``per_agent``)
            "action": traj.action[:-1],
            "logp": traj.extras["logp"][:-1].astype(jnp.float32),
            "value": stored[:-1].reshape(traj.action[:-1].shape),
            "adv": adv.reshape(traj.action[:-1].shape),
            "ret": ret.reshape(traj.action[:-1].shape),
            "mask": mask.reshape(traj.action[:-1].shape),
        }
        if rec is None:  # every (step, env, agent) its own sample, shuffled one by one
            samples = {"obs": jax.tree.map(lambda x: x.reshape((-1, *x.shape[3:])), inputs),
                       **{k: v.reshape(-1) for k, v in per_sample.items()}}
        else:  # whole agent columns [B * N, T], each with the carry it was acted with at row 0
            starts = jnp.broadcast_to(episode_starts(traj.terminated, traj.truncated)[:-1, :, None],
                                      traj.action[:-1].shape)
            carry = tuple(jnp.asarray(traj.extras[k][0], jnp.float32).reshape((-1, a.lstm_size)) for k in keys)
            samples = {"obs": {"inputs": jax.tree.map(agent_columns, inputs), "first": agent_columns(starts),
                               "carry": carry}, **{k: agent_columns(v) for k, v in per_sample.items()}}
        rng, key = jax.random.split(state.rng)
        (params, opt_state), stats = actor_critic.run_epochs(
            sgd_step, (state.params, state.opt_state), samples, jax.random.split(key, epochs), num_mb)
        if a.normalize_obs:
            norm = norm.replace(obs=rms_update(norm.obs, traj.obs[:-1], mask_env))
        metrics = {k: jnp.mean(v) for k, v in stats.items()}
        metrics["explained_variance"] = explained_variance(samples["value"], samples["ret"], samples["mask"])
        metrics["lr"] = jnp.asarray(schedule(state.step * steps_per_update), jnp.float32)
        if spec.action_mask:
            metrics["legal_actions"] = jnp.mean(jnp.sum(inputs["mask"], -1).astype(jnp.float32))
        return TrainState(params=params, opt_state=opt_state, norm=norm, step=state.step + 1, rng=rng), metrics

    return Algorithm(
        init=init,
        policy_params=lambda state: {"params": state.params, "obs_norm": state.norm.obs},
        initial_actor_state=initial_actor_state,
        act=act,
        update=update,
        extras_spec={"logp": ((n,), "float32"), "value": ((n,), "float32"),
                     **{k: ((n, a.lstm_size), "float32") for k in keys}},
        return_gamma=gamma if norm_rew else None,
    )
