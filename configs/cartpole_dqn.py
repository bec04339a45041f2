"""CartPole-v1 with DQN, CleanRL's ``dqn.py`` settings (uniform replay of 10k transitions), on 4 envs.

    python -m launch.local configs/cartpole_dqn.py
    python -m launch.local configs/cartpole_dqn.py algo.double_q=true algo.n_step=3 algo.replay.alpha=0.6

CleanRL's step counts become this config's: a batch of 128 every 10 env steps is a replay ratio of
12.8 samples per env step, and a target copy every 500 env steps is one every 50 updates. Two
changes, both for wall time on a CPU (``bench/replay_loop.py``, bench/RESULTS.md "replay loop"):
8 envs instead of CleanRL's 1 (same replay ratio, capacity, epsilon schedule and learning start,
all counted in env steps), because acting and inserting costs about the same for 1 or 8 rows; and
16 updates per compiled call (``algo.updates_per_call``), so acting's params are refreshed every
160 env steps instead of 10. ``env.num_envs=1 algo.updates_per_call=1`` is CleanRL exactly.
CleanRL reports 488.7 +- 16.1 at 500k steps; bench/RESULTS.md (issues 11 and 27) has this config's runs.
"""

from srljax.config import DQNConfig, EnvConfig, Experiment, LogConfig, Promise, ReplayConfig, TrainerConfig

PROMISE = Promise(
    "return", median=400, worst=250, wall_s=60,
    source="the gate at 9cfbcd3+changes on this 2-core box: 500.0 / 500.0 / 468.6, 50-62 s (the return of the "
    "acting policy, epsilon 0.05)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="CartPole-v1", num_envs=8),
        algo=DQNConfig(
            gamma=0.99, n_step=1, batch_size=128, replay_ratio=12.8, learning_starts=10_000,
            double_q=False, dueling=False, loss="mse", target_update_every=50, tau=1.0,
            eps_start=1.0, eps_end=0.05, exploration_fraction=0.5, hidden_sizes=(120, 84), activation="relu",
            replay=ReplayConfig(capacity=10_000, alpha=0.0), updates_per_call=16,
        ),
        trainer=TrainerConfig(lr=2.5e-4, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1,
                              update_epochs=1),
        log=LogConfig(log_every=500),
    )
