"""Several policies over one multi-agent env as one ``Algorithm``: each policy acts for its agents' columns.

Shape letters: T transitions, B envs, N agents of the env, F packed row features, ``N_p`` agents of policy p.

    algo = make_multi_policy(cfg, spec)           # cfg.policies names the policies (srljax/config/policies.py)
    action, extras, _ = algo.act(params, obs, (), None, key)    # obs [B, N, F] -> action [B, N]
    parts = split_trajectory(cfg, spec, traj)     # {name: Trajectory [T+1, B] of that policy's agents}

A policy sees the env as ``policy_spec(spec, agents)``: its own agents' rows only, each row carrying the
agent's view, the *whole env's* state (the env's global state, or every agent's view concatenated when the
env has none, so a centralised critic of a one-agent policy still sees the whole game), the agent's reward
and its legal actions. ``policy_rows`` cuts those rows from the env's; it is plain indexing and works on
numpy and jax arrays alike, so actors split segments with it and ``act`` calls it inside jit.

The composite's params are ``{name: {"net": that policy's params, "version": its params version}}`` and its
extras are the policies' own, prefixed ``<name>/``, plus ``<name>/version`` per env row: the version of the
params that acted, so a segment split per policy carries each policy's own ``policy_version``. Its train
state (single process) is ``{name: that policy's TrainState}``, and its update splits the batch and updates
every policy that is not ``frozen``; metrics come back as ``<name>/<metric>``. The distributed workers use
the same composite for acting (actors, policy workers) and one plain per-policy algorithm per trainer.

A composite may act a subset of the policies (``names``: inference chosen per policy, an actor's inline ones):
``act`` then returns the env's action with only those policies' agents' columns set. With ``rows=True`` (a policy
worker serving the remote policies) its ``obs`` are already the served agents' rows ``[B, N_s, F_p]``
(``policy_rows(spec, served_agents(cfg, names), obs)``, cut by the actor), and its action is ``[B, N_s]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from algos.base import Algorithm, TrainState
from algos.mappo import make_mappo
from srljax.config import Experiment, policy_experiment
from srljax.types import EnvSpec, Trajectory

VERSION = "version"


def policy_spec(spec: EnvSpec, agents: tuple[int, ...]) -> EnvSpec:
    """The env as a policy controlling ``agents`` sees it (rows: own view | env state | own reward | mask)."""
    state = spec.state_size or spec.num_agents * spec.agent_obs_size
    size = spec.agent_obs_size + state + int(spec.agent_rewards) + (spec.num_actions if spec.action_mask else 0)
    n = len(agents)
    return dataclasses.replace(spec, obs_shape=(n, size), action_shape=(n,), num_agents=n, state_size=state)


def policy_rows(spec: EnvSpec, agents: tuple[int, ...], obs: Any) -> Any:
    """Env rows ``obs [..., N, F]`` (numpy or jax) -> the policy's rows ``[..., N_p, F_p]`` (``policy_spec``)."""
    xp = np if isinstance(obs, np.ndarray) else jnp
    row, idx = spec.agent_row(), list(agents)
    mine = obs[..., idx, :]
    view, rest = mine[..., row["view"]], mine[..., row["reward"].start:]  # reward and mask end every row
    if spec.state_size:
        state = mine[..., row["state"]]
    else:  # every agent's view, in agent order, the same for each of this policy's agents
        every = obs[..., row["view"]]
        every = every.reshape((*every.shape[:-2], 1, spec.num_agents * spec.agent_obs_size))
        state = xp.broadcast_to(every, (*mine.shape[:-1], every.shape[-1]))
    return xp.concatenate([view, state.astype(view.dtype), rest], axis=-1)


def policy_agents(cfg: Experiment) -> dict[str, tuple[int, ...]]:
    """``{name: agent indices}`` in ``cfg.policies.named`` order."""
    return {name: cfg.policies.agents_of(name) for name in cfg.policies.names()}


def split_trajectory(cfg: Experiment, spec: EnvSpec, traj: Trajectory) -> dict[str, Trajectory]:
    """A composite segment ``[T+1, B]`` (env rows, every policy's extras) -> one segment per policy, each with
    its agents' rows and actions, its own extras (prefix dropped) and ``policy_version`` [B], the oldest
    version of its params that acted in the column. Env data (reward, flags) is shared."""
    out = {}
    for name, agents in policy_agents(cfg).items():
        prefix = f"{name}/"
        extras = {k[len(prefix):]: v for k, v in traj.extras.items() if k.startswith(prefix) and k != prefix + VERSION}
        version = traj.extras[prefix + VERSION]
        version = version.min(axis=0).astype(np.int32) if isinstance(version, np.ndarray) else version.min(axis=0)
        out[name] = Trajectory(obs=policy_rows(spec, agents, traj.obs), action=traj.action[..., list(agents)],
                               reward=traj.reward, terminated=traj.terminated, truncated=traj.truncated,
                               extras=extras, policy_version=version)
    return out


