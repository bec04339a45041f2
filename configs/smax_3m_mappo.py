"""SMAX ``3m`` (JaxMARL's SMAC port: 3 marines against 3 marines of JaxMARL's heuristic enemy) with MAPPO on the
Anakin path: env, rollout and update compiled into one program.

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/smax_3m_mappo.py

Each agent's row is its own view (75), SMAX's world state (72, the centralised critic's input) and its 8 legal-action
flags (``envs/jax_envs/jaxmarl_family.py``); one actor and one critic are shared by the three marines (told their
index). The lines carry ``win_rate`` (every enemy dead, an ally alive) over the episode window beside
``episode_return`` (enemy health taken, 1.0, plus 1.0 for a win: a mean return R means a win rate >= R - 1).
Settings after JaxMARL's MAPPO for SMAX (``baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml``: 128 steps,
4 epochs of 4 minibatches, clip 0.05, entropy 0.01, grad norm 0.25, relu, annealed learning rate), feed-forward.
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=1.8, worst=1.7, seeds=(1, 2, 3), wall_s=600,
    source="bench/RESULTS.md (SMAX 3m MAPPO on the Anakin path)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=2_000_000,
        env=EnvConfig(id="jaxmarl/smax:3m", num_envs=64),
        algo=MAPPOConfig(critic="central", num_steps=128, clip_coef=0.05, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                         hidden_sizes=(128, 128), activation="relu"),
        trainer=TrainerConfig(lr=2e-3, num_minibatches=4, update_epochs=4, max_grad_norm=0.25, anneal_lr=True),
        timeout_seconds=1800,
    )
