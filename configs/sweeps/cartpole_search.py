"""An Optuna search over CartPole PPO's learning rate, entropy and clip coefficients, with pruning.

    python -m launch.sweep configs/sweeps/cartpole_search.py            # runs/cartpole_search/search.md, search.png
    python -m launch.sweep configs/sweeps/cartpole_search.py            # again: the study continues where it stopped
    python -m launch.sweep configs/sweeps/cartpole_search_grid.py       # the 24-point grid of the same space

24 trials of 60k env steps each (about 15 s of training and 10 of start-up on 2 busy cores), TPE after 6 random
ones, the median pruner from 20k env steps: a trial whose recent return is below the median of the earlier
trials' at the same step stops there. The grid beside it (``cartpole_search_grid.py``) runs every combination of
4 learning rates x 3 entropy coefficients x 2 clip coefficients in the same ranges, none pruned.
"""

from launch.sweep import Choice, LogUniform, Search, Sweep

STEPS = 60_000
OVERRIDES = [f"total_env_steps={STEPS}", "log.wandb=disabled", "log.progress=lines", "log.progress_every_s=30",
             "log.prometheus_port=-1", "checkpoint.keep=1"]


def sweep() -> Sweep:
    return Sweep(
        name="cartpole_search",
        configs=["configs/cartpole_ppo.py"],
        seeds=[1],
        overrides=OVERRIDES,
        search=Search(
            space={"trainer.lr": LogUniform(1e-4, 3e-3),
                   "algo.ent_coef": LogUniform(1e-4, 3e-2),
                   "algo.clip_coef": Choice([0.1, 0.2, 0.3])},
            trials=24, sampler="tpe", pruner="median", startup_trials=6, warmup_env_steps=20_000, seed=0,
        ),
    )
