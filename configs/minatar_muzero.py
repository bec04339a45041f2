"""MinAtar Breakout (gymnax) by MuZero: every move of 32 envs searched by mctx's Gumbel MuZero policy over the agent's
own learned model, a replay of the searched trajectories on the device, all in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/minatar_muzero.py
    python -m launch.local configs/minatar_muzero.py algo.num_simulations=16 total_env_steps=1000000

Three MLPs (representation, dynamics, prediction; 128x128, a 64-wide hidden state) on the flattened 10x10x4 frame,
8 simulations per move, unroll 5 moves, 10-step value targets from the search's values, value and reward on a
categorical support of 21 bins (``algos/muzero.py``). Each iteration: 16 searched moves per env (512 env steps),
then 4 minibatches of 128 windows from the last 100k rows. bench/RESULTS.md ("Planning agents: MuZero") has the
comparison with ``configs/minatar_breakout_ppo.py`` at the same env-step budget; its "issue 40, session 24" section
has the replay ratio measured higher (``trainer.num_minibatches=16`` / ``32``: well above this config's return up
to ~100k env steps, ahead of PPO at 50k, behind it from ~90k) and the options not yet measured to the end:
``algo.consistency_coef=2`` (EfficientZero's consistency loss), ``algo.value_bootstrap=fresh`` (the current
network's bootstrap values), ``algo.rescale_values=false`` (Gumbel q-values at their own scale).
"""

from srljax.config import EnvConfig, EvalConfig, Experiment, LogConfig, MuZeroConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=2.5, worst=1.5, wall_s=1200, seeds=(1, 2, 3), quick=False,
    source="bench/RESULTS.md (Planning agents: MuZero on MinAtar Breakout): 2.9 / 1.65 / 2.8 at 300k env steps "
    "(seeds 1-3; PPO at the same budget 12.8 / 11.05 / 10.85)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=300_000,
        timeout_seconds=3 * 3600,
        env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=32),
        algo=MuZeroConfig(num_steps=16, gamma=0.99, num_simulations=8, unroll_steps=5, td_steps=10, support_size=10,
                          batch_size=128, replay_capacity=100_000, state_size=64, hidden_sizes=(128, 128)),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=4, update_epochs=1, max_grad_norm=5.0),
        eval=EvalConfig(every_updates=0, final=False),
        log=LogConfig(log_every=10),
    )
