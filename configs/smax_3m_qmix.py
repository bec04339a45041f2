"""SMAX ``3m`` (JaxMARL's SMAC port: 3 marines against 3 marines of JaxMARL's heuristic enemy) with QMIX on the Anakin
path: recurrent epsilon-greedy acting, a replay of sequences on the device and the gradient steps in one program.

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/smax_3m_qmix.py
    python -m launch.local configs/smax_3m_qmix.py algo=vdn      # VDN: the same with the agents' Q-values summed

One agent network (Dense 64, GRU 64, Dense 9 actions) is shared by the three marines, each seeing its own view (75)
and its index; illegal actions (SMAX's 8 legal-action flags per row... its dead and out-of-range moves) are never
chosen. The mixer is conditioned on SMAX's world state (72). After pymarl's / JaxMARL's QMIX (``baselines/QLearning/
config/alg/ql_rnn_smax.yaml``: double-Q targets, reward x 10, epsilon 1 -> 0.05, MSE, grad norm 10), smaller for the
CPU: 32 envs x 32 steps per iteration, 4 gradient steps of 32 sequences each, lr 5e-4 (Adam), a replay of 64k rows.
"""

from algos.qmix_config import QMixConfig
from srljax.config import EnvConfig, Experiment, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,
        env=EnvConfig(id="jaxmarl/smax:3m", num_envs=32),
        algo=QMixConfig(num_steps=32, hidden_size=64, batch_size=32, replay_capacity=64_000, learning_starts=10_000,
                        target_update_every=200, eps_end=0.05, exploration_fraction=0.05, reward_scale=10.0,
                        mixer_embed=32, hypernet_hidden=64),
        trainer=TrainerConfig(lr=5e-4, update_epochs=4, num_minibatches=1, max_grad_norm=10.0, anneal_lr=False),
        timeout_seconds=2400,
    )
