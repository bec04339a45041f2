"""The environment seam: one ``make`` for envpool tasks, gymnasium envs, probes and your own.

    import envs
    from srljax.config import EnvConfig

    env = envs.make(EnvConfig(id="Pong-v5", num_envs=8), seed=1)                # envpool
    env = envs.make(EnvConfig(id="CartPole-v1", factory="envs.gym_adapter:make_gymnasium"), seed=1)
    env = envs.make(EnvConfig(factory="envs.probe:make_constant_reward", max_episode_steps=10), seed=1)
    env = envs.make(EnvConfig(factory="my_package.my_module:make_env"), seed=1)  # yours
    env = envs.make(EnvConfig(id="gymnax/CartPole-v1", num_envs=8), seed=1)      # a JAX env (envs/jax_envs/)

Every one is a ``VecEnv`` (see ``envs/base.py``).
"""

from __future__ import annotations

from typing import Any

from envs.atari import atari_option_problems
from envs.base import VecEnv
from envs.football import football_option_problems, is_football
from envs.multi_agent import is_multi_agent_envpool, num_agents_before_launch
from envs.options import option_problems
from envs.probe import ConstantRewardTimeLimit, TerminalReward
from srljax.config import EnvConfig
from srljax.config.env import jax_family
from srljax.objects import load_object
from srljax.types import EnvSpec

__all__ = ["make", "problems", "fit_problems", "VecEnv", "ConstantRewardTimeLimit", "TerminalReward"]


def make(cfg: EnvConfig, seed: int) -> VecEnv:
    """Build the VecEnv that ``cfg`` describes: ``cfg.factory`` if set, else envpool ``cfg.id``;
    observations masked to ``cfg.obs_mask`` if set (``envs/obs_mask.py``)."""
    env = _make(cfg, seed)
    if cfg.obs_mask:
        from envs.obs_mask import ObsMask

        if env.spec.num_agents > 1:
            env.close()
            raise ValueError(f"env.obs_mask={cfg.obs_mask}: {env.spec.id} is a multi-agent env (obs [B, N, F], "
                             "envs/multi_agent.py), which obs_mask does not handle; mask the views in your own env")

        return ObsMask(env, cfg.obs_mask)
    return env


def _make(cfg: EnvConfig, seed: int) -> VecEnv:
    match cfg.factory:
        case "" if cfg.is_jax:
            from envs.jax_envs.host import JaxVecEnv

            return JaxVecEnv(cfg, seed)
        case "" if is_multi_agent_envpool(cfg.id):
            from envs.multi_agent import EnvpoolMultiAgentVecEnv

            return EnvpoolMultiAgentVecEnv(cfg, seed)
        case "":
            from envs.envpool_env import EnvpoolVecEnv  # imported here: envpool is slow to load

            return EnvpoolVecEnv(cfg, seed)
        case factory:
            return _from_factory(factory, cfg, seed)


def problems(cfg: EnvConfig, algo: Any = None) -> list[str]:
    """What would stop ``make(cfg)``, found without building an env (launchers check it first):
    an envpool id that does not exist, a factory that does not import, or ``env.options`` the family
    does not take (Atari's, ``envs/atari.py``; a factory's ``make_fn.options``, ``envs/options.py``); with
    ``algo`` (an algo config), also an envpool task's spaces that it or its network does not take
    (``algos/fit.py``: action kinds, Dict observations, image channels, the CNN's fit), and for a factory the same
    on one copy built here (a factory that cannot build here, e.g. needing a compute node's resources, is left to
    the run, where the network's construction checks it again)."""
    if cfg.factory:
        try:
            make_fn = _factory(cfg.factory)
        except ValueError as error:
            return [str(error)]
        schema = getattr(make_fn, "options", None)  # the family's declared options (envs/options.py), if any
        out = option_problems(cfg.options, schema, f"env.factory={cfg.factory!r}") if schema is not None else []
        values = getattr(make_fn, "option_problems", None)  # the family's own value checks, if any
        out = out or (list(values(cfg.options)) if values is not None else [])
        if not out and algo is not None and not getattr(algo, "multi_agent", False):
            out += _built_space_problems(cfg, algo)
        return out
    if cfg.is_jax:
        from envs import jax_envs

        out = jax_envs.problems(cfg)
        if not out and algo is not None and not getattr(algo, "multi_agent", False):
            from algos.fit import spec_problems

            spec = jax_envs.make(cfg).spec
            if spec.num_agents > 1:
                return [f"algo={algo.name} acts for one agent and {cfg.id} has {spec.num_agents} (obs [B, N, F], "
                        "envs/multi_agent.py); use a multi-agent algorithm: algo=mappo (algo.critic=local for IPPO)"]
            out += spec_problems(algo, spec)
        return out
    from envs.envpool_env import is_atari, unknown_id_problem

    problem = unknown_id_problem(cfg.id)
    if problem:
        return [problem]
    out = (atari_option_problems(cfg) if is_atari(cfg.id) else
           football_option_problems(cfg) if is_football(cfg.id) else [])
    # a multi-agent algorithm checks the spec of the agents' rows itself (``fit_problems`` refuses a one-agent task)
    if not out and algo is not None and not is_multi_agent_envpool(cfg.id) and not getattr(algo, "multi_agent", False):
        out += _space_problems(cfg, algo)
    return out


