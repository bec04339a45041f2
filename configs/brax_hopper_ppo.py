"""brax's Hopper as a JAX env with PPO: physics, rollout and update in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/brax_hopper_ppo.py

``configs/mujoco_ppo.py``'s network and normalisers (64 envs x 32 steps, 64x64 tanh, observation and reward
normalisation, initial log std -1) with the 32 x 10 optimiser its docstring gives Hopper; brax's positional
physics (``env.options.backend``). The envpool equivalent is ``configs/mujoco_tasks/hopper.py``.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=1000, worst=800, wall_s=240, seeds=(1,), quick=False,
    source="bench/RESULTS.md (the Anakin path): 1,253 at 1M (seed 1; brax pays 1 per healthy step: mostly staying "
    "up), 230 s with ~100 s compiling; needs brax (pip install -e '.[jaxenvs]')",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,
        env=EnvConfig(id="brax/hopper", num_envs=64),
        algo=PPOConfig(num_steps=32, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, clip_vloss=False, ent_coef=0.0,
                       vf_coef=0.5, hidden_sizes=(64, 64), activation="tanh", init_log_std=-1.0, normalize_obs=True,
                       normalize_reward=True),
        trainer=TrainerConfig(lr=3e-4, anneal_lr=True, num_minibatches=32, update_epochs=10, max_grad_norm=1.0),
        log=LogConfig(log_every=10),
    )
