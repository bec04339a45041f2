"""CartPole-v1 with IMPALA (V-trace actor-critic), single process.

    python -m launch.local configs/cartpole_impala.py
    python -m launch.local configs/cartpole_impala.py trainer.overlap_collection=true   # act one update behind

Cleanba's IMPALA loss and optimiser (losses summed over the batch, PyTorch-style RMSProp, gradient
norm clip 40; see ``algos/impala.py``), with CartPole-sized segments and learning rate. One pass over
each batch: ``trainer.num_minibatches`` optimiser steps on groups of whole env columns.
"""

from srljax.config import EnvConfig, Experiment, IMPALAConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=450, worst=300, wall_s=25,
    source="the gate at 9cfbcd3+changes on this 2-core box: 500.0 / 500.0 / 500.0, 14-22 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="CartPole-v1", num_envs=32),
        algo=IMPALAConfig(num_steps=16, gamma=0.99, ent_coef=0.001, vf_coef=0.5, rho_bar=1.0, c_bar=1.0),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=True, num_minibatches=8, update_epochs=1, max_grad_norm=40.0),
    )
