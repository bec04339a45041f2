"""JaxMARL's multi-agent envs as a ``Family`` with the agent axis: ``env.id=jaxmarl/<kind>[:<name>]``.

    jaxmarl/smax:3m                  SMAX (SMAC's units and maps in JAX) against JaxMARL's heuristic enemy
    jaxmarl/mpe:simple_spread        an MPE scenario (JaxMARL's ``MPE_<name>_v*``)
    jaxmarl/overcooked:cramped_room  Overcooked on one of JaxMARL's layouts
    jaxmarl/hanabi                   Hanabi (``env.options.num_agents``, 2 by default); turn-based

The env's observation is ``[N, F]`` float32, one packed row per agent as every multi-agent env's
(``EnvSpec.agent_row()``, ``envs/multi_agent.py``): the agent's own view (flattened), the global state where the env
gives one (SMAX's ``world_state``), the agent's own reward where rewards differ per agent (MPE), and its legal-action
flags where the env has them (SMAX's available actions, Hanabi's legal moves). The action is ``[N]`` int32, one per
agent; ``TimeStep.reward`` is the team reward: the shared one where every agent gets the same (SMAX, Overcooked,
Hanabi), the agents' sum otherwise (MPE). Hanabi is turn-based: only the player to move has more than one legal
move (the others' only legal move is JaxMARL's no-op), so the masked policy (``algos/mappo.py``) sends the no-op for
the others, and JaxMARL's step reads the mover's action alone (whatever the others send changes nothing). Its team
reward is the change in the fireworks built, less all of them when the last life goes: an episode's return is its
score (0 for a lost game).

Overcooked's ``env.options.reward_shaping=w`` (this module's option, not the env's; 0 by default): each agent's row
carries its learning reward, the delivery reward plus ``w`` times JaxMARL's shaped reward (3 an onion into a pot, 3 a
dish picked up, 5 a soup picked up; ``EnvSpec.agent_rewards``, which MAPPO learns from), while the team reward, the
episode return, stays the delivery reward alone (20 a soup): the score JaxMARL's IPPO logs. JaxMARL anneals its
shaping to 0 over its run; a family sees no run-wide step count, so ``w`` is constant.

Episode ends: a wiped-out team (SMAX) and a finished game (Hanabi) terminate; a time limit (SMAX's ``max_steps``,
MPE's, Overcooked's) truncates. SMAX reports each episode's outcome (``Family.won``: every enemy dead and an ally
alive), so the Anakin loop's lines carry ``win_rate`` over the episode window beside ``episode_return``. SMAX's
team reward is JaxMARL's: the enemies' health lost (1.0 when all are dead) plus 1.0 for a win, so a window's mean
return ``R`` bounds its win rate from below by ``R - 1``.

``env.options`` are the env constructor's keyword arguments (checked against its signature before launch: e.g.
``env.options.enemy_shoots=false`` for SMAX, ``env.options.local_ratio=0.5`` for MPE), and
``env.max_episode_steps`` is the time limit in env steps (not Hanabi's, whose game ends by its rules): JaxMARL's
``max_steps`` is set to it, less the one step SMAX and MPE add (they test the count before counting the step, so
their defaults 100 and 25 are episodes of 101 and 26 steps; ``EnvSpec.max_episode_steps`` says the real length).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import EnvSpec

KINDS = ("smax", "mpe", "overcooked", "hanabi")


@dataclass(frozen=True)
class _Kind:
    shared_reward: bool  # every agent gets the same reward: the team reward is one agent's
    terminated: Callable[[Any, Any], Any]  # (env, inner after a done) -> terminated (else a time limit)
    mask: Callable[[Any, Any], Any] | None = None  # (env, inner) -> {agent: [A]}
    won: Callable[[Any, Any], Any] | None = None  # (env, inner after a done) -> bool
    time_limit: bool = True  # takes max_steps
    late: int = 0  # JaxMARL ends the episode on step max_steps + late (SMAX and MPE test the count before adding 1)
    extra: tuple[str, ...] = ()  # ``env.options`` keys this module reads itself (not the env constructor's)


def _smax_terminated(env: Any, inner: Any) -> Any:
    alive = inner.state.unit_alive
    return ~jnp.any(alive[:env.num_allies]) | ~jnp.any(alive[env.num_allies:])


def _smax_won(env: Any, inner: Any) -> Any:
    alive = inner.state.unit_alive
    return jnp.any(alive[:env.num_allies]) & ~jnp.any(alive[env.num_allies:])


_KINDS = {
    "smax": _Kind(True, _smax_terminated, mask=lambda env, inner: env.get_avail_actions(inner), won=_smax_won,
                  late=1),
    "mpe": _Kind(False, lambda env, inner: jnp.zeros((), bool), late=1),
    "overcooked": _Kind(True, lambda env, inner: jnp.zeros((), bool), extra=("reward_shaping",)),
    "hanabi": _Kind(True, lambda env, inner: jnp.ones((), bool), mask=lambda env, inner: env.get_legal_moves(inner),
                    time_limit=False),
}


def _parse(env_id: str) -> tuple[str, str]:
    kind, _, name = env_id.split("/", 1)[1].partition(":")
    return kind, name


def _names(kind: str) -> list[str]:
    """The names a kind takes (SMAX maps, MPE scenarios, Overcooked layouts; Hanabi none)."""
    if kind == "smax":
        from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

        return sorted(MAP_NAME_TO_SCENARIO)
    if kind == "mpe":
        from jaxmarl.registration import registered_envs

        return sorted(e[len("MPE_"):].rsplit("_v", 1)[0] for e in registered_envs if e.startswith("MPE_"))
    if kind == "overcooked":
        from jaxmarl.environments.overcooked import overcooked_layouts

        return sorted(overcooked_layouts)
    return []


def _constructor(kind: str, name: str) -> tuple[Callable[..., Any], dict[str, Any], list[Callable[..., Any]]]:
    """(the class, the keyword arguments the id fixes, the callables whose keywords ``env.options`` may set)."""
    if kind == "smax":
        from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario
        from jaxmarl.environments.smax.smax_env import SMAX

        return HeuristicEnemySMAX, {"scenario": map_name_to_scenario(name)}, [HeuristicEnemySMAX, SMAX]
    if kind == "mpe":
        import jaxmarl
        from jaxmarl.registration import registered_envs

        env_id = next(e for e in registered_envs if e.startswith(f"MPE_{name}_v"))
        cls = type(jaxmarl.make(env_id))
        return cls, {}, [cls]
    if kind == "overcooked":
        from jaxmarl.environments.overcooked import Overcooked, overcooked_layouts

        return Overcooked, {"layout": overcooked_layouts[name]}, [Overcooked]
    from jaxmarl.environments.hanabi import Hanabi

    return Hanabi, {}, [Hanabi]


def _keywords(fns: list[Callable[..., Any]]) -> set[str]:
    out: set[str] = set()
    for fn in fns:
        out |= {p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"}
    return out


def problems(cfg: EnvConfig) -> list[str]:
    kind, name = _parse(cfg.id)
    if kind not in KINDS:
        return [f"env.id={cfg.id!r}: jaxmarl envs here are {', '.join(f'jaxmarl/{k}' for k in KINDS)} "
                "(e.g. jaxmarl/smax:3m, jaxmarl/mpe:simple_spread, jaxmarl/overcooked:cramped_room, jaxmarl/hanabi)"]
    names = _names(kind)
    if kind == "hanabi" and name:
        return [f"env.id={cfg.id!r}: Hanabi takes no name; use jaxmarl/hanabi (players: env.options.num_agents)"]
    if kind != "hanabi" and name not in names:
        return [f"env.id={cfg.id!r}: jaxmarl {kind} has no {name!r}; use jaxmarl/{kind}:<name> with one of "
                f"{', '.join(names)}"]
    if cfg.max_episode_steps and not _KINDS[kind].time_limit:
        return [f"env.max_episode_steps={cfg.max_episode_steps}: {cfg.id} ends by its rules and has no time limit; "
                "leave it 0"]
    if cfg.max_episode_steps and cfg.max_episode_steps <= _KINDS[kind].late:
        return [f"env.max_episode_steps={cfg.max_episode_steps}: {cfg.id}'s episodes last at least "
                f"{_KINDS[kind].late + 1} steps; give more"]
    shaping = cfg.options.get("reward_shaping", 0.0)
    if "reward_shaping" in cfg.options and (not isinstance(shaping, int | float) or isinstance(shaping, bool)
                                            or shaping < 0):
        return [f"env.options.reward_shaping={shaping!r}: give a weight >= 0 (0: the delivery reward alone)"]
    if "max_steps" in cfg.options:
        return [f"env.options.max_steps: set the time limit with env.max_episode_steps={cfg.options['max_steps']} "
                "(env steps per episode)"]
    _, fixed, fns = _constructor(kind, name)
    known = (_keywords(fns) - set(fixed)) | set(_KINDS[kind].extra)
    unknown = sorted(set(cfg.options) - known)
    if unknown:
        return [f"env.options has {', '.join(unknown)}, which {cfg.id} does not take; its options: "
                f"{', '.join(sorted(known))}"]
    return []


def build(cfg: EnvConfig) -> Any:
    """The JaxMARL env ``cfg`` names (one, unbatched)."""
    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    kind, name = _parse(cfg.id)
    cls, fixed, _ = _constructor(kind, name)
    kwargs = {**fixed, **{k: v for k, v in cfg.options.items() if k not in _KINDS[kind].extra}}
    if cfg.max_episode_steps:
        kwargs["max_steps"] = cfg.max_episode_steps - _KINDS[kind].late
    return cls(**kwargs)


def family(cfg: EnvConfig) -> Family:
    kind_name, _ = _parse(cfg.id)
    env = build(cfg)
    kind = _KINDS[kind_name]
    agents = list(env.agents)
    n = len(agents)
    spaces = [env.action_space(a) for a in agents]
    num_actions = int(spaces[0].n)
    if any(int(getattr(s, "n", -1)) != num_actions for s in spaces):
        raise ValueError(f"env.id={cfg.id!r}: its agents' action spaces differ ({spaces}); the agent axis needs one "
                         "Discrete(n) for every agent")
    obs, inner = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    view = max(int(jnp.size(jnp.zeros(obs[a].shape))) for a in agents)
    if any(int(jnp.size(jnp.zeros(obs[a].shape))) != view for a in agents):
        raise ValueError(f"env.id={cfg.id!r}: its agents' observations differ in size; the agent axis needs one size")
    state_size = int(jnp.size(jnp.zeros(obs["world_state"].shape))) if "world_state" in obs else 0
    shaping = float(cfg.options.get("reward_shaping", 0.0))
    per_agent = not kind.shared_reward or shaping > 0
    limit = int(getattr(env, "max_steps", 0) or 0) + kind.late if kind.time_limit else 0
    spec = EnvSpec(id=cfg.id, obs_shape=(n, view + state_size + int(per_agent) + (num_actions if kind.mask else 0)),
                   obs_dtype="float32", action_kind="discrete", num_actions=num_actions, action_shape=(n,),
                   max_episode_steps=limit, num_agents=n, agent_obs_size=view, state_size=state_size,
                   agent_rewards=per_agent, action_mask=kind.mask is not None)

    def rows(obs: dict[str, Any], inner: Any, reward: Any) -> Any:
        parts = [jnp.stack([jnp.ravel(obs[a]).astype(jnp.float32) for a in agents])]
        if state_size:
            parts.append(jnp.broadcast_to(jnp.ravel(obs["world_state"]).astype(jnp.float32), (n, state_size)))
        if per_agent:
            parts.append(reward[:, None])
        if kind.mask is not None:
            legal = kind.mask(env, inner)
            parts.append(jnp.stack([jnp.asarray(legal[a], jnp.float32) for a in agents]))
        return jnp.concatenate(parts, axis=-1)

    def reset(key: Any) -> Any:
        obs, inner = env.reset(key)
        return rows(obs, inner, jnp.zeros(n, jnp.float32)), inner

    def step(key: Any, inner: Any, action: Any) -> Any:
        obs, inner, reward, dones, info = env.step_env(key, inner, {a: action[i] for i, a in enumerate(agents)})
        reward = jnp.stack([jnp.asarray(reward[a], jnp.float32) for a in agents])
        done = jnp.asarray(dones["__all__"], bool)
        terminated = done & kind.terminated(env, inner)
        team = reward[0] if kind.shared_reward else jnp.sum(reward)
        if shaping:  # the agents learn from the shaped reward; the team's (the score) stays the env's own
            reward = reward + shaping * jnp.stack([jnp.asarray(info["shaped_reward"][a], jnp.float32) for a in agents])
        return rows(obs, inner, reward), inner, team, terminated, done & ~terminated

    won = None if kind.won is None else (lambda inner: kind.won(env, inner))
    return Family(spec, reset, step, won=won)