def served_agents(cfg: Experiment, names: tuple[str, ...]) -> tuple[int, ...]:
    """The agents the policies ``names`` control, ascending (the rows a policy worker serving them gets)."""
    return tuple(sorted(i for name in names for i in cfg.policies.agents_of(name)))


def served_spec(cfg: Experiment, spec: EnvSpec, names: tuple[str, ...]) -> EnvSpec:
    """The env as a policy worker serving ``names`` sees it: their agents' rows (``policy_spec``)."""
    return policy_spec(spec, served_agents(cfg, names))


def merge_actions(spec: EnvSpec, agents: dict[str, tuple[int, ...]], actions: dict[str, Any]) -> Any:
    """``{name: action [B, N_p]}`` -> the env's action ``[B, N]`` (every agent from its policy)."""
    first = next(iter(actions.values()))
    out = jnp.zeros((*first.shape[:-1], spec.num_agents), first.dtype)
    for name, idx in agents.items():
        out = out.at[..., list(idx)].set(actions[name])
    return out


def make_policy_algorithm(policy_cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """One policy's algorithm on its share of the env (``policy_spec``): MAPPO, which a policy of one agent may
    run (``policy_cfg`` is ``policy_experiment(cfg, name)``; ``policies_problems`` refuses other algorithms)."""
    return make_mappo(policy_cfg, spec, min_agents=1)


def make_multi_policy(cfg: Experiment, spec: EnvSpec, names: tuple[str, ...] | None = None,
                      rows: bool = False) -> Algorithm:
    """The composite algorithm of ``cfg.policies`` on the multi-agent ``spec`` (see the module docstring); ``names``:
    only those policies; ``rows``: ``obs`` are their agents' rows already (a policy worker's)."""
    if spec.num_agents != len(cfg.policies.agents):
        raise ValueError(f"policies.agents maps {len(cfg.policies.agents)} agents but {spec.id} has {spec.num_agents}; "
                         "give one policy name per agent")
    agents = {name: idx for name, idx in policy_agents(cfg).items() if names is None or name in names}
    served = served_agents(cfg, tuple(agents))
    positions = {name: [served.index(i) for i in idx] for name, idx in agents.items()}  # rows: where each policy's are
    order = list(cfg.policies.names())
    subs = {name: make_policy_algorithm(policy_experiment(cfg, name), policy_spec(spec, idx))
            for name, idx in agents.items()}
    frozen = {p.name for p in cfg.policies.named if p.frozen}
    gammas = {a.return_gamma for a in subs.values()}
    if gammas != {None}:
        raise ValueError("algo.normalize_reward with several policies is not built; set normalize_reward=False")

    def init(rng: jax.Array) -> dict[str, TrainState]:
        return {name: algo.init(jax.random.fold_in(rng, i)) for i, (name, algo) in enumerate(subs.items())}

    def policy_params(state: dict[str, TrainState]) -> dict[str, Any]:
        return {name: {"net": algo.policy_params(state[name]), VERSION: state[name].step} for name, algo in subs.items()}

    def acting(which: str) -> Any:
        def act(params: dict[str, Any], obs: Any, actor_state: Any, first: Any, rng: jax.Array) -> tuple[Any, dict, Any]:
            actions, extras = {}, {}
            for name, algo in subs.items():
                fn = getattr(algo, which)
                i = order.index(name)  # a policy's key is its own whichever composite acts it (a subset too)
                mine = obs[..., positions[name], :] if rows else policy_rows(spec, agents[name], obs)
                a, ex, _ = fn(params[name]["net"], mine, (), first, jax.random.fold_in(rng, i))
                actions[name] = a
                extras |= {f"{name}/{k}": v for k, v in ex.items()}
                extras[f"{name}/{VERSION}"] = jnp.broadcast_to(jnp.asarray(params[name][VERSION], jnp.int32), obs.shape[:1])
            if rows:  # the served agents' actions, in their row order
                first_action = next(iter(actions.values()))
                out = jnp.zeros((*first_action.shape[:-1], len(served)), first_action.dtype)
                for name, pos in positions.items():
                    out = out.at[..., pos].set(actions[name])
                return out, extras, actor_state
            return merge_actions(spec, agents, actions), extras, actor_state
        return act

    def update(state: dict[str, TrainState], traj: Trajectory) -> tuple[dict[str, TrainState], dict[str, Any]]:
        parts = split_trajectory(cfg, spec, traj)
        new, metrics = dict(state), {}
        for name, algo in subs.items():
            if name in frozen:
                continue
            new[name], m = algo.update(state[name], parts[name])
            metrics |= {f"{name}/{k}": v for k, v in m.items()}
        return new, metrics

    extras_spec = {f"{name}/{k}": v for name, algo in subs.items() for k, v in algo.extras_spec.items()}
    extras_spec |= {f"{name}/{VERSION}": ((), "int32") for name in subs}
    deterministic = all(a.act_deterministic is not None for a in subs.values())
    return Algorithm(init=init, policy_params=policy_params, initial_actor_state=lambda batch: (), act=acting("act"),
                     update=update, extras_spec=extras_spec,
                     act_deterministic=acting("act_deterministic") if deterministic else None)
