"""MuJoCo TD3 (HalfCheetah-v4 by default) with CleanRL's ``td3_continuous_action.py`` settings: 1M env steps on one
env, 256x256 ReLU actor and twin critics, lr 3e-4 for both (Adam, no annealing or clipping), batch 256, one
update per env step (replay ratio 256 samples per env step), tau 0.005, gamma 0.99, exploration noise 0.1,
target policy noise 0.2 clipped at 0.5 (all in half-ranges of the action box), policy_frequency 2 (the actor and
all targets every second update), learning_starts 25,000 (uniformly random actions until then), a 1M-transition
uniform replay.

    python -m launch.local configs/mujoco_td3.py env.id=Hopper-v4 seed=2
    python -m launch.local configs/mujoco_td3.py algo.updates_per_call=1   # CleanRL exactly

One change, for wall time on a CPU, as ``configs/mujoco_sac.py``: 8 updates per compiled call, so acting's params
refresh every 8 env steps; the replay ratio and everything counted in env steps are CleanRL's.
bench/RESULTS.md ("SAC and TD3") has this config's runs.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, Promise, ReplayConfig, TD3Config, TrainerConfig

PROMISE = Promise(
    "return", median=1700, worst=1400, wall_s=1550, overrides=("env.id=Hopper-v4", "total_env_steps=300000"),
    quick=False,
    source="bench/RESULTS.md (SAC / TD3): Hopper 300k, seeds 1-3: 2,192 / 1,877 / 2,151 (CleanRL seed 1: 1,990)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,
        env=EnvConfig(id="HalfCheetah-v4", num_envs=1),
        algo=TD3Config(
            gamma=0.99, batch_size=256, replay_ratio=256.0, learning_starts=25_000, tau=0.005, policy_frequency=2,
            exploration_noise=0.1, policy_noise=0.2, noise_clip=0.5, policy_lr=3e-4, hidden_sizes=(256, 256),
            activation="relu", replay=ReplayConfig(capacity=1_000_000, alpha=0.0), updates_per_call=8,
        ),
        trainer=TrainerConfig(lr=3e-4, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1,
                              update_epochs=1),
        log=LogConfig(log_every=1_000),
    )
