"""Random play on a JAX env, the baseline beside a config's return in bench/RESULTS.md (the Anakin path).

    python bench/jax_random_play.py jumanji/Snake-v1 3000          # env id, steps per env (32 envs)

Uniformly random legal actions (the ``action_mask`` leaf where the env has one) through ``envs.jax_envs.JaxEnv`` in
one ``lax.scan``; prints how many episodes finished and their mean return (episodes cut off at the end are not
counted, so where episodes are long the short ones weigh more).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from envs import jax_envs
from srljax.config import EnvConfig

ENVS = 32


def random_returns(env_id: str, steps: int, seed: int = 0) -> np.ndarray:
    env = jax_envs.make(EnvConfig(id=env_id, num_envs=ENVS))
    if env.spec.action_kind != "discrete":
        raise SystemExit(f"{env_id}: random play here draws discrete actions; its actions are {env.spec.action_kind}")
    legal = env.spec.legal_actions

    def body(carry: tuple, key: jax.Array) -> tuple:
        state, obs = carry
        logits = jnp.zeros((ENVS, env.spec.num_actions))
        if legal:
            logits = jnp.where(obs[:, legal[0]:legal[1]] > 0.5, 0.0, -1e9)
        state, ts = env.step(state, jax.random.categorical(key, logits).astype(jnp.int32))
        return (state, ts.obs), ts.episode_return

    @jax.jit
    def run(key: jax.Array) -> jax.Array:
        state, ts = env.reset(key)
        return jax.lax.scan(body, (state, ts.obs), jax.random.split(key, steps))[1]

    returns = np.asarray(run(jax.random.PRNGKey(seed)))
    return returns[~np.isnan(returns)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id")
    parser.add_argument("steps", type=int, help="steps per env")
    args = parser.parse_args()
    returns = random_returns(args.env_id, args.steps)
    mean = f"{returns.mean():.3f}" if len(returns) else "-"
    print(f"{args.env_id} random play: {len(returns)} episodes finished, mean return {mean}")


if __name__ == "__main__":
    main()
