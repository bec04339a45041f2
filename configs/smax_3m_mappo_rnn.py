"""SMAX ``3m`` with recurrent MAPPO on the Anakin path: the actor is an MLP torso, an LSTM and the policy head (one
carry per marine, zeroed at each episode's start), the critic feed-forward on SMAX's world state (``algos/mappo.py``).

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/smax_3m_mappo_rnn.py 'seeds=[1,2,3]' seeds_batch=3   # three seeds in one program

Settings after JaxMARL's recurrent MAPPO for SMAX (``baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml``: 128
envs x 128 steps, 4 epochs of 4 minibatches, clip 0.2, entropy 0, grad norm 0.25 on the actor's and the critic's
gradients apart (``clip_per_network``: its two optimisers), relu, lr 2e-3 annealed). JaxMARL's cell is a GRU of 128 in
the actor and in the critic; here an LSTM of 64 (the MAPPO paper's rMAPPO size for SMAC) in the actor only, torsos
64 x 64: a quarter of the update's arithmetic, which this 2-core box needs to train three seeds in an hour.

Measured (bench/RESULTS.md, "SMAX 3m recurrent MAPPO", session 25): seeds 1-3 packed in one process, 2M env
steps, 3,189 s at load 7-15: last-line win rates 0.765 / 0.785 / 0.765 (window 200), best 3-line mean returns
1.76 / 1.79 / 1.75. Below the issue's 0.9 and below JaxMARL's own recurrent MAPPO run the same day (seed 0: 0.855 at
2M); faster per env step than ``smax_3m_mappo_rnn`` without ``clip_per_network`` (0.515-0.615 against 0.68-0.725
at 0.70M) and than the feed-forward ``smax_3m_mappo.py`` early, not at 2M.
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, LogConfig, Promise, TrainerConfig

PROMISE = Promise(
    "best_return", median=1.75, worst=1.74, seeds=(1, 2, 3), wall_s=3200, quick=False,
    source="bench/RESULTS.md (SMAX 3m recurrent MAPPO, session 25): seeds 1-3 packed at 2M env steps, best 3-line "
    "mean return 1.76 / 1.79 / 1.75 (a mean return R means a win rate >= R - 1; last-line win rates 0.765 / 0.785 / "
    "0.765); the three seeds in one process 3,189 s at load 7-15")


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=2_000_000,
        env=EnvConfig(id="jaxmarl/smax:3m", num_envs=128),
        algo=MAPPOConfig(critic="central", num_steps=128, clip_coef=0.2, ent_coef=0.0, gamma=0.99, gae_lambda=0.95,
                         hidden_sizes=(64, 64), activation="relu", lstm_size=64, clip_per_network=True),
        trainer=TrainerConfig(lr=2e-3, num_minibatches=4, update_epochs=4, max_grad_norm=0.25, anneal_lr=True),
        log=LogConfig(window=200),
        timeout_seconds=7200,
    )
