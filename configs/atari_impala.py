"""Atari IMPALA with Cleanba's settings (Pong by default).

    python -m launch.local configs/atari_impala.py env.id=Breakout-v5

Source: Cleanba, ``cleanba/cleanba_impala.py`` (github.com/vwxyzjn/cleanba; Huang et al. 2023,
"Cleanba: A Reproducible and Efficient Distributed Reinforcement Learning Platform"): Machado et al.
2018 env protocol (sticky actions 0.25, full action space, no episodic life, noop_max 1, 108,000-frame
episode cap, clipped rewards); 64 envs x 2 actor threads per actor device, 20 steps, gamma 0.99,
learning rate 6e-4 annealed, 4 minibatches (one optimiser step each, one pass), entropy 0.01, value
0.5, gradient norm clip 40, PyTorch-style RMSProp (decay 0.99, eps 0.01), losses summed over the
batch, 50M env steps.

Differences: the torso is the Nature CNN (``algo.network=cnn``; Cleanba uses the IMPALA ResNet
with channels 16-32-32 and a 256 unit layer), and Cleanba's two actor threads of 64 envs are one
async envpool ring of 128 envs returning 64 at a time, acting one update behind the learner
(``trainer.overlap_collection``, Cleanba's concurrency).
"""

from srljax.config import CheckpointConfig, EnvConfig, Experiment, IMPALAConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=18, worst=15, wall_s=140000, quick=False,
    source="IMPALA reaches ~20 on Pong well within 50M env steps (Espeholt et al. 2018); not trained to a score "
    "on this 2-core machine",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=50_000_000,
        env=EnvConfig(id="Pong-v5", num_envs=128, batch_size=64, max_episode_steps=27_000,
                      options={"episodic_life": False, "reward_clip": True, "repeat_action_probability": 0.25,
                               "full_action_space": True, "noop_max": 1}),
        algo=IMPALAConfig(num_steps=20, gamma=0.99, ent_coef=0.01, vf_coef=0.5, rho_bar=1.0, c_bar=1.0,
                          optimizer="rmsprop", rmsprop_decay=0.99, rmsprop_eps=0.01, network="cnn"),
        trainer=TrainerConfig(lr=6e-4, anneal_lr=True, num_minibatches=4, update_epochs=1, max_grad_norm=40.0,
                              overlap_collection=True),
        checkpoint=CheckpointConfig(every_updates=1000),
    )
