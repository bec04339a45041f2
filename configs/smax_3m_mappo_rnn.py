"""SMAX ``3m`` with recurrent MAPPO on the Anakin path: the actor is an MLP torso, an LSTM and the policy head (one
carry per marine, zeroed at each episode's start), the critic feed-forward on SMAX's world state (``algos/mappo.py``).

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/smax_3m_mappo_rnn.py 'seeds=[1,2,3]' seeds_batch=3   # three seeds in one program

Settings after JaxMARL's recurrent MAPPO for SMAX (``baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml``: 128
envs x 128 steps, 4 epochs of 4 minibatches, clip 0.2, entropy 0, grad norm 0.25, relu, lr 2e-3 annealed, a recurrent
cell of 128); JaxMARL's cell is a GRU in the actor and in the critic, here an LSTM in the actor only, and 64 units
(the MAPPO paper's rMAPPO size for SMAC) rather than 128: a quarter of the update's arithmetic, which this 2-core box
needs to train three seeds in an hour.
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, LogConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=2_000_000,
        env=EnvConfig(id="jaxmarl/smax:3m", num_envs=128),
        algo=MAPPOConfig(critic="central", num_steps=128, clip_coef=0.2, ent_coef=0.0, gamma=0.99, gae_lambda=0.95,
                         hidden_sizes=(64, 64), activation="relu", lstm_size=64),
        trainer=TrainerConfig(lr=2e-3, num_minibatches=4, update_epochs=4, max_grad_norm=0.25, anneal_lr=True),
        log=LogConfig(window=200),
        timeout_seconds=7200,
    )
