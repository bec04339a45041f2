"""SMAX ``3m`` (JaxMARL's SMAC port: 3 marines against 3 marines of JaxMARL's heuristic enemy) with QMIX on the Anakin
path: recurrent epsilon-greedy acting, a replay of sequences on the device and the gradient steps in one program.

    pip install -e '.[jaxenvs]'            # or '.[marl]': jaxmarl alone
    python -m launch.local configs/smax_3m_qmix.py

One agent network (Dense 64, GRU 64, Dense to its 8 actions) is shared by the three marines, each seeing its own view
(75) and its index; illegal actions (each row's 8 legal-action flags: attacks out of range, a dead unit's moves) are
never chosen. The mixer is conditioned on SMAX's world state (72). After pymarl's / JaxMARL's QMIX (``baselines/QLearning/
config/alg/ql_rnn_smax.yaml``: double-Q targets, reward x 10, epsilon 1 -> 0.05, MSE, grad norm 10), smaller for the
CPU: 32 envs x 32 steps per iteration, 4 gradient steps of 32 sequences each, lr 5e-4 (Adam), a replay of 64k rows.

Measured (bench/RESULTS.md, "QMIX and VDN on the Anakin path", seed 1 only, a box at load 16-27): at 1M env steps the
last line's win rate 0.65 and return 1.58 (last 20 episodes); win rate 0.29 on average over the lines of 0.1-0.2M,
0.43 over 0.4-0.5M, 0.57 over 0.7-0.9M; the best 3 consecutive lines' mean return 1.67 (wins 0.7 / 0.85 / 0.65) at
0.92M; 31 min. Not the 0.9 the issue asks for.
"""

from algos.qmix_config import QMixConfig
from srljax.config import EnvConfig, Experiment, Promise, TrainerConfig

PROMISE = Promise(
    "best_return", median=1.6, worst=1.6, seeds=(1,), wall_s=1950, quick=False,
    source="bench/RESULTS.md (QMIX and VDN on the Anakin path, issue 41 item 2): seed 1, best 3-line mean return 1.67 "
    "at 0.92M of 1M (a mean return R means a win rate >= R - 1); 32 min 23 s on the 2-core box at load 16-27",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,
        env=EnvConfig(id="jaxmarl/smax:3m", num_envs=32),
        algo=QMixConfig(num_steps=32, hidden_size=64, batch_size=32, replay_capacity=64_000, learning_starts=10_000,
                        target_update_every=200, eps_end=0.05, exploration_fraction=0.05, reward_scale=10.0,
                        mixer_embed=32, hypernet_hidden=64),
        trainer=TrainerConfig(lr=5e-4, update_epochs=4, num_minibatches=1, max_grad_norm=10.0, anneal_lr=False),
        timeout_seconds=3600,
    )