def fit_problems(cfg: Any) -> list[str]:
    """Whether an experiment's algorithm and agent table fit its env, found without building it: an algorithm
    that needs several agents (``multi_agent`` on its config) on a one-agent envpool task, a ``policies.agents``
    table of the wrong length for an envpool multi-agent task."""
    e, out = cfg.env, []
    if (getattr(cfg.algo, "multi_agent", False) and not e.factory and not is_multi_agent_envpool(e.id)
            and jax_family(e.id) != "jaxmarl"):
        out.append(f"algo={cfg.algo.name} needs a multi-agent env, and env.id={e.id!r} has one agent; use "
                   "LevelBasedForaging-v0, RobotWarehouse-v0, a JaxMARL env (jaxmarl/smax:3m, envs/jax_envs/"
                   "jaxmarl_family.py) or a multi-agent env.factory (e.g. envs.multi_agent:make_pettingzoo), or "
                   "algo=ppo for a single agent")
    agents, n = cfg.policies.agents, num_agents_before_launch(e)
    if cfg.policies.enabled and n is not None and agents and len(agents) != n:
        if len(agents) < n:
            out.append(f"agents {list(range(len(agents), n))} of {e.id} ({n} agents) are mapped to no "
                       f"policy: policies.agents has {len(agents)} entries; give one policy name per agent")
        else:
            out.append(f"policies.agents has {len(agents)} entries but {e.id} has {n} agents; give one "
                       "policy name per agent")
    return out


def described_spec(e: EnvConfig) -> EnvSpec | None:
    """The spec envpool describes for ``e`` without building an env (None where envpool cannot describe it: an
    ``env.factory``, or options it refuses, which the checks name). Raises ``ValueError`` for spaces srljax cannot
    map."""
    import dataclasses
    import warnings

    import envpool

    from envs.envpool_env import envpool_options
    from envs.spaces import spec_from_spaces

    if e.factory:
        return None
    if e.is_jax:
        from envs import jax_envs

        try:
            return jax_envs.make(e).spec
        except (ImportError, ValueError):  # what envs.problems names (a missing family, an unknown name or option)
            return None
    with warnings.catch_warnings():  # envs.problems warns about options that do not apply
        warnings.simplefilter("ignore")
        try:
            described = envpool.make_spec(e.id, **envpool_options(e, seed=0))
        except Exception:  # noqa: BLE001 - envpool refuses what the config checks name (e.g. env.num_envs=0)
            return None
        spaces = described.gymnasium_observation_space, described.gymnasium_action_space
    spec = spec_from_spaces(e.id, *spaces, num_envs=e.num_envs, batch_size=e.envs_per_recv, max_episode_steps=0,
                            image_channels_declared=e.image_channels)
    if e.obs_mask:  # envs/obs_mask.py: the kept indices of the flattened observation
        spec = dataclasses.replace(spec, obs_shape=(len(e.obs_mask),), image_channels="", obs_keys=(), obs_key_sizes=())
    return spec


def _space_problems(e: EnvConfig, algo: Any) -> list[str]:
    """``algos.fit.spec_problems`` on the spec envpool describes for ``e`` (envpool builds no env for it)."""
    from algos.fit import spec_problems

    try:
        spec = described_spec(e)
    except ValueError as error:
        return [str(error)]
    return [] if spec is None else spec_problems(algo, spec)


def _built_space_problems(e: EnvConfig, algo: Any) -> list[str]:
    import dataclasses

    from algos.fit import spec_problems

    try:
        env = make(dataclasses.replace(e, num_envs=1, batch_size=0), seed=0)
    except Exception:  # noqa: BLE001 - left to the run, which reports it where the env is meant to run
        return []
    try:
        return [] if env.spec.num_agents > 1 else spec_problems(algo, env.spec)
    finally:
        env.close()


def _factory(factory: str):
    make_fn = load_object(factory, "env.factory")
    if not callable(make_fn):
        raise ValueError(f"env.factory={factory!r} is not a function (called as make_fn(env_config, seed))")
    return make_fn


def _from_factory(factory: str, cfg: EnvConfig, seed: int) -> VecEnv:
    env = _factory(factory)(cfg, seed)
    if not isinstance(env, VecEnv):
        missing = [n for n in ("spec", "reset", "step", "async_reset", "send", "recv", "close") if not hasattr(env, n)]
        raise TypeError(
            f"env.factory={factory!r} returned {type(env).__name__}, which lacks {', '.join(missing)} "
            "of the VecEnv interface (envs/base.py)"
        )
    return env
