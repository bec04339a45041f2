"""MuJoCo PPO against CleanRL's published ``ppo_continuous_action`` table: every MuJoCo task of it, 1M steps, 3 seeds.

    python -m launch.sweep configs/sweeps/mujoco.py --dry-run      # the 18 trials and their commands
    python -m launch.sweep configs/sweeps/mujoco.py                # run them (2 cores: one at a time), then report
    python -m launch.sweep configs/sweeps/mujoco.py --report       # runs/mujoco/results.md and curves.png again

Reference: CleanRL's documentation, "ppo_continuous_action.py" -> "Experiment results", MuJoCo v4
table (https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_continuous_actionpy; runs tagged ``pr-424``
in openrlbenchmark, 1M env steps with ``cleanrl/ppo_continuous_action.py`` defaults: 1 env x 2048
steps, 32 minibatches x 10 epochs). The figures are CleanRL's mean ± std of the final episodic
return over its seeds; only the means are compared here:

| env | CleanRL |
| --- | --- |
| HalfCheetah-v4 | 1442.64 ± 46.03 |
| Walker2d-v4 | 2287.95 ± 571.78 |
| Hopper-v4 | 2382.86 ± 271.74 |
| InvertedPendulum-v4 | 963.09 ± 22.20 |
| Humanoid-v4 | 716.11 ± 49.08 |
| Pusher-v4 | -40.38 ± 7.15 |

The same table lists ``dm_control/*`` tasks; envpool has them too (``CheetahRun-v1``, ``WalkerWalk-v1``, ...,
Dict observations) and ``configs/dmc_ppo.py`` runs them, but this sweep keeps to the MuJoCo v4 rows.
Every trial runs ``configs/mujoco_ppo_all_tasks.py`` (``configs/mujoco_ppo.py`` with the 32 x 10
optimiser that Hopper needs; Humanoid with initial log std 0: see its docstring) through one file
per task in ``configs/mujoco_tasks/``, since a sweep's grid applies to every config. The sweep and its figures are in bench/RESULTS.md
("MuJoCo PPO on every task"). On the shared 2-core machine a Hopper trial took 8-13 minutes,
a Humanoid trial 14-54 minutes, depending on load.
"""

from launch.sweep import Reference, Sweep

CLEANRL_PPO_CONTINUOUS = Reference(
    title="CleanRL",
    source=("CleanRL ppo_continuous_action.py, MuJoCo v4, 1M env steps, mean final episodic return over seeds "
            "(https://docs.cleanrl.dev/rl-algorithms/ppo/#ppo_continuous_actionpy, openrlbenchmark tag pr-424)"),
    returns={
        "HalfCheetah-v4": 1442.64,
        "Walker2d-v4": 2287.95,
        "Hopper-v4": 2382.86,
        "InvertedPendulum-v4": 963.09,
        "Humanoid-v4": 716.11,
        "Pusher-v4": -40.38,
    },
    env_steps=1_000_000,
)


TASK_CONFIGS = ["configs/mujoco_tasks/halfcheetah.py", "configs/mujoco_tasks/walker2d.py",
                "configs/mujoco_tasks/hopper.py", "configs/mujoco_tasks/inverted_pendulum.py",
                "configs/mujoco_tasks/humanoid.py", "configs/mujoco_tasks/pusher.py"]
"""one file per task (``configs/mujoco_ppo_all_tasks.py`` on that env, Humanoid with its own initial noise)."""


def sweep() -> Sweep:
    return Sweep(
        name="mujoco",
        configs=TASK_CONFIGS,
        seeds=[1, 2, 3],
        overrides=["total_env_steps=1000000"],
        reference=CLEANRL_PPO_CONTINUOUS,
    )
