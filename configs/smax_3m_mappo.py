"""SMAX ``3m`` (JaxMARL's SMAC port: 3 marines against 3 marines of JaxMARL's heuristic enemy) with MAPPO on the
Anakin path: env, rollout and update compiled into one program.

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/smax_3m_mappo.py
    python -m launch.local configs/smax_3m_mappo.py layout.mode=distributed layout.num_actors=2 \
        trainer.batch_envs=64 env.num_envs=32      # a worker graph: actors step SMAX on the host (also launch.slurm)

Each agent's row is its own view (75), SMAX's world state (72, the centralised critic's input) and its 8 legal-action
flags (``envs/jax_envs/jaxmarl_family.py``); one actor and one critic are shared by the three marines (told their
index). The lines carry ``win_rate`` (every enemy dead, an ally alive) over the episode window beside
``episode_return`` (enemy health taken, 1.0, plus 1.0 for a win: a mean return R means a win rate >= R - 1).
Settings after JaxMARL's MAPPO for SMAX (``baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml``: 128 steps,
4 epochs of 4 minibatches, clip 0.05, entropy 0.01, grad norm 0.25, relu, annealed learning rate), feed-forward, with
64 envs, 128x128 and lr 2e-3 (JaxMARL: 128 envs, a GRU, 4e-3 over 10M steps).

Measured (bench/RESULTS.md, "SMAX 3m MAPPO", seed 1 only, a crowded box): at 2M env steps the last line's win rate
0.85 and return 1.84 (last 20 episodes); the best 3 consecutive lines' mean return 1.84 (wins 0.95 / 0.8 / 0.85) at
1.84M; process 7 min. Not yet at the 0.9 the issue asks for on every seed; ``algo.clip_coef=0.2`` learned faster early
(win 0.84 at 1M, window 200) and sat at 0.79-0.85 through 1.6M.
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, Promise, TrainerConfig

PROMISE = Promise(
    "best_return", median=1.8, worst=1.8, seeds=(1,), wall_s=430, quick=False,
    source="bench/RESULTS.md (SMAX 3m MAPPO): seed 1, best 3-line mean return 1.84 at 1.84M of 2M (a mean return R "
    "means a win rate >= R - 1); 7 min 4 s on the 2-core box at load ~10",
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
