"""dm_control through envpool with PPO (``CartpoleSwingup-v1`` by default; ``env.id`` picks the task).

    python -m launch.local configs/dmc_ppo.py
    python -m launch.local configs/dmc_ppo.py env.id=CheetahRun-v1
    python -m launch.local configs/dmc_ppo.py env.id=WalkerWalk-v1

envpool's dm_control tasks (``envpool.mujoco.dmc``, 1,000 steps an episode, rewards in [0, 1] per step) give Dict
observations (``position``, ``velocity``, ...); they arrive flattened into one float32 vector (``envs/spaces.py``).
Settings: CleanRL's ``ppo_continuous_action.py`` optimiser (2,048 samples an update, 32 minibatches x 10
epochs, lr 3e-4 annealed, 64x64 tanh MLPs, observation and reward normalisation) with a small entropy bonus
(0.005) and the value loss unclipped, collected as 8 envs x 256 steps. Clipping the value loss lost on
CartpoleSwingup and won on CheetahRun (1M steps, 3 seeds: median 620 against 461): for CheetahRun add
``algo.clip_vloss=true``. dm_control episodes all last 1,000 steps, so envs started together stay
in step: with 64 envs x 32 steps every batch is one 32-step slice of the same phase of every episode (all swinging
up, or all balancing): in 14 of 22 such tuning runs CartpoleSwingup reached >= 700 and fell back below it by 1M
steps. 8 x 256 spans a quarter of an episode per batch. Tuned on CartpoleSwingup (bench/RESULTS.md, "dm_control,
MiniGrid, Football", with the reference points: CleanRL's PPO at 8M steps, 10 seeds, reaches 590 on
cartpole-swingup and 472 on cheetah-run).
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=550, worst=350, wall_s=90,
    source="the gate at 9cfbcd3+changes on this 2-core box: CartpoleSwingup 706.6 / 840.4 / 522.5, 85-92 s "
    "(bench/RESULTS.md, an AMD box: 795.0 / 722.4 / 790.0)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,
        env=EnvConfig(id="CartpoleSwingup-v1", num_envs=8),
        algo=PPOConfig(num_steps=256, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, clip_vloss=False, ent_coef=0.005,
                       vf_coef=0.5, hidden_sizes=(64, 64), activation="tanh", normalize_obs=True, normalize_reward=True),
        trainer=TrainerConfig(lr=3e-4, anneal_lr=True, num_minibatches=32, update_epochs=10, max_grad_norm=0.5),
    )
