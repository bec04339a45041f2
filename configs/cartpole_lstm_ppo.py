"""Masked-velocity CartPole with LSTM PPO: a partially observable task a feed-forward policy cannot solve.

    python -m launch.local configs/cartpole_lstm_ppo.py
    python -m launch.local configs/cartpole_lstm_ppo.py algo.lstm_size=0          # feed-forward: stays low
    python -m launch.local configs/cartpole_lstm_ppo.py layout.mode=distributed layout.inference=remote \\
        trainer.batch_envs=16 layout.num_actors=2 env.num_envs=8                   # carries in a policy worker

``env.obs_mask=(0, 2)`` keeps the cart position and pole angle and hides both velocities, so the
policy must infer them from consecutive observations. The LSTM (``algo.lstm_size``, after a 64-unit
MLP torso) carries that memory; PPO minibatches are then whole env columns (16 envs / 4 minibatches
= 4 columns of 64 steps each), each re-unrolled from the carry stored at its first row
(``algos/recurrent.py``). Observation and reward normalisation matter here: without them the same
LSTM stayed near 100-150 (the hidden velocities are small differences of small numbers). ``tests/test_recurrent.py`` checks that this reaches a mean return of 400
while the same config with ``algo.lstm_size=0`` stays below 200.
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=450, worst=300, wall_s=65,
    source="the gate at 9cfbcd3+changes on this 2-core box: 500.0 / 500.0 / 500.0, 59-67 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=400_000,
        env=EnvConfig(id="CartPole-v1", num_envs=16, obs_mask=(0, 2)),
        algo=PPOConfig(num_steps=64, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                       hidden_sizes=(64,), lstm_size=128, normalize_obs=True, normalize_reward=True),
        trainer=TrainerConfig(lr=1e-3, num_minibatches=4, update_epochs=4),
    )
