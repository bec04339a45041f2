"""MinAtar Breakout as a JAX env (gymnax) with PPO at PureJaxRL's MinAtar settings, in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/minatar_breakout_ppo.py

64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-3 annealed, relu MLP 64x64 on the flattened 10x10x4 frame
(PureJaxRL's MinAtar notebook), 10M env steps. The envpool equivalent is Atari Breakout (``configs/atari_ppo.py``
with ``env.id=Breakout-v5``); bench/RESULTS.md has both.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=60, worst=40, wall_s=240, seeds=(1,), quick=False,
    source="bench/RESULTS.md (the Anakin path): 88.3 at 10M (seed 1, 230 s with the test suite beside it); "
    "PureJaxRL's ppo.py at the same settings 86.4",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=10_000_000,
        env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=64),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95, network="mlp",
                       hidden_sizes=(64, 64), activation="relu"),
        trainer=TrainerConfig(lr=5e-3, num_minibatches=8, update_epochs=4, max_grad_norm=0.5),
        log=LogConfig(log_every=10),
    )
