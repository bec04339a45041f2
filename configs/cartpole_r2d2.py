"""Masked-velocity CartPole with R2D2: recurrent replay, stored LSTM state and burn-in, in one process.

    python -m launch.local configs/cartpole_r2d2.py
    python -m launch.local configs/cartpole_r2d2.py algo.burn_in=0                 # no burn-in
    python -m launch.local configs/cartpole_r2d2.py algo=dqn                       # feed-forward DQN: stays low

``env.obs_mask=(0, 2)`` keeps the cart position and pole angle and hides both velocities (as
``configs/cartpole_lstm_ppo.py``), so a policy must infer them from consecutive observations. R2D2's LSTM
carries that memory; the replay stores the carry each row was acted with and sequences of 40 rows + 3
for the n-step targets, of which the first 20 only warm the stored state (burn-in) and the last 20 are
trained. Prioritized replay (alpha 0.6, R2D2's sequence priorities) and value rescaling as the paper's;
network, learning rate and replay ratio sized for CartPole on a CPU. Reference: the LSTM PPO config on
the same masked task reaches 400 (``tests/test_recurrent.py``); bench/recurrent_replay.py runs this config
with burn-in 20 and 0 and a feed-forward DQN on the same task, recorded in bench/RESULTS.md.

The target network is copied every 500 updates (was 100): with 100, seed 1 on this AMD EPYC pair peaked at a
greedy 404 and fell back to 261 by the end (its training return swinging 270-430); with 500 the best greedy
evaluations at seeds 1-4 were 500 / 500 / 477 / 500 (bench/RESULTS.md, "R2D2's target copy").
"""

from srljax.config import EnvConfig, EvalConfig, Experiment, LogConfig, Promise, R2D2Config, ReplayConfig, TrainerConfig

PROMISE = Promise(
    "eval_best", median=450, worst=400, wall_s=60,
    source="launch.local at seeds 1-4 on this 2-core box with the target copied every 500 updates: best greedy "
    "evaluation 500 / 500 / 476.6 / 500, ~60 s (every 100 updates: 404 / 500 / 500)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=200_000,
        env=EnvConfig(id="CartPole-v1", num_envs=8, obs_mask=(0, 2)),
        algo=R2D2Config(
            gamma=0.99, n_step=3, batch_size=32, replay_ratio=1.0, learning_starts=5_000,
            sequence_length=40, burn_in=20, lstm_size=64, hidden_sizes=(64,), activation="relu", dueling=True,
            double_q=True, loss="mse", target_update_every=500, tau=1.0,
            eps_start=1.0, eps_end=0.01, exploration_fraction=0.25, updates_per_call=4,
            replay=ReplayConfig(capacity=50_000, alpha=0.6, beta0=0.4),
        ),
        trainer=TrainerConfig(lr=5e-4, anneal_lr=False, adam_eps=1e-8, max_grad_norm=10.0, num_minibatches=1,
                              update_epochs=1),
        eval=EvalConfig(every_updates=1_000, episodes=16, deterministic=True),
        log=LogConfig(log_every=100),
    )
