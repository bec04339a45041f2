"""CartPole-v1 with the user-written REINFORCE of ``examples/reinforce.py`` (a config file like any other).

    python -m launch.local examples/cartpole_reinforce.py
    python -m launch.local configs/cartpole_ppo.py algo=examples.reinforce:ReinforceConfig \\
        trainer.num_minibatches=1 trainer.update_epochs=1          # the same algorithm picked on the command line
"""

from examples.reinforce import ReinforceConfig
from srljax.config import EnvConfig, Experiment, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=300, worst=150, wall_s=15,
    source="the gate at 9cfbcd3+changes on this 2-core box: 442.8 / 417.7 / 226.4 (plain REINFORCE: its seeds "
    "spread), 13 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=300_000,
        env=EnvConfig(id="CartPole-v1", num_envs=16),
        algo=ReinforceConfig(num_steps=64, gamma=0.99, vf_coef=0.5, ent_coef=0.0),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=1, update_epochs=1, max_grad_norm=0.5),
    )
