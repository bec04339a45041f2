"""CartPole-v1 PPO, a population of 4 (PBT) where two members start with a learning rate too small to learn.

    python -m launch.local configs/cartpole_pbt.py                      # RUN_DIR/pbt/lineage.jsonl, lineage.png
    python -m launch.local configs/cartpole_pbt.py pbt.ready_updates=0  # control: the same members, no exploit

Members 0 and 1 start at lr 1e-6 (they stay near random play in this budget), 2 and 3 at 1e-3. Every
10 updates each member plays 20 evaluation episodes; the bottom quarter (one member) copies a member of
the top quarter and perturbs its learning rate by 0.8 or 1.2 (``srljax/loops/population.py``).

Evaluation samples actions here (``eval.deterministic=false``): the greedy action of a freshly
initialised CartPole network can balance the pole for hundreds of steps (one member of this
population scored 276 before learning anything), so greedy scores would not tell an untrained
member from a trained one; sampled actions score about 20 untrained and about 500 trained.
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig
from srljax.config.eval import EvalConfig
from srljax.config.pbt import PBTConfig

PROMISE = Promise(
    "pbt_worst_member", median=450, worst=400, wall_s=55,
    source="the gate at 9cfbcd3+changes on this 2-core box: the worst of 4 members (two start at lr 1e-6) 500.0 "
    "/ 500.0 / 497.6, 48-53 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=150_000,  # per member
        env=EnvConfig(id="CartPole-v1", num_envs=8),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=True, num_minibatches=8, update_epochs=4),
        eval=EvalConfig(episodes=20, deterministic=False),
        pbt=PBTConfig(population=4, ready_updates=10, quantile=0.25, member_lr=(1e-6, 1e-6, 1e-3, 1e-3),
                      lr_range=(1e-5, 1e-2)),
    )
