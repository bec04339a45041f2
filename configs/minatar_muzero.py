"""MinAtar Breakout (gymnax) by MuZero: every move of 32 envs searched by mctx's Gumbel MuZero policy over the agent's
own learned model, a replay of the searched trajectories on the device, all in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/minatar_muzero.py 'seeds=[1,2,3]'
    python -m launch.local configs/minatar_muzero.py algo.num_simulations=16 total_env_steps=300000

Three MLPs (representation, dynamics, prediction; 128x128, a 64-wide hidden state) on the flattened 10x10x4 frame,
8 simulations per move, unroll 5 moves, 10-step value targets from the search's values, value and reward on a
categorical support of 21 bins (``algos/muzero.py``). Each iteration: 16 searched moves per env (512 env steps),
then 32 minibatches of 128 windows (4,096 windows per 512 env steps) from the last 100k rows. 50k env steps: the
budget where it beats ``configs/minatar_breakout_ppo.py`` run at the same budget (bench/RESULTS.md, "issue 40,
session 24": median 2.8 against PPO's 2.1, seeds 1-3). It learns faster than PPO only early: PPO overtakes it
from ~80k env steps (MuZero levels off near 3 by 105k, PPO reaches 11 at 300k). Options not yet measured to the end:
``algo.consistency_coef=2`` (EfficientZero's consistency loss), ``algo.value_bootstrap=fresh`` (the current
network's bootstrap values), ``algo.rescale_values=false`` (Gumbel q-values at their own scale).
"""

from srljax.config import EnvConfig, EvalConfig, Experiment, LogConfig, MuZeroConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=2.5, worst=1.8, wall_s=240, seeds=(1, 2, 3), quick=False,
    source="bench/RESULTS.md (issue 40, session 24): 2.15 / 3.2 / 2.8 at 49,664 env steps (seeds 1-3 in one program, "
    "240 s at load 11-15); PPO at the same budget 2.1 / 1.75 / 2.15",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=50_000,
        timeout_seconds=3 * 3600,
        env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=32),
        algo=MuZeroConfig(num_steps=16, gamma=0.99, num_simulations=8, unroll_steps=5, td_steps=10, support_size=10,
                          batch_size=128, replay_capacity=100_000, state_size=64, hidden_sizes=(128, 128)),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=32, update_epochs=1, max_grad_norm=5.0),
        eval=EvalConfig(every_updates=0, final=False),
        log=LogConfig(log_every=1),
    )
