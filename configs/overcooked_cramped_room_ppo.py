"""Overcooked ``cramped_room`` (JaxMARL's port: two cooks, one kitchen, 400-step episodes, 20 a delivered soup) with
MAPPO on the Anakin path: env, rollout and update compiled into one program.

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/overcooked_cramped_room_ppo.py 'seeds=[1,2]'

Each agent's row is its own view (4 x 5 x 26 grid, flattened: 520) and its own learning reward (the delivery reward
plus ``env.options.reward_shaping`` times JaxMARL's shaped reward: 3 an onion in a pot, 3 a dish picked up, 5 a soup
picked up; ``envs/jax_envs/jaxmarl_family.py``). ``episode_return`` is the delivery reward alone (the score), the
figure JaxMARL's IPPO logs as ``returned_episode_returns``. One actor and one critic shared by the two cooks (told
their index); the critic sees both views (MAPPO: the env gives no global state). JaxMARL's IPPO
(``baselines/IPPO/config/ippo_ff_overcooked.yaml``) anneals its shaping from 1 to 0 over 2.5M steps; a family has no
run-wide step count, so the weight here is constant (0.5).

Measured (bench/RESULTS.md, "Overcooked cramped_room at 2M", session 26, issue 41): at the shipped 2M env steps,
seeds 1 / 2 / 3 packed in one program, return 240.0 / 240.0 / 240.0 over the last 20 episodes (mean of the last 48
lines 239.9 / 239.8 / 240.0), beside JaxMARL's IPPO at 236.4 / 238.1 / 238.8 (episodes ended in its last 48
updates) for the same steps and seeds, run the same day. Earlier (session 24) at 204,800 env steps: 15.0 / 12.0 /
11.0 against JaxMARL's 15.00 / 9.38 / 11.25.
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=235.0, worst=230.0, seeds=(1, 2, 3), wall_s=2400, quick=False,
    source="bench/RESULTS.md (Overcooked cramped_room at 2M, session 26, issue 41): at 1,998,848 env steps the last "
    "line's return (last 20 episodes) 240.0 / 240.0 / 240.0 for seeds 1 / 2 / 3 (packed, 'seeds=[1,2,3]' "
    "seeds_batch=3: ~39 min for the three at load 4-26), JaxMARL's IPPO 236.4 / 238.1 / 238.8 at the same steps",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=2_000_000,
        env=EnvConfig(id="jaxmarl/overcooked:cramped_room", num_envs=16, options={"reward_shaping": 0.5}),
        algo=MAPPOConfig(critic="central", num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                         hidden_sizes=(64, 64), activation="tanh"),
        trainer=TrainerConfig(lr=2.5e-4, num_minibatches=4, update_epochs=4, max_grad_norm=0.5, anneal_lr=True),
        timeout_seconds=3600,
    )
