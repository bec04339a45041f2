"""Craftax-Classic (symbolic) as a JAX env with PPO: world, rollout and update in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/craftax_classic_ppo.py

Craftax's own PPO baseline (``Craftax/ppo.py``: GAE lambda 0.8, clip 0.2, entropy 0.01, 4 epochs, grad norm 1.0)
scaled to a CPU: 32 envs x 64 steps (theirs 1,024 x 64), a tanh MLP 64x64 (theirs 512 x 3; 256x256 ran at half the
speed here), 4 x 4 minibatches, lr 5e-4. The reward is craftax's (+1 per achievement, +-0.1 per health point). A done env gets its fresh world from a
reset computed for the done envs only (``envs.jax_envs.JaxEnv.reset_slots``: craftax's world generation costs more than
a step). No envpool equivalent.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=2.5, worst=2.5, wall_s=125, seeds=(1,), quick=False, overrides=("total_env_steps=81920",),
    source="bench/RESULTS.md (issue 39, helper 39a, craftax): 3.2 at 81,920 steps (seed 1; random play 1.35), "
    "122 s on a crowded 2-core box; the full 300k budget was not run; needs craftax (pip install -e '.[jaxenvs]')",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=300_000,
        env=EnvConfig(id="craftax/Craftax-Classic-Symbolic-v1", num_envs=32),
        algo=PPOConfig(num_steps=64, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.8, hidden_sizes=(64, 64),
                       activation="tanh"),
        trainer=TrainerConfig(lr=5e-4, num_minibatches=4, update_epochs=4, max_grad_norm=1.0),
        log=LogConfig(log_every=5),
    )
